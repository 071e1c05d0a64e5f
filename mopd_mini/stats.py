"""The statistics every study reports, in one place: the sample std over seeds and the paired
per-seed t-interval of a difference.

With k seeds, a method's spread is the SAMPLE std (ddof = 1: the population std understates it by
sqrt((k - 1) / k), 0.82 at k = 3). Two methods run on the same seeds (same teachers, same test
prompts, same seed for the sampler and the adapter's init) are compared by their per-seed
differences d_s = a_s - b_s: the mean difference with a 95% t-interval,
mean(d) ± t_{0.975, k-1} · sd(d) / sqrt(k), and the difference is *resolved* only when that
interval excludes 0. With 3 seeds t = 4.30, so a difference must be about 2.5 times its per-seed
spread to be resolved: few seeds buy little resolution, which is the honest answer.

A study's pre-registered comparisons are a family: `holm` corrects their p-values (the paired
t-test's, `p_value`) by Holm's step-down rule, and a page calls a comparison resolved only when its
Holm-adjusted p is below 0.05, which is the same as saying that its interval at Holm's level excludes
0: `holm_levels` gives the level 0.05 / (m - r) at which the step-down tests the comparison of
rank r (r = 0 for the smallest p; past the first comparison the step-down keeps, that one's rank),
and `interval_at` the interval at that level. A page prints that interval beside a Holm verdict
(the uncorrected 95% one, where it shows it too, labelled so). An interval that includes 0 is *not resolved*, never a tie: a
comparison is called equal only by `equivalent` (two one-sided tests, i.e. the 90% t-interval
inside ±delta), with a margin delta registered before the run. `reading` puts the three verbs
together.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import fmean

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


def t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t with df degrees of freedom (the regularised incomplete beta,
    I_x(df/2, 1/2) with x = df / (df + t^2), by its continued fraction)."""
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    x = df / (df + t * t)
    tail = 0.5 * _betainc(df / 2, 0.5, x)          # P(T > |t|)
    return 1.0 - tail if t > 0 else tail


def _betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta I_x(a, b) (Numerical Recipes' betacf, Lentz's method)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x > (a + 1) / (a + b + 2):                   # the continued fraction converges on the other side
        return 1.0 - _betainc(b, a, 1.0 - x)
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return front * h / a


def t_quantile(q: float, df: int) -> float:
    """The q-quantile of Student's t with df degrees of freedom (t_cdf inverted by bisection)."""
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1), got {q}")
    lo, hi = -1e4, 1e4
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < q else (lo, mid)
    return (lo + hi) / 2


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


def mean_sd_or_none(values) -> tuple[float | None, float | None]:
    """`mean_sd` of the values that are not None, with None where it gives no number: (None, None)
    without a value, the std None with one (a JSON file holds null; a page prints the mean alone)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return None, None
    m, sd = mean_sd(vals)
    return m, (None if math.isnan(sd) else sd)


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
    out = {"diff": m, "half": half, "lo": m - half, "hi": m + half, "n": len(diffs),
           "resolved": resolved, "per_seed": diffs}
    return {**out, "p": p_value(out)}


def p_value(p: dict, null: float = 0.0) -> float:
    """The two-sided paired t-test's p-value of `paired`'s difference against `null` (NaN below
    2 pairs; 0 or 1 when every per-seed difference is the same). Below 0.05 exactly when the 95%
    interval excludes `null`."""
    n, half = p["n"], p["half"]
    if n < 2 or math.isnan(half):
        return float("nan")
    se = half / t975(n - 1)
    if se == 0:
        return 1.0 if p["diff"] == null else 0.0
    return 2 * (1 - t_cdf(abs(p["diff"] - null) / se, n - 1))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values of a family, in the input's order: the i-th smallest
    (i = 0..m-1) is multiplied by (m - i), kept at least the one before it, capped at 1. A
    comparison is resolved at 0.05 over the family when its adjusted p is below 0.05. A NaN
    p-value (no interval) stays NaN and is not counted in m."""
    ranked = sorted((v, i) for i, v in enumerate(pvalues) if not math.isnan(v))
    m, out, running = len(ranked), [float("nan")] * len(pvalues), 0.0
    for k, (v, i) in enumerate(ranked):
        running = max(running, min(1.0, (m - k) * v))
        out[i] = running
    return out


def holm_levels(pvalues: Sequence[float], alpha: float = 0.05) -> list[float]:
    """The level at which Holm's step-down tests each p-value of a family, in the input's order: the
    i-th smallest (i = 0..m-1) is tested at alpha / (m - i) while every smaller one was rejected;
    from the first one that is not, the procedure stops, and it and every larger one get that
    step's level. So the (1 - level) interval of a comparison excludes the null exactly when its
    Holm-adjusted p (`holm`) is below alpha. A NaN p-value stays NaN and is not counted in m."""
    ranked = sorted((v, i) for i, v in enumerate(pvalues) if not math.isnan(v))
    m, out, stop = len(ranked), [float("nan")] * len(pvalues), None
    for k, (v, i) in enumerate(ranked):
        if stop is None and not v < alpha / (m - k):
            stop = k
        out[i] = alpha / (m - (k if stop is None else stop))
    return out


def interval_at(p: dict, alpha: float) -> tuple[float, float]:
    """(lo, hi): `paired`'s interval of the mean difference at level 1 - alpha (the same standard
    error, the t quantile 1 - alpha / 2); (NaN, NaN) below 2 pairs. At alpha = 0.05 it is p's own."""
    n, half = p["n"], p["half"]
    if n < 2 or math.isnan(half):
        return float("nan"), float("nan")
    if abs(alpha - 0.05) < 1e-12:
        return p["diff"] - half, p["diff"] + half
    h = t_quantile(1 - alpha / 2, n - 1) * half / t975(n - 1)
    return p["diff"] - h, p["diff"] + h


