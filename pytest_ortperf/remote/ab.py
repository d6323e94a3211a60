"""The A/B of one model in two environments, without pytest: :func:`ab` (what ``ortperf
ab`` runs) and its :class:`ABResult`.

Workers of both environments run on the same inputs; their outputs are checked, pairs of
fresh worker processes are measured in interleaved ABBA rounds, and the verdict without
baseline comes from :mod:`pytest_ortperf.gating.ab`. Imports nothing of the plugin, so
neither does ``ortperf ab``.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_ortperf.gating.settings import DEFAULT_ALPHA
from pytest_ortperf.results import Outcome
from pytest_ortperf.units import format_ratio_interval, format_seconds

if TYPE_CHECKING:
    from pytest_ortperf.remote.sessions import RemoteSession
    from pytest_ortperf.results import Comparison, OutputDiff, Verdict

AB_PROCESSES = 4
"""Worker-process pairs an A/B measures by default (``ortperf ab --processes``)."""


@dataclass(frozen=True)
class ABResult:
    """An A/B of two environments on one model: the comparison (ratio B/A), its verdict
    without baseline, and what changed in the optimized graphs and the profiles."""

    a: str
    b: str
    versions: tuple[str, str]
    comparison: Comparison
    verdict: Verdict
    histograms: tuple[dict[str, int], dict[str, int]]
    structure: tuple[str, ...]
    """One line per op type whose count differs in the optimized graphs, fusions named."""
    profile: tuple[str, ...]
    """Per-op-type profile difference A -> B (empty when not profiled)."""
    pairs: tuple[float, ...] = ()
    """The ratio B/A each worker-process pair read (its Hodges-Lehmann estimate)."""

    @property
    def regressed(self) -> bool:
        return self.verdict.outcome is Outcome.REGRESSED

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": {"environment": self.a, "onnxruntime": self.versions[0],
                  "op_histogram": self.histograms[0]},
            "b": {"environment": self.b, "onnxruntime": self.versions[1],
                  "op_histogram": self.histograms[1]},
            "comparison": self.comparison.to_dict(),
            "verdict": self.verdict.to_dict(),
            "structure": list(self.structure),
            "profile": list(self.profile),
            "pairs": list(self.pairs),
        }  # fmt: skip

    def lines(self) -> list[str]:
        """The report in words: versions, ratio and interval, verdict, outputs, graphs,
        profiles."""
        c = self.comparison
        a, b = self.versions
        out = [
            f"A: {self.a} (onnxruntime {a}), median {format_seconds(c.reference.median)}",
            f"B: {self.b} (onnxruntime {b}), median {format_seconds(c.candidate.median)}",
            f"B / A: {format_ratio_interval(c.ratio, c.low, c.high)} "
            f"({c.confidence:.0%} interval, {len(c.block_ratios)} block pairs"
            + (f" from {len(self.pairs)} worker-process pairs)" if self.pairs else ")"),
        ]
        if len(self.pairs) > 1:
            read = ", ".join(f"{r:.3f}" for r in self.pairs)
            out.append(f"each process pair read B / A = {read}")
        out.append(f"verdict: {self.verdict.message}")
        if c.output_diffs:
            worst = max(c.output_diffs, key=lambda d: d.max_abs)
            out.append(
                f"outputs agree: {len(c.output_diffs)} compared, largest difference "
                f"{worst.max_abs:.3g} abs, {worst.max_rel:.3g} rel ({worst.output})"
            )
        if self.structure:
            out.append("optimized graphs differ, A -> B:")
            out += [f"  {line}" for line in self.structure]
        else:
            nodes = sum(self.histograms[0].values())
            what = "node" if nodes == 1 else "nodes"
            out.append(f"optimized graphs: same op types and counts ({nodes} {what})")
        if self.profile:
            out.append("profiles, A -> B (taken in each worker, outside the timed runs):")
            out += [f"  {line}" for line in self.profile]
        return out


def check_outputs_ab(
    reference: RemoteSession,
    candidate: RemoteSession,
    feeds: Mapping[str, Any],
    *,
    api: str,
    atol: float,
    rtol: float,
    what: str,
) -> list[OutputDiff]:
    """Both sessions' outputs on the same feeds, checked with the usual tolerances
    (:func:`pytest_ortperf.measuring.outputs.verify_outputs`)."""
    from pytest_ortperf.measuring.outputs import verify_outputs
    from pytest_ortperf.remote.interleave import Arms

    ref_out, cand_out = Arms(reference, candidate, feeds, api).outputs()
    return verify_outputs(
        reference.output_names, ref_out, cand_out, atol=atol, rtol=rtol, what=what
    )


def ab(
    model: Any,
    a: str | os.PathLike[str] | Sequence[str],
    b: str | os.PathLike[str] | Sequence[str],
    *,
    dims: Mapping[str, int] | None = None,
    shapes: Mapping[str, Sequence[int]] | None = None,
    feeds: Mapping[str, Any] | None = None,
    providers: Sequence[str] | None = None,
    threads: int = 1,
    budget_s: float = 2.0,
    threshold: float = 0.05,
    alpha: float = DEFAULT_ALPHA,
    api: str = "iobinding",
    atol: float = 1e-4,
    rtol: float = 1e-3,
    profile_runs: int = 20,
    seed: int = 0,
    cache: Path | None = None,
    timeout_s: float = 60.0,
    processes: int = AB_PROCESSES,
) -> ABResult:
    """A/B of ``model`` in environments ``a`` and ``b`` (requirements or interpreter
    paths): feeds generated once here (or ``feeds``) and sent to every worker, outputs
    checked, then ``processes`` pairs of fresh worker processes (one of A, one of B each,
    started in parallel) measured in the same ABBA rounds for ``budget_s``. Each pair
    gives one estimate of B/A; the ratio is their mean and its interval comes from their
    spread (t on ``processes - 1`` degrees of freedom, never narrower than the blocks'
    own error), so a difference between processes widens it instead of reading as a
    regression. The ratio is judged against ``threshold`` without baseline; the
    optimized graphs' op types and the profiles of both are compared (profiles outside
    the timed runs; ``profile_runs=0``: none). What ``ortperf ab`` runs; ``timeout_s``
    bounds each wait for a worker's answer. ``processes`` is at most
    :data:`~pytest_ortperf.values.MAX_PROCESSES`; 1 measures one pair and assumes a 1%
    spread between processes."""
    import contextlib
    import dataclasses

    from pytest_ortperf import values
    from pytest_ortperf.gating.ab import histogram_changes, judge_ab_pairs
    from pytest_ortperf.measuring.engine import EngineConfig, unsettled_warning
    from pytest_ortperf.measuring.feeds import make_feeds
    from pytest_ortperf.measuring.records import comparison, merge_runs
    from pytest_ortperf.measuring.session import load_model_bytes
    from pytest_ortperf.remote.interleave import arm_result, measure_pairs, start_sessions
    from pytest_ortperf.remote.profiles import profile_lines, profile_runs_for
    from pytest_ortperf.remote.sessions import RemoteEnvironment

    try:
        processes = values.count(processes, 1, values.MAX_PROCESSES, "worker-process pairs")
    except values.BadValue as exc:
        raise ValueError(exc.named("processes")) from None
    _, label = load_model_bytes(model)  # a missing file fails here, before any worker
    with contextlib.ExitStack() as stack:
        envs = [
            stack.enter_context(RemoteEnvironment(spec, cache=cache, timeout_s=timeout_s))
            for spec in (a, b)
        ]

        def maker(env: RemoteEnvironment, arm: str) -> Callable[[], RemoteSession]:
            # the model as given (a path is read by each session, and named by it in errors)
            return lambda: env.session(
                model, name=f"{label} [{arm}]", providers=providers, threads=threads
            )

        arms = ((envs[0], "A"), (envs[1], "B"))
        started = start_sessions([maker(env, arm) for _ in range(processes) for env, arm in arms])
        pairs = [(started[2 * j], started[2 * j + 1]) for j in range(processes)]
        ref, cand = pairs[0]
        if feeds is None:
            feeds = make_feeds(ref.get_inputs(), dims=dims, shapes=shapes, seed=seed)
        what = f"A/B of {label}: onnxruntime {cand.version} (B) vs {ref.version} (A)"
        diffs = check_outputs_ab(ref, cand, feeds, api=api, atol=atol, rtol=rtol, what=what)
        config = EngineConfig(budget_s=budget_s)
        samples = measure_pairs(pairs, feeds, api, config)
        if not all(s.settled for pair in samples for s in pair):
            warnings.warn(unsettled_warning(label), stacklevel=2)
        parts = []
        for j, ((r, c), (s_ref, s_cand)) in enumerate(zip(pairs, samples, strict=True)):
            first = j == 0  # the record's session info (op types) is the first pair's
            parts.append(
                comparison(
                    arm_result("ortperf ab", f"{label}:reference", api, s_ref, r, first),
                    arm_result("ortperf ab", f"{label}:candidate", api, s_cand, c, first),
                    label,
                    0.95,
                    tuple(diffs),
                )
            )
        verdict = judge_ab_pairs([p.block_ratios for p in parts], threshold=threshold,
                                 alpha=alpha)  # fmt: skip
        merged = merge_runs(parts) if len(parts) > 1 else parts[0]
        # The record's ratio and interval are the verdict's (over the process pairs).
        result = dataclasses.replace(
            merged, ratio=verdict.current, low=1.0 + verdict.low, high=1.0 + verdict.high,
            confidence=1.0 - 2.0 * alpha, measured=True,
        )  # fmt: skip
        hists = (ref.op_histogram(), cand.op_histogram())
        per_call = max(result.reference.median, result.candidate.median)
        runs = profile_runs_for(per_call, profile_runs)
        profile = profile_lines(ref, cand, feeds, runs=runs) if profile_runs else []
        ratios = tuple(p.ratio for p in parts)
        return ABResult(
            envs[0].label, envs[1].label, (ref.version, cand.version), result, verdict,
            hists, tuple(histogram_changes(*hists)), tuple(profile), ratios,
        )  # fmt: skip
