"""Throughput under concurrency: calls per second at 1, 2 and 4 calling threads, two models.

Run alone on the machine (about 30 s; skipped without ``--ortperf``)::

    pytest --ortperf -s benchmarks/plugin/test_bench_throughput.py

Models: ``models.tiny_add()`` (about 5 us a call, most of it Python and onnxruntime's call
path, much of which holds the GIL) and ``models.control(batch=256, layers=3)`` (a MatMul
chain, about 1 ms a call, nearly all of it in kernels that run without the GIL). Each
through ``run`` with one intra-op thread and no spinning, first with all threads calling
one session (``sessions="shared"``), then with one session per thread (``"per_thread"``).
``ortperf.throughput`` runs each level ``ORTPERF_TP_SECONDS`` seconds in 3 rounds (levels in
forward, then reverse order).

Reported per model and mode: calls per second at each level, the scaling over one thread,
the spread of the rounds, and p50/p99 of a call as its caller saw it; also the cores this
process may use. On a machine with C cores and one intra-op thread per session, the
expectation is: scaling up to about min(N, C) for the kernel-bound model, less for the
call-path-bound one (the GIL serializes its Python part), and no gain past C threads, with
p99 growing as threads queue for cores. Printed and recorded with ``record_property``,
never asserted beyond every level having run.

Settings: ``ORTPERF_TP_SECONDS`` [3.0 per level]. A check that it works at tiny sizes::

    ORTPERF_TP_SECONDS=0.05 pytest --ortperf -s benchmarks/plugin/test_bench_throughput.py
"""

from __future__ import annotations

import os
from typing import Any

import pytest

LEVELS = (1, 2, 4)


@pytest.mark.parametrize("label", ["add ~5us", "matmul ~1ms"])
@pytest.mark.parametrize("sessions", ["shared", "per_thread"])
def test_throughput(
    label: str,
    sessions: str,
    ort_session: Any,
    ort_feeds: Any,
    ortperf: Any,
    record_property: Any,
) -> None:
    from pytest_ortperf import models
    from pytest_ortperf.reports.rows import format_rate, threading_note
    from pytest_ortperf.units import format_seconds

    if not ortperf.measured:
        pytest.skip("a timing benchmark: run it with --ortperf")
    seconds = float(os.environ.get("ORTPERF_TP_SECONDS", 3.0))
    if label.startswith("add"):
        session = ort_session(models.tiny_add())
    else:
        session = ort_session(models.control(batch=256, width=256, layers=3))
    r = ortperf.throughput(
        session, ort_feeds(session), concurrency=LEVELS, sessions=sessions, seconds=seconds,
        name=f"{label} {sessions}",
    )  # fmt: skip
    assert [x.concurrency for x in r.levels] == list(LEVELS)
    assert all(x.calls > 0 and len(x.rates) == 3 for x in r.levels)
    print(f"\n{label}, {threading_note(r)}:")
    print(f"  {'threads':>7} {'calls/s':>10} {'scaling':>8} {'rounds':>22} {'p50':>10} {'p99':>10}")
    for x in r.levels:
        spread = f"{format_rate(min(x.rates))}..{format_rate(max(x.rates))}"
        print(
            f"  {x.concurrency:>7} {format_rate(x.calls_per_s):>10} "
            f"{r.scaling[x.concurrency]:>7.2f}x {spread:>22} {format_seconds(x.p50):>10} "
            f"{format_seconds(x.p99):>10}"
        )
    record_property(
        "throughput",
        {
            "model": label,
            "sessions": sessions,
            "cores": r.cores,
            "levels": [x.to_dict() for x in r.levels],
            "scaling": r.scaling,
        },
    )
