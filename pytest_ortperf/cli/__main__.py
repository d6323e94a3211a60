"""``python -m pytest_ortperf.cli``: the ``ortperf`` command."""

import sys

from pytest_ortperf.cli import main

sys.exit(main())
