"""Measuring: the bottom of the package; nothing here imports the gate, reports or glue.

- ``engine``: the timing engine (warm-up, block calibration, budgets, interleaving)
- ``calls``: the ways to call a session as zero-argument callables, and ``OrtBinding``
- ``session``: ``OrtSession``, a thin ``InferenceSession`` wrapper that keeps its settings
- ``ortvalues``: numpy arrays <-> OrtValues
- ``providers``: execution providers as plain data
- ``feeds``: random inputs from a session's signature
- ``recorded_feeds``: recorded inputs loaded from files
- ``percall``: every call timed on its own (tails)
- ``throughput``: calls per second under concurrency
- ``coldstart``: session creation and first runs in fresh processes
- ``records``: records of measured samples (one arm, a comparison of two, runs merged)
- ``outputs``: a candidate's outputs checked against a reference's
- ``recipe``: what an entry's speed depends on (model bytes, settings, onnxruntime,
  custom-op libraries, feeds), hashed
"""
