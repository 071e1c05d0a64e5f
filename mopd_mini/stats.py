"""The statistics every study reports, in one place: the sample std over seeds and the paired
per-seed t-interval of a difference.

With k seeds, a method's spread is the SAMPLE std (ddof = 1: the population std understates it by
sqrt((k - 1) / k), 0.82 at k = 3). Two methods run on the same seeds (same teachers, same test
prompts, same seed for the sampler and the adapter's init) are compared by their per-seed
differences d_s = a_s - b_s: the mean difference with a 95% t-interval,
mean(d) ± t_{0.975, k-1} · sd(d) / sqrt(k), and the difference is *resolved* only when that
interval excludes 0. With 3 seeds t = 4.30, so a difference must be about 2.5 times its per-seed
spread to be resolved: few seeds buy little resolution, which is the honest answer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

# two-sided 95% quantiles of Student's t, t_{0.975, df}, for df = 1..30 (standard tables)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t975(df: int) -> float:
    """t_{0.975, df}: the half-width multiplier of a two-sided 95% interval."""
    if df < 1:
        raise ValueError(f"a t-interval needs at least 2 values (df >= 1), got df={df}")
    if df <= len(_T975):
        return _T975[df - 1]
    return 1.960 + 2.40 / df  # within 0.002 of the exact quantile for df > 30


def _finite(values) -> list[float]:
    return [float(v) for v in values if v is not None and not math.isnan(float(v))]


def mean_sd(values) -> tuple[float, float]:
    """(mean, sample std with ddof = 1) of the values that are not None or NaN; the std is NaN
    with fewer than two values and the mean NaN with none (a domain with no headroom gives NaN)."""
    vals = _finite(values)
    if not vals:
        return float("nan"), float("nan")
    m = sum(vals) / len(vals)
    if len(vals) < 2:
        return m, float("nan")
    return m, math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1))


def t_half_width(values) -> float:
    """The half-width of the 95% t-interval of the mean of the values that are not None or NaN,
    t_{0.975, n-1} · sd / sqrt(n) with the sample std (ddof = 1); NaN with fewer than two values."""
    vals = _finite(values)
    if len(vals) < 2:
        return float("nan")
    return t975(len(vals) - 1) * mean_sd(vals)[1] / math.sqrt(len(vals))


def paired(a: Mapping | Sequence, b: Mapping | Sequence) -> dict:
    """The paired per-seed comparison of a - b.

    a, b: {seed: value} (paired on the seeds both have) or equal-length sequences (paired by
    position). Returns {"diff": mean difference, "half": 95% half-width (NaN below 2 pairs),
    "lo", "hi", "n": pairs used, "resolved": the interval excludes 0, "per_seed": the differences}.
    """
    if isinstance(a, Mapping) != isinstance(b, Mapping):
        raise TypeError("pair two {seed: value} maps or two sequences, not one of each")
    if isinstance(a, Mapping):
        seeds = [s for s in a if s in b]
        pairs = [(a[s], b[s]) for s in seeds]
    else:
        if len(a) != len(b):
            raise ValueError(f"paired sequences must have one value per seed each: {len(a)} vs {len(b)}")
        pairs = list(zip(a, b))
    diffs = _finite(x - y for x, y in pairs if x is not None and y is not None)
    m, half = mean_sd(diffs)[0], t_half_width(diffs)
    resolved = not math.isnan(half) and (m - half > 0 or m + half < 0)
    return {"diff": m, "half": half, "lo": m - half, "hi": m + half, "n": len(diffs),
            "resolved": resolved, "per_seed": diffs}


def interval_text(p: dict, digits: int = 3) -> str:
    """'+0.060 ± 0.240' (or '+0.060' with one pair): a paired difference as the pages print it."""
    if math.isnan(p["diff"]):
        return "-"
    body = f"{p['diff']:+.{digits}f}"
    return body + (f" ± {p['half']:.{digits}f}" if not math.isnan(p["half"]) else "")
