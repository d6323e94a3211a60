# Extension modules cannot be imported twice in one process, and pytester's in-process runs
# drop the modules an inner run imported: import them once here, before any inner run.
import numpy  # noqa: F401
import onnx  # noqa: F401
import onnxruntime  # noqa: F401
import pandas  # noqa: F401
import sqlalchemy  # noqa: F401

try:  # the HTML report's charts
    import matplotlib.backends.backend_agg
    import matplotlib.figure
    import matplotlib.patches
    import matplotlib.ticker  # noqa: F401
except ImportError:
    pass

import pytest_ortperf.measure
import pytest_ortperf.models
import pytest_ortperf.recorder
import pytest_ortperf.store
import pytest_ortperf.testing  # noqa: F401
