"""mopd_mini.stats: the sample std and the paired per-seed t-interval every study page reports."""

import math

import pytest

from mopd_mini import stats


def test_sample_std_uses_ddof_1():
    m, sd = stats.mean_sd([1.0, 2.0, 3.0])
    assert m == 2.0 and sd == pytest.approx(1.0)          # population std would be 0.816
    assert math.isnan(stats.mean_sd([0.5])[1])             # no spread from one seed
    assert stats.mean_sd([0.2, None, float("nan"), 0.4]) == pytest.approx((0.3, math.sqrt(0.02)))
    assert all(math.isnan(v) for v in stats.mean_sd([]))


def test_t_quantiles():
    assert stats.t975(2) == 4.303 and stats.t975(1) == 12.706 and stats.t975(4) == 2.776
    assert stats.t975(1000) == pytest.approx(1.962, abs=0.002)
    with pytest.raises(ValueError):
        stats.t975(0)


def test_paired_interval_by_hand():
    # per-seed differences 0.06, 0.02, 0.18: mean 0.0867, sd 0.0833, half 4.303 * 0.0833 / sqrt(3)
    p = stats.paired({0: 1.06, 1: 1.02, 2: 1.18}, {0: 1.0, 1: 1.0, 2: 1.0})
    assert p["n"] == 3 and p["diff"] == pytest.approx(0.08667, abs=1e-4)
    assert p["half"] == pytest.approx(4.303 * 0.083267 / math.sqrt(3), rel=1e-3)
    assert not p["resolved"]                               # the interval (-0.12, 0.29) holds 0
    assert p["per_seed"] == pytest.approx([0.06, 0.02, 0.18])


def test_paired_resolves_a_consistent_difference_and_pairs_on_shared_seeds():
    p = stats.paired({0: 0.95, 1: 0.96, 2: 0.94, 3: 0.5}, {0: 0.85, 1: 0.87, 2: 0.83})
    assert p["n"] == 3 and p["resolved"] and p["lo"] > 0   # seed 3 has no partner: left out
    worse = stats.paired([0.1, 0.12, 0.11], [0.3, 0.31, 0.29])
    assert worse["resolved"] and worse["hi"] < 0


def test_paired_refuses_mismatched_inputs():
    with pytest.raises(ValueError):
        stats.paired([1.0, 2.0], [1.0])
    with pytest.raises(TypeError):
        stats.paired({0: 1.0}, [1.0])
    one = stats.paired([1.0], [0.5])
    assert one["n"] == 1 and math.isnan(one["half"]) and not one["resolved"]
    assert stats.interval_text(one) == "+0.500"


def test_t_half_width_by_hand_and_as_the_benches_computed_it():
    # 1, 2, 3: sd 1, so the half-width is t_{0.975, 2} / sqrt(3)
    assert stats.t_half_width([1.0, 2.0, 3.0]) == pytest.approx(4.303 / math.sqrt(3))
    assert stats.t_half_width([1.0, None, 2.0, float("nan"), 3.0]) == stats.t_half_width([1.0, 2.0, 3.0])
    assert math.isnan(stats.t_half_width([0.9])) and math.isnan(stats.t_half_width([]))
    # the formula bench.scaling, bench.routing and bench.peers each wrote out before they shared this one
    import random
    import statistics
    rng = random.Random(0)
    for n in (2, 3, 15, 40):
        xs = [rng.uniform(0.8, 1.2) for _ in range(n)]
        assert stats.t_half_width(xs) == pytest.approx(stats.t975(n - 1) * statistics.stdev(xs) / math.sqrt(n),
                                                       rel=1e-12)
    p = stats.paired([1.06, 1.02, 1.18], [1.0, 1.0, 1.0])
    assert p["half"] == stats.t_half_width(p["per_seed"])


