"""Output checks: a candidate's outputs against a reference's, with numpy.

Used wherever two targets must agree before they are timed against each other: the
recorder's ``compare`` and ``rank`` (local and remote sessions) and ``ortperf ab``. A
mismatch raises :class:`OutputMismatch` naming every output out of tolerance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pytest_ortperf.measuring.ortvalues import is_bfloat16
from pytest_ortperf.results import OutputDiff


class OutputMismatch(AssertionError):
    """Candidate and reference outputs differ beyond the tolerances."""


def output_diffs(
    names: Sequence[str], reference: Sequence[Any], candidate: Sequence[Any]
) -> list[OutputDiff]:
    """Largest absolute and relative differences per output (inf where they cannot match)."""
    diffs = []
    for name, ref, cand in zip(names, reference, candidate, strict=True):
        if not isinstance(ref, np.ndarray) or not isinstance(cand, np.ndarray):
            same = ref == cand
            diffs.append(OutputDiff(name, 0.0 if same else math.inf, 0.0 if same else math.inf))
        elif ref.shape != cand.shape or ref.dtype.kind != cand.dtype.kind:
            diffs.append(OutputDiff(name, math.inf, math.inf))
        elif ref.dtype.kind in "OUSb":
            same = bool(np.array_equal(ref, cand))
            diffs.append(OutputDiff(name, 0.0 if same else math.inf, 0.0 if same else math.inf))
        elif ref.size == 0:
            diffs.append(OutputDiff(name, 0.0, 0.0))
        else:
            r = ref.astype(np.float64)
            c = cand.astype(np.float64)
            err = np.abs(c - r)
            rel = err / np.maximum(np.abs(r), np.finfo(np.float64).tiny)
            diffs.append(OutputDiff(name, float(err.max()), float(rel.max())))
    return diffs


def verify_outputs(
    names: Sequence[str],
    reference: Sequence[Any],
    candidate: Sequence[Any],
    *,
    atol: float,
    rtol: float,
    what: str,
) -> list[OutputDiff]:
    """The per-output diffs; raises :class:`OutputMismatch` naming every output out of
    tolerance (``|c - r| <= atol + rtol * |r|`` elementwise, as numpy's ``allclose``)."""
    if len(reference) != len(candidate):
        raise OutputMismatch(
            f"{what}: reference has {len(reference)} outputs, candidate {len(candidate)}"
        )
    diffs = output_diffs(names, reference, candidate)
    bad = []
    for diff, ref, cand in zip(diffs, reference, candidate, strict=True):
        if math.isinf(diff.max_abs):
            bad.append(f"{diff.output}: values, shapes or types differ")
        elif (
            isinstance(ref, np.ndarray)
            and (ref.dtype.kind in "fc" or is_bfloat16(ref.dtype))
            and ref.size
        ):
            if not np.allclose(cand, ref, atol=atol, rtol=rtol, equal_nan=True):
                bad.append(
                    f"{diff.output}: max abs diff {diff.max_abs:.3g}, max rel diff "
                    f"{diff.max_rel:.3g} (atol={atol:g}, rtol={rtol:g})"
                )
        elif diff.max_abs > 0:
            bad.append(f"{diff.output}: max abs diff {diff.max_abs:.3g} (exact match expected)")
    if bad:
        raise OutputMismatch(f"{what}: outputs disagree\n  " + "\n  ".join(bad))
    return diffs
