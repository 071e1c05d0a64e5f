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
