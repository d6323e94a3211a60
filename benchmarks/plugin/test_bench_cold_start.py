"""Cold start of two models side by side, each launch a fresh Python process.

Run with ``pytest --ortperf -s benchmarks/plugin/test_bench_cold_start.py``. Two
comparisons, both launched interleaved (reference, candidate, reference, ...):

- depth: ``deep_chain(3)`` vs ``deep_chain(300)`` (MatMul + Add + Relu layers): the deeper
  graph takes longer to create (more nodes to resolve, optimize and give kernels);
- optimization: ``deep_chain(100)`` with ``optimization="disable"`` vs ``"all"``: the cost
  of ORT's graph optimizers at session creation, against what they save on the first run.

Each prints the median create, first-run and new-shape times of both models with the
ratio candidate/reference and its 95% interval, and records them with
``record_property``. Figures are never asserted (a loaded machine cannot fail the test).

Settings through environment variables (defaults in brackets): ``ORTPERF_COLD_LAUNCHES``
[20] launches per model, ``ORTPERF_COLD_DEEP`` [300] layers of the deep model.
"""

import os

import numpy as np

from pytest_ortperf import models

LAUNCHES = int(os.environ.get("ORTPERF_COLD_LAUNCHES", "20"))
DEEP = int(os.environ.get("ORTPERF_COLD_DEEP", "300"))


def show(title, result, record_property):
    print(f"\n{title}: {LAUNCHES} launches per model")
    for figure, c in result.items():
        line = (
            f"  {figure:<10} ref {c.reference.median * 1e3:8.2f} ms  cand "
            f"{c.candidate.median * 1e3:8.2f} ms  ratio {c.ratio:.3f} [{c.low:.3f}, {c.high:.3f}]"
        )
        print(line)
        record_property(f"{title}_{figure}_ratio", c.ratio)
        record_property(f"{title}_{figure}_reference_s", c.reference.median)
        record_property(f"{title}_{figure}_candidate_s", c.candidate.median)


def test_cold_start_depth(ortperf, record_property):
    feeds = {"X": np.ones((4, 16), np.float32)}
    result = ortperf.compare_cold_start(
        models.deep_chain(3), models.deep_chain(DEEP), feeds, name="depth",
        launches=LAUNCHES, budget=600,
    )  # fmt: skip
    show("depth", result, record_property)
    assert set(result) == {"create", "first_run", "new_shape"}


def test_cold_start_optimization(ort_session, ortperf, record_property):
    model = models.deep_chain(100)
    feeds = {"X": np.ones((4, 16), np.float32)}
    result = ortperf.compare_cold_start(
        ort_session(model, optimization="disable"), ort_session(model, optimization="all"),
        feeds, name="optimization", launches=LAUNCHES, budget=600,
    )  # fmt: skip
    show("optimization", result, record_property)
    assert set(result) == {"create", "first_run", "new_shape"}
