"""Pure change-point detection: steps in one measurement's history of runs.

The per-run gate judges one run against earlier ones; a slow drift whose every run passes
it, or a step that nobody looked at, shows here as a level that moved and stayed.

Method (:func:`find_changes`), on the logarithm of the per-run values (a step is a ratio):

1. **Outliers out**: a running median of 5 runs (:func:`smooth`) replaces up to two
   outliers in any five runs by their neighbours' level and leaves a step (a monotone
   edge) where it is. A running median was chosen over a robust (Huber) cost because it
   keeps the fit an exact, fast L2 optimal partitioning and its effect is easy to state;
   5 rather than 3 runs because with 3, two slow runs one apart (``X . X``) read as a
   level of three. With at least 3 runs per segment (``min_segment``), one or two odd
   runs never make a step; three slow runs within five can.
2. **Noise scale** ``sigma``: the MAD of the first differences of the raw log values,
   times 1.4826 / sqrt(2) (a normal's standard deviation; a step adds one large difference
   and an outlier two, which the median ignores), floored at ``min_noise`` so that a
   perfectly constant history still has a scale.
3. **Penalized piecewise-constant fit**: optimal partitioning (Jackson et al. 2005; the
   exact optimum PELT finds, without its pruning) of the filtered values with an L2 cost
   and a penalty of ``penalty * sigma**2 * log(n)`` per step, each segment at least
   ``min_segment`` runs (so a step at the newest runs shows once 3 runs confirm it).
   ``sigma`` is the raw values' scale while the fit sees filtered ones (less noisy, and
   correlated): ``penalty`` is calibrated by simulation, not taken from BIC. O(n**2) in
   the number of runs, vectorized: 2,000 runs take about 0.06 s on a 2-core VM (a fit;
   dependent runs take up to :data:`REFITS` more, step 4).
4. **Dependent runs**: runs whose noise is autocorrelated (a runner's speed that wanders
   over days) make a level that drifts and comes back, which a penalty sized for
   independent noise cuts into steps (38% of 200-run histories of AR(1) noise with
   ``rho`` 0.5 had a false step). So the fit is repeated (at most :data:`REFITS` times)
   with ``sigma**2`` replaced by the long-run variance of the previous fit's residuals
   (:func:`long_run_variance`: their robust variance times ``(1 + rho) / (1 - rho)``,
   ``rho`` their lag-1 autocorrelation), when that is larger. Independent runs show no
   autocorrelation beyond the estimate's noise and keep the first fit.
5. **Steps too small to matter merged**: each segment's level is the median of its
   filtered values; while two neighbouring levels differ by less than ``min_change``
   (symmetric on log scale: ``|log(after / before)| < log1p(min_change)``), the step
   between the two closest is removed and the levels recomputed, so a slow drift reads as
   the larger steps it adds up to.

The default penalty was tuned with ``benchmarks/plugin/test_change_points.py`` (seeded
lognormal noise of 1% and 2% with sprinkled outliers, and AR(1) noise): see that
benchmark for the detection and false-step rates it gives.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

FloatArray = np.ndarray[Any, np.dtype[np.float64]]

MIN_CHANGE = 0.02
"""Smallest step reported by default: 2% (either way, on log scale)."""
PENALTY = 4.0
"""Default penalty factor ``c`` of a step: ``c * sigma**2 * log(n)`` on log values."""
MIN_SEGMENT = 3
"""Fewest runs on each side of a step: one or two runs alone are outliers, never a level
(so a step at the newest runs shows once three runs confirm it)."""
WINDOW = 5
"""Runs in the running median that takes outliers out (two in any five runs)."""
MIN_NOISE = 0.002
"""Floor of the noise scale (0.2% on log scale): a constant history still has one."""
REFITS = 3
"""Most refits with the long-run variance of the previous fit's residuals (dependent runs)."""
MAX_RHO = 0.9
"""Largest lag-1 autocorrelation of the runs the penalty allows for (a factor of 19)."""
CLIP = 2.5
"""Residuals beyond ``CLIP`` robust standard deviations are clipped there before their
autocorrelation is read (an outlier run is no dependence)."""
RHO_NOISE = 2.5
"""A lag-1 autocorrelation under ``RHO_NOISE / sqrt(runs)`` is taken as none (the robust
estimate's noise on independent runs): independent runs keep the first fit's penalty."""
_MAD_TO_SD = 1.482602218505602


