"""Tests for mopd_mini.merge: each merge type equals its own definition, written out here
independently of peft (cat: the weighted sum of the teachers' delta W; linear: A and B averaged
apart, which is not that sum; ties and dare_ties: trim, elect a sign, disjoint mean), and a merged
adapter is an ordinary adapter of the bank."""

import itertools

import pytest
import torch

from mopd_mini import AdapterBank, LoraSettings
from mopd_mini.merge import delta_w, merge, merge_sweep, named_lora_layers

SMALL = LoraSettings(r=4, alpha=8, target_modules=("q_proj", "down_proj"))  # a small case: 4 layers


@pytest.fixture
def small_bank(base_copy, tok, perturb):
    """Two rank-4 adapters with different A (seeds) and non-zero B, on q_proj and down_proj."""
    bank = AdapterBank(base_copy, tok, lora=SMALL)
    for i, name in enumerate(("t1", "t2")):
        bank.create(name, seed=i + 1)
        perturb(bank, name, seed=10 + i, scale=0.3)
    return bank


def factors(bank, adapter):
    """{layer: (A (r, in), B (out, r), scaling)} of one adapter."""
    return {n: (m.lora_A[adapter].weight.detach(), m.lora_B[adapter].weight.detach(), m.scaling[adapter])
            for n, m in named_lora_layers(bank).items() if adapter in m.lora_A}


def factor_weights(w, s):
    """The per-factor weights of linear/ties: A gets sign(w s) sqrt(|w s|), B gets sqrt(|w s|),
    so that B A picks up w s when a single adapter is merged."""
    root = abs(w * s) ** 0.5
    return (root if w * s >= 0 else -root), root


def trim_top(x, density):
    """x with all but its int(density * numel) largest-magnitude entries set to 0."""
    k = int(density * x.numel())
    flat = x.flatten()
    keep = torch.zeros_like(flat)
    keep[flat.abs().argsort(descending=True)[:k]] = 1
    return (flat * keep).view_as(x)


def disjoint_mean(kept, weights):
    """TIES' last two steps, entry by entry: the elected sign is that of the sum of the kept
    (unweighted) entries, 0 counting as +; the result averages the weighted entries of that sign."""
    total = sum(kept)
    elected = torch.where(total >= 0, 1.0, -1.0)
    agree = [(k.sign() == elected).float() for k in kept]
    summed = sum(a * w * k for a, w, k in zip(agree, weights, kept))
    return summed / torch.clamp(sum(agree), min=1.0)


def test_cat_is_the_weighted_sum_of_delta_w(teacher_bank):
    """cat on the course's real LoRA settings (r 16, all linear layers): delta W of the merge equals
    w1 delta W_1 + w2 delta W_2 on every layer, to 1e-5; its rank is r1 + r2."""
    w = {"teacher_binding": 0.7, "teacher_recall": 1.3}
    merge(teacher_bank, "cat", w, how="cat")
    d1, d2, dm = (delta_w(teacher_bank, a) for a in ("teacher_binding", "teacher_recall", "cat"))
    assert len(dm) == 14 and dm.keys() == d1.keys()
    for layer in dm:
        expected = 0.7 * d1[layer] + 1.3 * d2[layer]
        assert expected.abs().max() > 1e-3  # a non-trivial update
        torch.testing.assert_close(dm[layer], expected, rtol=0, atol=1e-5)
    assert teacher_bank.model.peft_config["cat"].r == 32


def test_linear_averages_the_factors_not_delta_w(small_bank):
    """linear: A = sum_i sign(w_i s_i) sqrt|w_i s_i| A_i and B = sum_i sqrt|w_i s_i| B_i, scaling 1
    (a negative weight included). Its delta W has cross terms B_i A_j, so it is far from the
    weighted sum of the delta W_i."""
    w = {"t1": 0.5, "t2": -0.5}
    merge(small_bank, "lin", w, how="linear")
    f1, f2, fm = factors(small_bank, "t1"), factors(small_bank, "t2"), factors(small_bank, "lin")
    d1, d2, dm = delta_w(small_bank, "t1"), delta_w(small_bank, "t2"), delta_w(small_bank, "lin")
    for layer in fm:
        (A1, B1, s1), (A2, B2, s2) = f1[layer], f2[layer]
        (a1, b1), (a2, b2) = factor_weights(w["t1"], s1), factor_weights(w["t2"], s2)
        A, B = a1 * A1 + a2 * A2, b1 * B1 + b2 * B2
        torch.testing.assert_close(fm[layer][0], A, rtol=0, atol=1e-6)
        torch.testing.assert_close(fm[layer][1], B, rtol=0, atol=1e-6)
        assert fm[layer][2] == 1.0
        torch.testing.assert_close(dm[layer], B @ A, rtol=0, atol=1e-5)
        average = 0.5 * d1[layer] - 0.5 * d2[layer]
        assert (dm[layer] - average).norm() > 0.5 * average.norm()  # NOT the average of delta W