def test_t_cdf_matches_the_quantile_table():
    for df in (1, 2, 4, 10, 30):
        assert stats.t_cdf(stats.t975(df), df) == pytest.approx(0.975, abs=2e-4)
        assert stats.t_quantile(0.975, df) == pytest.approx(stats.t975(df), abs=2e-3)
    assert stats.t_cdf(0.0, 3) == pytest.approx(0.5) and stats.t_cdf(-2.0, 5) == pytest.approx(1 - stats.t_cdf(2.0, 5))
    assert stats.t_cdf(1.0, 1) == pytest.approx(0.75)                 # Cauchy: 1/2 + atan(1)/pi
    assert stats.t_quantile(0.95, 4) == pytest.approx(2.132, abs=1e-3)


def test_p_value_agrees_with_the_interval():
    p = stats.paired({0: 1.06, 1: 1.02, 2: 1.18}, {0: 1.0, 1: 1.0, 2: 1.0})
    assert p["p"] > 0.05 and not p["resolved"]
    q = stats.paired([0.30, 0.31, 0.29, 0.32], [0.0] * 4)
    assert q["p"] < 0.05 and q["resolved"]
    # an interval whose end sits exactly on 0 has p = 0.05
    edge = {"diff": 1.0, "half": 1.0, "n": 5}
    assert stats.p_value(edge) == pytest.approx(0.05, abs=2e-4)
    assert math.isnan(stats.paired([1.0], [0.0])["p"])


def test_holm_by_hand():
    # m = 4: sorted 0.01, 0.02, 0.03, 0.5 -> 0.04, 0.06, 0.06 (kept at least the one before), 0.5
    adj = stats.holm([0.03, 0.5, 0.01, 0.02])
    assert adj == pytest.approx([0.06, 0.5, 0.04, 0.06])
    assert [a < 0.05 for a in adj] == [False, False, True, False]
    assert stats.holm([0.9, 0.8]) == pytest.approx([1.0, 1.0]) and stats.holm([0.04, 0.2]) == pytest.approx([0.08, 0.2])
    nan = stats.holm([0.01, float("nan"), 0.04])
    assert nan[0] == pytest.approx(0.02) and math.isnan(nan[1]) and nan[2] == pytest.approx(0.04)


