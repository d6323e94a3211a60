"""Where the time and memory go, outside the timed runs.

- :mod:`~pytest_ortperf.profiling.parse`: ``read_profile`` and ``Profile`` (its aggregates).
- :mod:`~pytest_ortperf.profiling.trace`: the JSON of a profile file and the one pass over its
  events; :mod:`~pytest_ortperf.profiling.frames`: the node and kernel frames built from it.
- :mod:`~pytest_ortperf.profiling.compare`: two profiles side by side (``compare_profiles``).
- :mod:`~pytest_ortperf.profiling.run`: a profiling session of its own (``profile_session``).
- :mod:`~pytest_ortperf.profiling.memory`: peak memory of the process (``peak_memory``).
- :mod:`~pytest_ortperf.profiling.ep_assignment`: the execution provider onnxruntime
  assigned each node (``session_placement``), as the gate's placement check reads it.
- :mod:`~pytest_ortperf.profiling.attribution`: which op types moved when a ratio regressed.
- :mod:`~pytest_ortperf.profiling.plots`: matplotlib figures (the ``plots`` extra).
"""
