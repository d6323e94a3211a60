"""Where a check's session pair spends its time, and what shorter pairs or longer blocks
would buy: quiet and beside two noisy neighbours.

Run (about 3 minutes; skipped without ``--ortperf``)::

    pytest --ortperf -s -p no:cacheprovider benchmarks/plugin/test_bench_pair_length.py

The gate-quality benchmark's compare (``attention(dim=256)`` with optimizations disabled
against the optimized one, IOBinding) on fresh session pairs, created the way a check creates
its later pairs (``OrtSession.derive``) and measured by the engine the gate uses. Variants
take turns in a shuffled order each round, so drift and the neighbours hit them alike:

- **pair length**: a third of the 1 s budget per pair (what a check spends), a sixth, a
  twelfth and a twenty-fourth, 2 ms blocks;
- **block length**: 2 ms (the engine's), 4 ms and 8 ms blocks, a third of the budget per
  pair.

For each variant it prints the wall time of a pair (creating the sessions included) and the
clean blocks' share of it, the blocks' log-ratio standard deviation, a pair's own error (the
run estimate's standard error, widened for dependent blocks), the spread of the pairs'
estimates and the spread between pairs beyond their own error, and the standard error a
second of such pairs buys (the spread times the square root of the wall time per pair).
Asserts only that every variant measured every pair.

Settings: ``ORTPERF_PAIRLEN_PAIRS`` [30 per variant and condition, 2 to 1000],
``ORTPERF_PAIRLEN_PHASES`` [``quiet,noisy``].
"""

from __future__ import annotations

import math
import os
import random
import time
from typing import Any

import pytest
from bench import conditions, in_condition, narrator, timing_settings

PAIR_SHARES = (1 / 3, 1 / 6, 1 / 12, 1 / 24)
BLOCKS_S = (0.004, 0.008)
DIM, BATCH = 256, 2


def _variants() -> list[tuple[str, float, float]]:
    pairs = [(f"pair {share:.3f} s", share, 0.002) for share in PAIR_SHARES]
    blocks = [(f"blocks {b * 1e3:.0f} ms", PAIR_SHARES[0], b) for b in BLOCKS_S]
    return pairs + blocks


def _rounds(
    reference: Any, candidate: Any, feeds: Any, n: int
) -> dict[str, list[tuple[float, ...]]]:
    """``n`` rounds of every variant, each on a fresh session pair: (estimate, own error,
    wall s, clean timed s, block SD, clean blocks)."""
    import numpy as np

    from pytest_ortperf.gating.rules import min_blocks_for
    from pytest_ortperf.measuring.calls import make_call
    from pytest_ortperf.measuring.engine import Engine, EngineConfig
    from pytest_ortperf.stats import ratio_of_blocks, run_estimate

    variants = _variants()
    out: dict[str, list[tuple[float, ...]]] = {name: [] for name, _, _ in variants}
    order = random.Random(11)
    for _ in range(n):
        order.shuffle(variants)
        for name, share, block_s in variants:
            started = time.perf_counter()
            ref, cand = reference.derive(), candidate.derive()
            calls = [make_call(s, feeds, "iobinding")[0] for s in (ref, cand)]
            config = EngineConfig(budget_s=share, block_s=block_s, min_blocks=min_blocks_for(0.01))
            a, c = Engine(config).interleave(calls)
            wall = time.perf_counter() - started
            logs = np.log(ratio_of_blocks(a.values, c.values))
            est = run_estimate(logs)
            timed = sum(a.values) * a.calls_per_block + sum(c.values) * c.calls_per_block
            out[name].append(
                (est.estimate, est.se * est.inflation, wall, timed, float(np.std(logs, ddof=1)),
                 float(logs.size))
            )  # fmt: skip
            del ref, cand, calls
    return out


def _table(phase: str, out: dict[str, list[tuple[float, ...]]]) -> list[str]:
    import numpy as np

    lines = []
    for name, _, _ in _variants():
        r = np.array(out[name])
        spread = float(np.std(r[:, 0], ddof=1))
        own = math.sqrt(float(np.mean(r[:, 1] ** 2)))
        between = math.sqrt(max(spread**2 - own**2, 0.0))
        wall = float(np.mean(r[:, 2]))
        lines.append(
            f"| {phase} | {name} | {len(r)} | {wall:.3f} | {np.mean(r[:, 3]) / wall:.0%} | "
            f"{np.mean(r[:, 4]):.1%} | {np.mean(r[:, 5]):.0f} | {own:.2%} | {spread:.2%} | "
            f"{between:.2%} | {spread * math.sqrt(wall):.2%} |"
        )
    return lines


def test_pair_and_block_length(
    request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str], record_property: Any
) -> None:
    from pytest_ortperf import models
    from pytest_ortperf.measuring.feeds import input_specs, make_feeds
    from pytest_ortperf.measuring.session import OrtSession

    timing_settings(request)
    say = narrator(capsys)
    n = int(os.environ.get("ORTPERF_PAIRLEN_PAIRS", "30"))
    assert 2 <= n <= 1000, "ORTPERF_PAIRLEN_PAIRS: 2 to 1000 pairs a variant"
    phases = conditions("ORTPERF_PAIRLEN_PHASES")
    reference = OrtSession.create(
        models.attention(dim=DIM), name="reference", optimization="disable"
    )
    candidate = OrtSession.create(models.attention(dim=DIM), name="candidate")
    feeds = make_feeds(input_specs(reference.sess), dims={"B": BATCH}, seed=0)
    lines = [
        "",
        "| condition | variant | pairs | wall s a pair | clean blocks' share | block SD | "
        "blocks | a pair's own error | pairs' spread | between pairs | SE a second buys |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for phase in phases:
        with in_condition(phase):
            out = _rounds(reference, candidate, feeds, n)
        assert all(len(rows) == n for rows in out.values())
        lines += _table(phase, out)
    say("\n".join(lines))
    record_property("pair_and_block_length", "\n".join(lines))