@dataclass(frozen=True)
class Change:
    """A step in a history: from ``index`` (the first run after the step) on, the level
    moved from ``before`` to ``after`` (medians of the runs on each side, in the values'
    units). ``change`` is ``after / before - 1``; ``direction`` is ``"up"`` or ``"down"``.
    ``run_id`` and ``commit`` are those of run ``index`` when given."""

    index: int
    run_id: Any
    commit: str | None
    before: float
    after: float
    change: float
    direction: Literal["up", "down"]
    runs_before: int
    runs_after: int


def smooth(logs: Sequence[float] | FloatArray, window: int = WINDOW) -> FloatArray:
    """Running median of ``window`` runs (odd); the first and last ``window // 2`` runs
    take the median of the first or last ``window`` runs. Up to ``window // 2`` outliers
    within a window are replaced by their neighbours' level; a step stays where it is (a
    running median keeps monotone edges, and one within ``window // 2`` runs of an end
    cannot be told from outliers anyway). Fewer than ``window`` runs come back as they are."""
    if window < 1 or window % 2 == 0:
        raise ValueError(f"window must be an odd number of runs, got {window!r}")
    y = np.asarray(logs, dtype=float)
    n = len(y)
    half = window // 2
    out = y.copy()
    if half == 0 or n < window:
        return out
    out[half : n - half] = np.median(np.lib.stride_tricks.sliding_window_view(y, window), axis=1)
    out[:half] = np.median(y[:window])
    out[n - half :] = np.median(y[n - window :])
    return out


def noise_scale(logs: Sequence[float] | FloatArray, min_noise: float = MIN_NOISE) -> float:
    """Robust standard deviation of the noise of log values: MAD of the first differences
    / sqrt(2), at least ``min_noise``."""
    d = np.diff(np.asarray(logs, dtype=float))
    if len(d) == 0:
        return min_noise
    return max(min_noise, float(np.median(np.abs(d))) * _MAD_TO_SD / math.sqrt(2.0))


def long_run_variance(logs: Sequence[float] | FloatArray, bounds: Sequence[int]) -> float:
    """The long-run variance of the noise of ``logs`` around the levels ``bounds`` cut them
    into (each segment's median): the residuals' robust variance (1.4826 MAD, squared)
    times ``(1 + rho) / (1 - rho)``, with ``rho`` their lag-1 autocorrelation read
    robustly (from the MAD of their first differences, which is ``sqrt(2 * (1 - rho))``
    times theirs for an AR(1) process), clipped to [0, :data:`MAX_RHO`]. Independent runs
    give about the residuals' variance; AR(1) runs with ``rho`` 0.5 three times it."""
    y = np.asarray(logs, dtype=float)
    edges = [0, *bounds, len(y)]
    residuals = np.concatenate(
        [y[a:b] - np.median(y[a:b]) for a, b in itertools.pairwise(edges) if b > a]
    )
    if len(residuals) < 3:
        return 0.0
    scale = float(np.median(np.abs(residuals - np.median(residuals)))) * _MAD_TO_SD
    if scale <= 0:
        return 0.0
    # Outliers clipped, then the plain lag-1 autocorrelation (less noisy than a ratio of
    # MADs: about 1 / sqrt(runs) on independent runs).
    w = np.clip(residuals, -CLIP * scale, CLIP * scale)
    w = w - w.mean()
    rho = min(MAX_RHO, float(np.dot(w[:-1], w[1:]) / np.dot(w, w)))
    if rho < RHO_NOISE / math.sqrt(len(residuals)):
        return 0.0  # no sign of dependence beyond the estimate's own noise
    return scale * scale * (1.0 + rho) / (1.0 - rho)


def segment(z: Sequence[float] | FloatArray, beta: float, min_segment: int) -> list[int]:
    """Optimal partitioning with an L2 cost: the starts of the segments after the first
    (indexes into ``z``) that minimize the sum of squared deviations from each segment's
    mean plus ``beta`` per step, every segment at least ``min_segment`` long."""
    z = np.asarray(z, dtype=float)
    n = len(z)
    if n < 2 * min_segment:
        return []
    s1 = np.concatenate([[0.0], np.cumsum(z)])
    s2 = np.concatenate([[0.0], np.cumsum(z * z)])
    best = np.full(n + 1, np.inf)
    best[0] = -beta
    last = np.zeros(n + 1, dtype=int)
    for t in range(min_segment, n + 1):
        s = np.arange(0, t - min_segment + 1)
        length = t - s
        cost = (s2[t] - s2[s]) - (s1[t] - s1[s]) ** 2 / length
        total = best[s] + np.maximum(cost, 0.0) + beta
        k = int(np.argmin(total))
        best[t] = total[k]
        last[t] = s[k]
    starts = []
    t = n
    while t > 0:
        t = int(last[t])
        if t > 0:
            starts.append(t)
    return sorted(starts)