def test_ties_is_trim_elect_disjoint_mean(small_bank):
    """ties (density 0.4): on each factor of each layer, each adapter keeps its top 40% entries by
    magnitude, a sign is elected per entry, and the weighted entries of that sign are averaged."""
    w = {"t1": 1.0, "t2": 0.6}
    merge(small_bank, "ties", w, how="ties", density=0.4)
    f1, f2, fm = factors(small_bank, "t1"), factors(small_bank, "t2"), factors(small_bank, "ties")
    for layer in fm:
        (A1, B1, s1), (A2, B2, s2) = f1[layer], f2[layer]
        (a1, b1), (a2, b2) = factor_weights(w["t1"], s1), factor_weights(w["t2"], s2)
        A = disjoint_mean([trim_top(A1, 0.4), trim_top(A2, 0.4)], [a1, a2])
        B = disjoint_mean([trim_top(B1, 0.4), trim_top(B2, 0.4)], [b1, b2])
        torch.testing.assert_close(fm[layer][0], A, rtol=0, atol=1e-6)
        torch.testing.assert_close(fm[layer][1], B, rtol=0, atol=1e-6)
        assert 0.4 <= (A != 0).float().mean() <= 0.8  # the union of two 40% sets, minus disagreements


def test_dare_ties_is_random_drop_rescale_then_ties(small_bank):
    """dare_ties (density 0.5): each adapter keeps a random half of its entries, rescaled by 1/0.5,
    then TIES' sign election and disjoint mean. The masks are random, so every merged entry must be
    what the definition gives for ONE of the four keep/drop outcomes of the two adapters, and an
    entry is 0 (both dropped) about (1 - 0.5)^2 of the time. Seeded: same seed, same merge."""
    d, w = 0.5, {"t1": 1.0, "t2": 0.8}
    merge(small_bank, "dare", w, how="dare_ties", density=d, seed=3)
    f1, f2, fm = factors(small_bank, "t1"), factors(small_bank, "t2"), factors(small_bank, "dare")
    zeros, total = 0, 0
    for layer in fm:
        (A1, B1, s1), (A2, B2, s2) = f1[layer], f2[layer]
        (a1, b1), (a2, b2) = factor_weights(w["t1"], s1), factor_weights(w["t2"], s2)
        for got, (X1, X2), (w1, w2) in ((fm[layer][0], (A1, A2), (a1, a2)), (fm[layer][1], (B1, B2), (b1, b2))):
            candidates = torch.stack([disjoint_mean([m1 * X1 / d, m2 * X2 / d], [w1, w2])
                                      for m1, m2 in itertools.product((0.0, 1.0), repeat=2)])
            assert ((candidates - got).abs().min(0).values < 1e-6).all()
            zeros, total = zeros + (got == 0).sum().item(), total + got.numel()
    assert abs(zeros / total - (1 - d) ** 2) < 0.03, zeros / total
    merge(small_bank, "again", w, how="dare_ties", density=d, seed=3)
    merge(small_bank, "other", w, how="dare_ties", density=d, seed=4)
    same, again, other = (delta_w(small_bank, a) for a in ("dare", "again", "other"))
    assert all(torch.equal(same[k], again[k]) for k in same)
    assert not all(torch.equal(same[k], other[k]) for k in same)


def test_merged_adapter_is_an_ordinary_adapter(small_bank, tmp_path, tok):
    """A merge replaces one of the same name (peft alone would keep the old one), runs through
    bank.use, and saves and loads like any other adapter."""
    merge(small_bank, "m", {"t1": 1.0, "t2": 1.0}, how="cat")
    merge(small_bank, "m", {"t1": 2.0, "t2": 0.0}, how="cat")  # replaced, not kept
    d1, dm = delta_w(small_bank, "t1"), delta_w(small_bank, "m")
    assert all(torch.allclose(dm[k], 2 * d1[k], atol=1e-5) for k in dm)
    ids = tok(["Hello"], return_tensors="pt").input_ids
    with small_bank.use("m") as model, torch.no_grad():
        merged_logits = model(ids).logits
    small_bank.save("m", tmp_path / "m")
    small_bank.load("m_loaded", tmp_path / "m")
    with small_bank.use("m_loaded") as model, torch.no_grad():
        torch.testing.assert_close(model(ids).logits, merged_logits, rtol=0, atol=1e-6)
    names = merge_sweep(small_bank, [(1.0, 0.5), (0.5, 1.0)], ("t1", "t2"))
    assert names == ["merge_cat_1_0p5", "merge_cat_0p5_1"] and set(names) <= set(small_bank.names)


@pytest.mark.parametrize("kwargs, message", [
    (dict(how="svd"), "unknown merge how"),
    (dict(how="ties"), "needs density"),
    (dict(how="dare_ties", density=1.5), "needs density"),
    (dict(how="cat", density=0.5), "density is used by"),
    (dict(weights={"t1": 1.0}), "at least two adapters"),
    (dict(weights={"t1": 1.0, "nope": 1.0}), "unknown adapter"),
    (dict(name="t1"), "one of the adapters being merged"),
    (dict(name="m.5"), "without '.'"),
])
def test_bad_merges_are_refused(small_bank, kwargs, message):
    args = dict(name="m", weights={"t1": 1.0, "t2": 1.0}, how="cat") | kwargs
    with pytest.raises(ValueError, match=message):
        merge(small_bank, **args)
