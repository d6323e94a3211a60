"""The recorder: what the ``ortperf`` fixture gives a test.

:class:`Recorder` (``facade``) is a facade: each public method hands its measurement to
the module of its kind, which measures through :mod:`pytest_ortperf.measuring`, judges
through :mod:`pytest_ortperf.gating` and leaves what it found on the test's recording.

- ``facade``: ``Recorder``, the public methods, each a few lines
- ``context``: one test's settings, engine and gate, shared by every kind
- ``recording``: names, ``user_properties`` and deferred failures (every failure message)
- ``targets``: a target's calls, the control workload, session records
- ``pairs``: two local sessions measured interleaved as one comparison (compare, beside)
- ``deciding``: a measurement taken once, as a baseline's runs, or through the gate;
  a comparison judged on itself (``max_slowdown``)
- ``budgets``: latency budgets (``slo=``) checked, sized for and judged
- ``unsettled``: the warning of a target whose warm-up did not settle
- kinds: ``latency`` (latency, compare), ``ranking`` (rank, api_sweep), ``profiles``
  (profile, memory), ``cold_start``, ``per_call``, ``throughput``, and ``remote``
  (compare and rank of ``ort_env`` sessions, checked and profiled as ``ortperf ab``
  does: :mod:`pytest_ortperf.remote.ab`, :mod:`pytest_ortperf.remote.profiles`)
- ``beside`` (with ``beside_settings`` and ``beside_remote``): a latency judged beside
  the baseline's own model, rebuilt from the artifact store (in a worker of the baseline's
  onnxruntime when it differs), ``unchanged``, or today's mode with what was missing

Measuring and output checks live in :mod:`pytest_ortperf.measuring` (``records``,
``outputs``, ``throughput``), verdicts in :mod:`pytest_ortperf.gating`.
"""

from __future__ import annotations

from pytest_ortperf.recorder.facade import Recorder

__all__ = ["Recorder"]