def _levels(z: FloatArray, bounds: list[int]) -> list[float]:
    edges = [0, *bounds, len(z)]
    return [float(np.median(z[a:b])) for a, b in itertools.pairwise(edges)]


def _merge_small(z: FloatArray, bounds: list[int], min_log: float) -> list[int]:
    """Drop, one at a time, the step between the two neighbouring levels closest to each
    other while that step is under ``min_log``."""
    bounds = list(bounds)
    while bounds:
        levels = _levels(z, bounds)
        steps = np.abs(np.diff(levels))
        k = int(np.argmin(steps))
        if steps[k] >= min_log:
            break
        del bounds[k]
    return bounds


def _positive_finite(values: Sequence[float]) -> FloatArray:
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"history values must be numbers: {exc}") from None
    if array.ndim != 1:
        raise ValueError(f"history values must be a flat sequence, got shape {array.shape}")
    bad = np.flatnonzero(~np.isfinite(array) | (array <= 0))
    if len(bad):
        i = int(bad[0])
        raise ValueError(
            f"history values must be positive and finite: value {values[i]!r} at index {i}"
            + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else "")
        )
    return array


def find_changes(
    values: Sequence[float],
    *,
    run_ids: Sequence[Any] | None = None,
    commits: Sequence[str | None] | None = None,
    min_change: float = MIN_CHANGE,
    penalty: float = PENALTY,
    min_segment: int = MIN_SEGMENT,
    min_noise: float = MIN_NOISE,
    window: int = WINDOW,
) -> tuple[Change, ...]:
    """The steps in one measurement's history, oldest run first (see the module's
    docstring for the method). ``values`` are per-run figures (medians, ratios), positive
    and finite; ``run_ids`` and ``commits``, when given, name each run and are copied into
    the :class:`Change` of the first run after each step. Only steps of at least
    ``min_change`` (relative, either way) are reported. Fewer than ``2 * min_segment``
    runs give no change. Raises ValueError for bad values or parameters."""
    n = len(values)
    for label, seq in (("run_ids", run_ids), ("commits", commits)):
        if seq is not None and len(seq) != n:
            raise ValueError(f"{label} has {len(seq)} items for {n} values")
    if not (math.isfinite(min_change) and min_change >= 0):
        raise ValueError(f"min_change must be a fraction >= 0, got {min_change!r}")
    if not (math.isfinite(penalty) and penalty > 0):
        raise ValueError(f"penalty must be > 0, got {penalty!r}")
    if min_segment < 1:
        raise ValueError(f"min_segment must be at least 1, got {min_segment!r}")
    if not (math.isfinite(min_noise) and min_noise > 0):
        raise ValueError(f"min_noise must be > 0, got {min_noise!r}")
    if window < 1 or window % 2 == 0:
        raise ValueError(f"window must be an odd number of runs, got {window!r}")
    logs = np.log(_positive_finite(values))
    if n < 2 * min_segment:
        return ()
    z = smooth(logs, window)
    variance = noise_scale(logs, min_noise) ** 2
    min_log = math.log1p(min_change)
    bounds = _merge_small(z, segment(z, penalty * variance * math.log(n), min_segment), min_log)
    for _ in range(REFITS):
        # Dependent runs: a level that wanders reads as steps unless the penalty carries
        # the long-run variance the fit's residuals show (never less than the first pass's).
        wider = max(variance, long_run_variance(logs, bounds))
        if wider <= variance * (1.0 + 1e-9):
            break
        variance = wider
        refit = segment(z, penalty * variance * math.log(n), min_segment)
        refit = _merge_small(z, refit, min_log)
        if refit == bounds:
            break
        bounds = refit
    levels = _levels(z, bounds)
    edges = [0, *bounds, n]
    changes = []
    for k, index in enumerate(bounds):
        before, after = math.exp(levels[k]), math.exp(levels[k + 1])
        changes.append(
            Change(
                index=index,
                run_id=None if run_ids is None else run_ids[index],
                commit=None if commits is None else commits[index],
                before=before,
                after=after,
                change=after / before - 1.0,
                direction="up" if after > before else "down",
                runs_before=edges[k + 1] - edges[k],
                runs_after=edges[k + 2] - edges[k + 1],
            )
        )
    return tuple(changes)
