"""Gating: is a measurement regressed against its stored baseline?

- :mod:`~pytest_ortperf.gating.rules`: the pure decision rules (structure, ratio, latency).
- :mod:`~pytest_ortperf.gating.baseline`: the baseline file format, and the pure plan of
  what a run writes, prunes and reports unused;
  :mod:`~pytest_ortperf.gating.baseline_schema`: what an entry must hold (checked with
  msgspec); :mod:`~pytest_ortperf.gating.baseline_entries`: entries from records;
  :mod:`~pytest_ortperf.gating.baseline_judge`: a record judged against its entry.
- :mod:`~pytest_ortperf.gating.gate`: the per-test gate the recorder judges with.
- :mod:`~pytest_ortperf.gating.settings`: the gate's own settings record.
- :mod:`~pytest_ortperf.gating.fingerprint`: what must match between a run and its
  baseline.
- :mod:`~pytest_ortperf.gating.history`: the pure rule for a latency against earlier runs.
- :mod:`~pytest_ortperf.gating.history_baseline`: baselines built from the store's history
  (``--ortperf-baseline=history``).
- :mod:`~pytest_ortperf.gating.changes` (pure) and
  :mod:`~pytest_ortperf.gating.history_changes`: change points in the stored history.
- :mod:`~pytest_ortperf.gating.beside`: a latency judged beside the baseline's own model.
- :mod:`~pytest_ortperf.gating.suite`: a run's verdicts together (suite rates, the
  family-wise split).
- Also: ``ab`` and ``two_runs`` (comparisons judged on themselves), ``tails``, ``slo``
  (latency budgets), ``memory_rule``, ``placement``.

Gating uses the measuring core and the core; it never imports the plugin's settings or
per-run state.
"""