def level_text(alpha: float) -> str:
    """'99.64%': the confidence level 1 - alpha as a page prints it."""
    return f"{100 * (1 - alpha):.4g}%"


def holm_interval_text(p: dict, alpha: float, digits: int = 3) -> str:
    """"the interval at Holm's level (99.64%): -0.029 to +0.083": the interval beside a Holm verdict."""
    lo, hi = interval_at(p, alpha)
    return f"the interval at Holm's level ({level_text(alpha)}): {lo:+.{digits}f} to {hi:+.{digits}f}"


def equivalent(p: dict, delta: float) -> bool:
    """Two one-sided tests at 0.05: both differences -delta and +delta rejected, i.e. the 90%
    t-interval of the mean difference lies inside (-delta, +delta)."""
    n = p["n"]
    if n < 2 or math.isnan(p["half"]):
        return False
    half90 = t_quantile(0.95, n - 1) * p["half"] / t975(n - 1)
    return -delta < p["diff"] - half90 and p["diff"] + half90 < delta


def reading(p: dict, p_adj: float | None = None, margin: float | None = None, digits: int = 3,
            alpha: float | None = None) -> str:
    """The verb a page prints for a comparison of a family: "resolved above 0" / "resolved below 0"
    (by the Holm-adjusted p when given, else the interval), "equivalent within ±delta" (only with a
    margin registered before the run), else "not resolved: the interval allows differences from X
    to Y" (the uncorrected 95% interval). With `alpha`, the comparison's level in Holm's step-down
    (`holm_levels`), the verdict is printed with the interval at that level, which excludes 0
    exactly when p_adj is below 0.05, and a not-resolved one with the uncorrected 95% interval
    beside it, labelled so."""
    if p["n"] < 2 or math.isnan(p["half"]):
        return f"not resolved ({p['n']} seed{'s' if p['n'] != 1 else ''}: no interval)"
    holm = alpha is not None and not math.isnan(alpha) and p_adj is not None and not math.isnan(p_adj)
    resolved = p_adj < 0.05 if p_adj is not None and not math.isnan(p_adj) else p["resolved"]
    if resolved:
        side = "resolved " + ("above 0" if p["diff"] > 0 else "below 0")
        return side + (f" ({holm_interval_text(p, alpha, digits)})" if holm else "")
    if margin is not None and equivalent(p, margin):
        return f"equivalent within ±{margin:g}"
    raw = f"{p['lo']:+.{digits}f} to {p['hi']:+.{digits}f}"
    if holm and abs(alpha - 0.05) > 1e-12:
        lo, hi = interval_at(p, alpha)
        return (f"not resolved: the interval at Holm's level ({level_text(alpha)}) allows differences from "
                f"{lo:+.{digits}f} to {hi:+.{digits}f} (uncorrected 95% interval: {raw})")
    return f"not resolved: the interval allows differences from {raw}" + (" (95%, Holm's level here)" if holm else "")


def spread(values) -> dict:
    """{"mean", "median", "max", "min"} of the values that are not None or NaN: where one seed
    carries a mean, the median and the max say so."""
    vals = sorted(_finite(values))
    if not vals:
        return {k: float("nan") for k in ("mean", "median", "max", "min")}
    k = len(vals)
    med = vals[k // 2] if k % 2 else (vals[k // 2 - 1] + vals[k // 2]) / 2
    return {"mean": sum(vals) / k, "median": med, "max": vals[-1], "min": vals[0]}


def interval_text(p: dict, digits: int = 3) -> str:
    """'+0.060 ± 0.240' (or '+0.060' with one pair): a paired difference as the pages print it."""
    if math.isnan(p["diff"]):
        return "-"
    body = f"{p['diff']:+.{digits}f}"
    return body + (f" ± {p['half']:.{digits}f}" if not math.isnan(p["half"]) else "")


def fisher_greater(a: int, b: int, c: int, d: int) -> float:
    """One-sided Fisher exact test of the 2 x 2 table [[a, b], [c, d]] (rows: predicted yes, no;
    columns: observed yes, no): P(X >= a) for X hypergeometric with the table's margins fixed.
    Small when prediction and outcome agree more often than their margins make likely."""
    row, other, col, n = a + b, c + d, a + c, a + b + c + d
    return sum(math.comb(row, x) * math.comb(other, col - x) for x in range(a, min(row, col) + 1)) / math.comb(n, col)


def balanced_accuracy(scores: Sequence[float], outcome: Sequence[bool], tau: float) -> float:
    """The mean of the true-positive and true-negative rates of the rule "score > tau predicts the
    outcome"; NaN when one class is empty."""
    pos = [s > tau for s, o in zip(scores, outcome) if o]
    neg = [s <= tau for s, o in zip(scores, outcome) if not o]
    return (fmean(pos) + fmean(neg)) / 2 if pos and neg else float("nan")


def best_threshold(scores: Sequence[float], outcome: Sequence[bool]) -> float:
    """The tau that maximises balanced_accuracy over the candidates 0 and the midpoints between
    consecutive distinct scores; ties go to the smallest tau. A ValueError when one class is empty
    (no threshold can be chosen)."""
    if all(outcome) or not any(outcome):
        raise ValueError("both outcomes are needed to choose a threshold")
    xs = sorted(set(scores))
    candidates = sorted({0.0, *((u + v) / 2 for u, v in zip(xs, xs[1:]))})
    return max(candidates, key=lambda t: (balanced_accuracy(scores, outcome, t), -t))
