"""The structure gate: op-type histograms of the ORT-optimized graphs, compared exactly.

Deterministic: a fusion an ORT upgrade or a converter change stopped making fails on any
machine, with no noise (README, "Gating"). Pure: no I/O, no onnxruntime.
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_ortperf.results import Outcome, Verdict

FUSED_OPS = frozenset(
    {
        "Attention",
        "BiasAdd",
        "BiasDropout",
        "BiasGelu",
        "BiasSoftmax",
        "BiasSplitGelu",
        "DecoderMaskedMultiHeadAttention",
        "DynamicQuantizeMatMul",
        "EmbedLayerNormalization",
        "FastGelu",
        "FusedConv",
        "FusedGemm",
        "FusedMatMul",
        "Gelu",
        "GemmFastGelu",
        "GroupNorm",
        "GroupQueryAttention",
        "LayerNormalization",
        "MatMulIntegerToFloat",
        "MatMulNBits",
        "MultiHeadAttention",
        "NhwcConv",
        "PackedAttention",
        "QAttention",
        "QuickGelu",
        "RotaryEmbedding",
        "SimplifiedLayerNormalization",
        "SkipGroupNorm",
        "SkipLayerNormalization",
        "SkipSimplifiedLayerNormalization",
        "SparseAttention",
    }
)
"""ORT contrib ops produced by graph fusions (besides any ``Fused*`` / ``QLinear*`` op)."""


def is_fused_op(op_type: str) -> bool:
    """Whether ``op_type`` is one ORT graph fusions produce."""
    return op_type.startswith(("Fused", "QLinear")) or op_type in FUSED_OPS


def judge_structure(
    baseline: Mapping[str, Mapping[str, int]], current: Mapping[str, Mapping[str, int]]
) -> Verdict:
    """Compare op-type histograms per role (``reference``, ``candidate``) exactly.

    Any difference is a regression (``candidate lost fusion: FusedMatMul 1 -> 0, ...``;
    "lost fusion" when a fused op's count went down, else "structure changed"). A role with
    an empty histogram on either side is skipped; with no baseline histograms at all the
    outcome is ``new``, with no current ones ``not_comparable``. ``baseline``/``current``
    are total node counts of the roles compared, ``n`` the number of op types that moved.
    """
    roles = sorted(set(baseline) | set(current))
    parts: list[str] = []
    skipped: list[str] = []
    compared: list[str] = []
    total_b = total_c = moved = 0
    for role in roles:
        b = baseline.get(role) or {}
        c = current.get(role) or {}
        if not b or not c:
            skipped.append(role)
            continue
        compared.append(role)
        total_b += sum(int(v) for v in b.values())
        total_c += sum(int(v) for v in c.values())
        changes = [
            (op, int(b.get(op, 0)), int(c.get(op, 0)))
            for op in sorted(set(b) | set(c))
            if int(b.get(op, 0)) != int(c.get(op, 0))
        ]
        if changes:
            moved += len(changes)
            lost = any(new < old and is_fused_op(op) for op, old, new in changes)
            what = "lost fusion" if lost else "structure changed"
            parts.append(f"{role} {what}: " + ", ".join(f"{op} {o} -> {n}" for op, o, n in changes))
    if not compared:
        any_current = any(current.get(r) for r in roles)
        any_baseline = any(baseline.get(r) for r in roles)
        if any_current and not any_baseline:
            outcome, message = Outcome.NEW, "structure: no op histograms in the baseline"
        else:
            outcome, message = Outcome.NOT_COMPARABLE, "structure: no op histograms recorded"
        return Verdict("structure", outcome, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, None, 0, message)
    if parts:
        outcome, message = Outcome.REGRESSED, "; ".join(parts)
    else:
        sizes = ", ".join(f"{r} {sum(int(v) for v in current[r].values())} nodes" for r in compared)
        outcome, message = Outcome.OK, f"structure unchanged: {sizes}"
    if skipped:
        message += f" (no histogram for {', '.join(skipped)})"
    change = total_c / total_b - 1.0 if total_b else 0.0
    return Verdict(
        metric="structure",
        outcome=outcome,
        baseline=float(total_b),
        current=float(total_c),
        change=change,
        low=change,
        high=change,
        threshold=0.0,
        alpha=0.0,
        p_value=None,
        n=moved,
        message=message,
    )