def brute_force_holm(ps, alpha=0.05):
    """Holm's procedure as its definition: walk the sorted p's, reject while p_(k) <= alpha / (m - k)."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    rejected = set()
    for k, i in enumerate(order):
        if ps[i] <= alpha / (len(ps) - k):
            rejected.add(i)
        else:
            break
    return rejected


def test_holm_agrees_with_the_procedure_on_random_families():
    import random
    rng = random.Random(0)
    for _ in range(500):
        m = rng.randint(1, 15)
        ps = [rng.random() ** 3 for _ in range(m)]
        adj = stats.holm(ps)
        assert {i for i, a in enumerate(adj) if a <= 0.05} == brute_force_holm(ps)
        assert all(a >= p for a, p in zip(adj, ps))


def test_the_interval_at_holms_level_excludes_0_exactly_when_holm_resolves():
    """A Holm verdict is printed with the interval at the level the step-down tests that comparison
    (stats.holm_levels): on random families of paired comparisons, that interval excludes 0 exactly
    when the Holm-adjusted p is below 0.05, and it is never narrower than the uncorrected 95% one."""
    import random
    rng = random.Random(1)
    for _ in range(300):
        m = rng.randint(1, 15)
        diffs = [[rng.gauss(mu, 0.05) for _ in range(rng.choice((3, 5)))]
                 for mu in (rng.choice((0.0, 0.03, 0.1)) for _ in range(m))]
        fam = [stats.paired(d, [0.0] * len(d)) for d in diffs]
        ps = [p["p"] for p in fam]
        for p, adj, lv in zip(fam, stats.holm(ps), stats.holm_levels(ps)):
            lo, hi = stats.interval_at(p, lv)
            assert (lo > 0 or hi < 0) == (adj < 0.05), (p, adj, lv)
            assert lo <= p["lo"] + 1e-12 and hi >= p["hi"] - 1e-12


def test_holms_level_by_hand_on_the_matched_studys_kl_minus_rft():
    """docs/matched.md, T = 400: MOPD exact KL minus RFT, +0.027 ± 0.025 over 5 seeds, the second
    smallest p of 15: tested at 0.05 / 14, its interval is about [-0.029, +0.083], which includes 0
    as its Holm verdict (not resolved) says, while the uncorrected 95% interval [+0.002, +0.053] does not."""
    p = stats.paired([0.048, 0.023, 0.031, 0.039, -0.006], [0.0] * 5)
    assert p["resolved"]
    lv = stats.holm_levels([1e-4, p["p"]] + [0.5] * 13)[1]
    assert lv == pytest.approx(0.05 / 14)
    lo, hi = stats.interval_at(p, lv)
    assert lo == pytest.approx(-0.029, abs=0.002) and hi == pytest.approx(0.083, abs=0.002)
    text = stats.reading(p, stats.holm([1e-4, p["p"]] + [0.5] * 13)[1], alpha=lv)
    assert text.startswith("not resolved: the interval at Holm's level (99.64%) allows differences from -0.0")
    assert "(uncorrected 95% interval: +0.00" in text            # the per-seed values here are rounded


def test_reading_and_equivalence():
    p = stats.paired([0.01, -0.01, 0.02, 0.0, 0.005], [0.0] * 5)
    assert stats.reading(p).startswith("not resolved: the interval allows differences from")
    assert stats.reading(p, margin=0.05) == "equivalent within ±0.05"        # only with a registered margin
    assert not stats.equivalent(p, 0.01)                                       # the 90% interval reaches past 0.01
    r = stats.paired([0.30, 0.31, 0.29, 0.32], [0.0] * 4)
    assert stats.reading(r) == "resolved above 0"
    assert stats.reading(r, p_adj=0.2).startswith("not resolved")              # the family's correction decides
    assert stats.reading(stats.paired([1.0], [0.0])) == "not resolved (1 seed: no interval)"
    s = stats.spread([0.0, 0.1, 17.6])
    assert s["median"] == 0.1 and s["max"] == 17.6 and s["mean"] == pytest.approx(5.9)


def test_fisher_greater_against_the_hypergeometric_by_hand():
    """[[3, 0], [0, 3]]: 3 of 6 predicted, the same 3 observed: P = 1 / C(6, 3) = 0.05; a table with
    no agreement beyond its margins is not small; the sum over every table is 1 (a = 0 side)."""
    assert stats.fisher_greater(3, 0, 0, 3) == pytest.approx(1 / 20)
    assert stats.fisher_greater(2, 1, 1, 2) == pytest.approx((9 + 1) / 20)   # C(3,2)C(3,1) + C(3,3)C(3,0)
    assert stats.fisher_greater(0, 3, 3, 0) == pytest.approx(1.0)
    assert stats.fisher_greater(1, 1, 1, 1) > 0.5


def test_the_threshold_is_chosen_by_balanced_accuracy_with_ties_to_the_smallest():
    """Separable shares: the midpoint between the highest success and the lowest failure; one
    class alone: refused; a tie between candidates: the smallest."""
    shares = [0.0, 0.01, 0.02, 0.30, 0.40]
    failed = [False, False, False, True, True]
    tau = stats.best_threshold(shares, failed)
    assert tau == pytest.approx(0.16) and stats.balanced_accuracy(shares, failed, tau) == 1.0
    assert stats.best_threshold([0.0, 0.5, 0.6, 0.9], [False, True, True, True]) == 0.0   # 0 and 0.25 both perfect
    assert math.isnan(stats.balanced_accuracy([0.1, 0.2], [True, True], 0.15))
    with pytest.raises(ValueError, match="both outcomes"):
        stats.best_threshold([0.1, 0.2], [False, False])
