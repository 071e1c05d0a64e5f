"""Tests for the stuck detector (mopd_mini.diagnostics) and its wiring into train_student: the
stuck flags on hand-built pairs, the closed-form gradient norms against autograd of the library's
own losses, the chunked path, the off-support mass, the per-domain metrics, the warning (once,
after its window, kept across a resume) and the heat map's marks."""

import json
import math
import warnings

import pytest
import torch

from mopd_mini import AdapterBank, MOPDConfig, plots, runs, train_student
from mopd_mini.diagnostics import GRAD_NORMS, form_of, grad_norms, mean_over, off_support_mass, stuck_mask, stuck_metrics
from mopd_mini.distill import StuckWarning
from mopd_mini.losses import jsd_loss, log_softmax_at, pg_loss, reverse_kl, forward_kl, topk_reverse_kl

# ------------------------------------------------------------------------------- hand-built pairs


def categorical(p_y: float, V: int = 5, y: int = 0) -> torch.Tensor:
    """Log-probs (V,) with p(y) = p_y and the rest spread evenly."""
    p = torch.full((V,), (1 - p_y) / (V - 1), dtype=torch.float64)
    p[y] = p_y
    return p.log()


def teacher_rejecting(y: int = 0, V: int = 5, log_p_y: float = -17.0) -> torch.Tensor:
    """Teacher log-probs (V,) giving y e^-17 and the rest evenly."""
    p = torch.full((V,), (1 - math.exp(log_p_y)) / (V - 1), dtype=torch.float64)
    p[y] = math.exp(log_p_y)
    return p.log()


def one_position(z_S, z_T, y=0):
    """(1, 1, V) logits, (1, 1) ids and mask, and the sampled token's log-probs."""
    s, t = z_S.view(1, 1, -1), z_T.view(1, 1, -1)
    ids, mask = torch.tensor([[y]]), torch.ones(1, 1)
    lp_S, lp_T = s.log_softmax(-1)[..., y], t.log_softmax(-1)[..., y]
    return s, t, ids, mask, lp_S, lp_T


def test_a_confidently_wrong_student_is_stuck_and_gets_almost_no_reverse_kl_gradient():
    """Student 0.99 on a token the teacher gives e^-17 (5 tokens): flagged; its KL is ~16.8 nats,
    yet the reverse KL's gradient norm is 0.24 (by hand, term by term, below), under a twentieth of
    what a student at p_S = 0.5 gets (4.75) and smaller still at 0.999, while the forward KL's
    stays near 1."""
    s, t, ids, mask, lp_S, lp_T = one_position(categorical(0.99), teacher_rejecting())
    assert stuck_mask(lp_S, lp_T, mask).tolist() == [[True]]
    _, info = reverse_kl(s, t, mask)
    assert info["kl"].item() > 16.5
    p, q = [0.99] + [0.0025] * 4, [math.exp(-17)] + [(1 - math.exp(-17)) / 4] * 4
    kl = sum(a * math.log(a / b) for a, b in zip(p, q))
    by_hand = math.sqrt(sum((a * (math.log(a / b) - kl)) ** 2 for a, b in zip(p, q)))
    stuck = grad_norms(["kl", "fkl"], s, mask, teacher_logits=t)
    assert stuck["kl"].item() == pytest.approx(by_hand, rel=1e-9) and 0.2 < by_hand < 0.25
    norm_at = lambda p_y: grad_norms(["kl"], categorical(p_y).view(1, 1, -1), mask, teacher_logits=t)["kl"].item()  # noqa: E731
    assert norm_at(0.5) > 19 * by_hand and norm_at(0.999) < by_hand / 5
    assert stuck["fkl"].item() > 0.9


def test_not_stuck_when_the_teacher_agrees_or_the_student_is_unsure():
    """The teacher gives the token 0.8 (log -0.22): not stuck. The student at 0.5 on the rejected
    token: not stuck (not confident). Masked-out positions are never stuck; the thresholds are strict."""
    _, _, _, mask, lp_S, lp_T = one_position(categorical(0.99), categorical(0.8))
    assert stuck_mask(lp_S, lp_T, mask).tolist() == [[False]]
    _, _, _, mask, lp_S, lp_T = one_position(categorical(0.5), teacher_rejecting())
    assert stuck_mask(lp_S, lp_T, mask).tolist() == [[False]]
    assert stuck_mask(lp_S, lp_T, mask, p_min=0.4).tolist() == [[True]]
    _, _, _, _, lp_S, lp_T = one_position(categorical(0.99), teacher_rejecting())
    assert stuck_mask(lp_S, lp_T, torch.zeros(1, 1)).tolist() == [[False]]
    assert stuck_mask(lp_S, lp_T, mask, teacher_logp_max=-17.5).tolist() == [[False]]
    with pytest.raises(ValueError, match="p_min"):
        stuck_mask(lp_S, lp_T, mask, p_min=1.0)


def test_a_student_off_the_teachers_support_gets_no_topk_gradient():
    """Student 0.998 on a token outside the teacher's top-2: off-support mass ~0.998 (= 1 - the
    Top-k info's student mass) and the Top-k gradient norm under 0.01, either correction."""
    s = categorical(0.998, V=6, y=5).view(1, 1, -1)
    ids = torch.tensor([[[0, 1]]])
    t_lp = torch.tensor([[[math.log(0.6), math.log(0.39)]]], dtype=torch.float64)
    mask = torch.ones(1, 1)
    off = off_support_mass(s, ids)
    _, info = topk_reverse_kl(s, ids, t_lp, mask)
    torch.testing.assert_close(off, 1 - info["student_topk_mass"])
    assert off.item() > 0.99
    for correction in (True, False):
        n = grad_norms(["topk"], s, mask, topk_ids=ids, topk_logprobs=t_lp, topk_correction=correction)["topk"]
        assert n.item() < 0.01


def test_jsd_and_support_matching_at_the_stuck_token():
    """The stuck pair above (0.99 on a token the teacher gives e^-17): JSD's gradient norm is small
    for every 0 < beta < 1, smaller still at 0.999 (it vanishes with the reverse KL's), while the
    forward KL's (beta = 0) stays near 1. Support matching with the stuck token outside the
    teacher's top-2 keeps an O(1) norm (the student's in-set shape is renormalised) where plain
    Top-k's is under 0.01; with the stuck token inside the set it vanishes as the reverse KL's."""
    mask = torch.ones(1, 1)
    t = teacher_rejecting().view(1, 1, -1)
    jsd_at = lambda p_y, beta: grad_norms(["jsd"], categorical(p_y).view(1, 1, -1), mask, teacher_logits=t,  # noqa: E731
                                          beta=beta)["jsd"].item()
    fkl = grad_norms(["fkl"], categorical(0.99).view(1, 1, -1), mask, teacher_logits=t)["fkl"].item()
    assert jsd_at(0.99, 0.0) == pytest.approx(fkl) and fkl > 0.9
    for beta in (0.1, 0.5, 0.9):
        assert jsd_at(0.99, beta) < 0.5 * fkl and jsd_at(0.999, beta) < jsd_at(0.99, beta)
    s = categorical(0.998, V=6, y=5).view(1, 1, -1)                      # stuck off the set {0, 1}
    ids = torch.tensor([[[0, 1]]])
    t_lp = torch.tensor([[[math.log(0.6), math.log(0.39)]]], dtype=torch.float64)
    n = grad_norms(["topk", "topk_support"], s, mask, topk_ids=ids, topk_logprobs=t_lp)
    assert n["topk"].item() < 0.01 and n["topk_support"].item() > 0.05
    inside = torch.tensor([[[0, 1]]])                                     # the stuck token 0 in the set
    t_in = torch.tensor([[[-17.0, math.log(0.9)]]], dtype=torch.float64)
    near = lambda p_y: grad_norms(["topk_support"], categorical(p_y, V=6).view(1, 1, -1), mask,  # noqa: E731
                                  topk_ids=inside, topk_logprobs=t_in)["topk_support"].item()
    assert near(0.999) < near(0.99) < near(0.5)


def test_top_p_cannot_free_a_stuck_student():
    """top_p (MOPDConfig's docstring): with the student at 0.99 on the wrong token, every nucleus
    up to 0.99 is that token alone (probability 1 after renormalising), so every sample is the
    stuck token; only top_p above p_S(y) keeps another token."""
    from mopd_mini.rollout import nucleus
    logp = categorical(0.99).view(1, -1)
    for top_p in (0.5, 0.9, 0.95, 0.99):
        kept = nucleus(logp, top_p).exp()[0]
        assert kept[0].item() == pytest.approx(1.0) and (kept[1:] == 0).all(), top_p
    assert (nucleus(logp, 0.995).exp()[0, 1:] > 0).any()


def test_lmbda_changes_the_positions_not_the_gradient_at_a_stuck_one():
    """lmbda (MOPDConfig's docstring): the full-distribution loss at a position does not read the
    sampled token, so at the stuck position the gradient is the same whichever prefix led there
    (on-policy, the student's stuck token; off-policy, the teacher's token); and the teacher's
    token is never flagged (the teacher does not reject it), so an off-policy step's share is 0
    whatever the student does: the detector reads on-policy steps only."""
    s, t, _, mask, lp_S, lp_T = one_position(categorical(0.99), teacher_rejecting())
    teacher_token = 1
    lp_S_off, lp_T_off = s.log_softmax(-1)[..., teacher_token], t.log_softmax(-1)[..., teacher_token]
    assert stuck_mask(lp_S, lp_T, mask).tolist() == [[True]] and stuck_mask(lp_S_off, lp_T_off, mask).tolist() == [[False]]
    z = s.clone().requires_grad_()
    (g,) = torch.autograd.grad(reverse_kl(z, t, mask)[0], z)
    assert g.norm().item() == pytest.approx(grad_norms(["kl"], s, mask, teacher_logits=t)["kl"].item())
    assert g.norm().item() < 0.25


# ------------------------------------------------------------------- the closed forms vs autograd


def random_case(B, T, V, dtype, seed, k=4):
    g = torch.Generator().manual_seed(seed)
    z_S = (torch.randn(B, T, V, generator=g, dtype=torch.float64) * 3).to(dtype)
    z_T = (torch.randn(B, T, V, generator=g, dtype=torch.float64) * 3).to(dtype)
    z_S[0, 0] = 0
    z_S[0, 0, 1] = 9.0                                # one peaked (stuck-like) row
    mask = (torch.rand(B, T, generator=g) < 0.7).float()
    mask[0, 0] = 1
    if B > 1:
        mask[-1] = 0                                  # a row with no completion token
    ids = torch.randint(V, (B, T), generator=g)
    topk_lp, topk_ids = z_T.log_softmax(-1).topk(k, dim=-1)
    return z_S, z_T, mask, ids, topk_ids, topk_lp


def weights(mask):
    """masked_mean's weight on position (b, t): 1 / (B' L_b) on masked-in positions, else 0."""
    M = mask.double()
    L = M.sum(1, keepdim=True)
    return M / L.clamp(min=1) / (L > 0).sum()


def autograd_norms(loss_of, z_S, mask):
    """Per-position norms of d loss / d z_S, divided back by masked_mean's weight."""
    z = z_S.clone().requires_grad_()
    (grad,) = torch.autograd.grad(loss_of(z), z)
    w = weights(mask).to(grad.dtype)
    return torch.where(mask.bool(), grad.norm(dim=-1) / w.clamp(min=1e-30), 0.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(2, 3, 7), (3, 5, 40), (1, 4, 1000)])
def test_closed_form_norms_match_autograd_of_the_losses(dtype, shape):
    """Each form against torch.autograd.grad of the library's loss (reverse_kl, forward_kl,
    pg_loss on log_softmax_at with its clipped advantage, topk_reverse_kl with and without the
    correction): equal to 1e-5 (fp32) / 1e-10 (fp64), and 0 outside the mask."""
    z_S, z_T, mask, ids, topk_ids, topk_lp = random_case(*shape, dtype, seed=sum(shape))
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-10)
    lp_T = z_T.log_softmax(-1).gather(-1, ids[..., None])[..., 0]
    with torch.no_grad():
        _, pg_info = pg_loss(log_softmax_at(z_S, ids[..., None])[..., 0], lp_T, mask, clip=2.0)
    want = {
        "kl": autograd_norms(lambda z: reverse_kl(z, z_T, mask)[0], z_S, mask),
        "fkl": autograd_norms(lambda z: forward_kl(z, z_T, mask)[0], z_S, mask),
        "pg": autograd_norms(lambda z: pg_loss(log_softmax_at(z, ids[..., None])[..., 0], lp_T, mask, clip=2.0)[0],
                             z_S, mask),
        "topk": autograd_norms(lambda z: topk_reverse_kl(z, topk_ids, topk_lp, mask)[0], z_S, mask),
        "topk_support": autograd_norms(lambda z: topk_reverse_kl(z, topk_ids, topk_lp, mask, support=True)[0],
                                       z_S, mask),
        "jsd": autograd_norms(lambda z: jsd_loss(z, z_T, mask, beta=0.3)[0], z_S, mask),
    }
    got = grad_norms(list(GRAD_NORMS), z_S, mask, teacher_logits=z_T, ids=ids, advantage=pg_info["advantage"],
                     topk_ids=topk_ids, topk_logprobs=topk_lp, beta=0.3)
    for form in GRAD_NORMS:
        assert got[form].dtype == dtype and got[form].shape == mask.shape
        torch.testing.assert_close(got[form], want[form].to(dtype), **tol, msg=form)
        assert (got[form][~mask.bool()] == 0).all()
    naive = autograd_norms(lambda z: topk_reverse_kl(z, topk_ids, topk_lp, mask, correction=False)[0], z_S, mask)
    got = grad_norms(["topk"], z_S, mask, topk_ids=topk_ids, topk_logprobs=topk_lp, topk_correction=False)
    torch.testing.assert_close(got["topk"], naive.to(dtype), **tol)
    for beta in (0.0, 0.1, 0.9, 1.0):                 # jsd's ends are the forward and the reverse KL
        want = autograd_norms(lambda z: jsd_loss(z, z_T, mask, beta=beta)[0], z_S, mask)
        got = grad_norms(["jsd"], z_S, mask, teacher_logits=z_T, beta=beta)["jsd"]
        torch.testing.assert_close(got, want.to(dtype), **tol, msg=f"jsd beta={beta}")


@pytest.mark.parametrize("chunk_size", [1, 2, 3])
def test_chunked_norms_equal_unchunked(chunk_size):
    """A chunk of 1, 2 or 3 rows gives the same norms as all rows at once."""
    z_S, z_T, mask, ids, topk_ids, topk_lp = random_case(3, 4, 60, torch.float32, seed=7)
    A = torch.randn(3, 4)
    args = dict(teacher_logits=z_T, ids=ids, advantage=A, topk_ids=topk_ids, topk_logprobs=topk_lp, beta=0.5)
    whole = grad_norms(list(GRAD_NORMS), z_S, mask, chunk_size=10_000, **args)
    parts = grad_norms(list(GRAD_NORMS), z_S, mask, chunk_size=chunk_size, **args)
    for form in GRAD_NORMS:
        torch.testing.assert_close(parts[form], whole[form], rtol=0, atol=0)


def test_bf16_logits_at_the_qwen3_vocabulary():
    """bf16 logits at V = 151,936: computed in fp32, equal to the fp32 computation of the same values."""
    g = torch.Generator().manual_seed(3)
    z_S, z_T = (torch.randn(2, 2, 3, 151_936, generator=g) * 2).bfloat16()
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    got = grad_norms(["kl"], z_S, mask, teacher_logits=z_T)["kl"]
    want = grad_norms(["kl"], z_S.float(), mask, teacher_logits=z_T.float(), chunk_size=1)["kl"]
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want)


def test_grad_norms_refuse_unknown_forms_and_missing_inputs():
    z = torch.randn(1, 2, 5)
    mask = torch.ones(1, 2)
    with pytest.raises(ValueError, match="no closed-form"):
        grad_norms(["jsd?"], z, mask)
    with pytest.raises(ValueError, match="teacher_logits"):
        grad_norms(["kl"], z, mask)
    with pytest.raises(ValueError, match="advantage"):
        grad_norms(["pg"], z, mask, ids=torch.zeros(1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="beta"):
        grad_norms(["jsd"], z, mask, teacher_logits=z, beta=1.5)
    with pytest.raises(ValueError, match="topk_ids"):
        grad_norms(["topk_support"], z, mask)
    assert (form_of("topk", True), form_of("topk", False), form_of("jsd", True)) == ("topk_support", "topk", "jsd")
    assert mean_over(torch.ones(3), torch.zeros(3, dtype=torch.bool)) is None


@pytest.mark.parametrize("field, value", [("stuck_p", 1.0), ("stuck_p", -0.1), ("stuck_teacher_logp", 0.5),
                                          ("stuck_warn_share", 1.5), ("stuck_window", 0)])
def test_config_checks_the_stuck_fields(field, value):
    with pytest.raises(ValueError, match=field):
        MOPDConfig(**{field: value}).check()


# ------------------------------------------------------------------------- in train_student

STUCK_KEYS = ("stuck_share", "stuck_tokens", "grad_stuck", "grad_rest", "kl_grad_stuck", "kl_grad_rest", "kl_stuck",
              "kl_rest", "off_support")


def quick(**overrides):
    return MOPDConfig(**{**dict(steps=2, prompts_per_domain=2, topk=8, eval_every=0, track_steps=(1, 2),
                                track_prompts=1, domains=("binding",), progress=False, checkpoint_every=1,
                                experiment="diag"), **overrides})


@pytest.fixture
def one_teacher(bank, perturb, tmp_path, monkeypatch):
    """A bank with teacher_binding off the base; runs go to a temporary runs/."""
    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path / "runs")
    bank.create("teacher_binding", seed=1)
    perturb(bank, "teacher_binding", seed=100)
    return bank


@pytest.mark.parametrize("loss, extra", [("pg", {}), ("topk", {}), ("kl", {}), ("fkl", {}), ("jsd", {"beta": 0.3}),
                                         ("topk", {"topk_support": True})])
def test_every_step_logs_the_detector_and_metrics_jsonl_stays_json(one_teacher, tmp_path, loss, extra):
    """Each row has every stuck key, the trained loss's gradient norm included (jsd and support
    matching too); shares and masses in [0, 1]; a mean over no stuck token is None beside a count of
    0 (null in the file: strict JSON parses it, no NaN); the trace has the flags."""
    run = train_student(one_teacher, quick(loss=loss, student=f"s_{loss}{'_'.join(map(str, extra))}", **extra))
    for row in run.metrics:
        for key in STUCK_KEYS:
            assert f"{key}/binding" in row, key
        assert 0 <= row["stuck_share/binding"] <= 1 and 0 <= row["off_support/binding"] <= 1
        assert row["grad_rest/binding"] > 0 and row["kl_grad_rest/binding"] > 0
        if row["stuck_tokens/binding"] == 0:
            assert row["grad_stuck/binding"] is None and row["kl_grad_stuck/binding"] is None
            assert row["kl_stuck/binding"] is None
        if loss == "kl":
            assert row["grad_rest/binding"] == row["kl_grad_rest/binding"]
    text = (run.dir / "metrics.jsonl").read_text()
    rows = [json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} in metrics.jsonl")) for line in text.splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for r in run.trace:
        assert len(r["stuck"]) == len(r["tokens"]) == len(r["kl_grad_norm"])
    assert not run.warnings and not (run.dir / "warnings.json").exists()


def test_the_warning_fires_once_after_its_window_and_survives_a_resume(one_teacher):
    """Thresholds that flag every token (p_S > 0, log p_T < 0): with a window of 3 steps, nothing at
    step 2; one StuckWarning at step 3, in run.warnings and warnings.json; extended to 5 steps (a
    resume from the checkpoint), the record is kept and nothing warns again."""
    cfg = quick(stuck_p=0.0, stuck_teacher_logp=0.0, stuck_warn_share=0.5, stuck_window=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = train_student(one_teacher, cfg)
    assert [r["stuck_share/binding"] for r in run.metrics] == [1.0, 1.0]
    assert not [w for w in caught if w.category is StuckWarning] and run.warnings == []
    with pytest.warns(StuckWarning, match=r"stuck on binding.*loss=\"fkl\".*loss=\"jsd\".*lmbda < 1") as caught:
        run = train_student(one_teacher, quick(**{**cfg.__dict__, "steps": 4}))
    assert len([w for w in caught if w.category is StuckWarning]) == 1
    assert [(w["step"], w["domain"], w["share"]) for w in run.warnings] == [(3, "binding", 1.0)]
    assert json.loads((run.dir / "warnings.json").read_text()) == run.warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resumed = train_student(one_teacher, quick(**{**cfg.__dict__, "steps": 5}))
    assert not [w for w in caught if w.category is StuckWarning]
    assert [r["step"] for r in resumed.metrics] == [1, 2, 3, 4, 5]
    assert resumed.warnings == run.warnings == json.loads((resumed.dir / "warnings.json").read_text())


def test_no_warning_below_the_share(one_teacher):
    """The same flags, a share threshold of 1 (never exceeded): no warning, no warnings.json."""
    cfg = quick(stuck_p=0.0, stuck_teacher_logp=0.0, stuck_warn_share=1.0, stuck_window=1, experiment=None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = train_student(one_teacher, cfg)
    assert not [w for w in caught if w.category is StuckWarning] and run.warnings == []


# ---------------------------------------------------------------------------------- the heat map


def trace_row(stuck=None):
    r = {"step": 1, "domain": "chain", "answer": "g1 g0.", "tokens": ["g1", "g4", "."], "kl": [0.1, 16.8, 0.2]}
    if stuck is not None:
        r["stuck"] = stuck
    return r


def test_heat_map_marks_stuck_tokens_and_draws_old_traces():
    """One hatched outline per stuck token; a trace without flags (older runs) draws with none."""
    import matplotlib

    matplotlib.use("Agg")
    marked = lambda fig: [p for p in fig.axes[0].patches if p.get_gid() == "stuck"]  # noqa: E731
    fig = plots.token_heatmap([trace_row([False, True, False]), trace_row([True, False, False])], domains=("chain",))
    assert sorted((round(p.get_x() + 0.46), round(p.get_y() + 0.46)) for p in marked(fig)) == [(0, 1), (1, 0)]
    fig = plots.token_heatmap([trace_row()], domains=("chain",))
    assert marked(fig) == []
    fig = plots.token_heatmap([trace_row([True, True, True])], domains=("chain",), mark_stuck=False)
    assert marked(fig) == []


def test_the_cli_derives_the_stuck_flags():
    """`mopd-mini distill` gets --stuck-p, --stuck-teacher-logp, --stuck-warn-share, --stuck-window from the dataclass."""
    import argparse

    from mopd_mini.cli import add_config_flags, config_values
    parser = argparse.ArgumentParser()
    add_config_flags(parser, MOPDConfig)
    values = config_values(MOPDConfig, parser.parse_args(["--stuck-p", "0.95", "--stuck-teacher-logp", "-6",
                                                          "--stuck-warn-share", "0.1", "--stuck-window", "30"]))
    assert {k: values[k] for k in values if k.startswith("stuck")} == dict(
        stuck_p=0.95, stuck_teacher_logp=-6.0, stuck_warn_share=0.1, stuck_window=30)


def test_stuck_metrics_pool_one_domain_over_its_completion_tokens():
    # two rows of the batch belong to the domain; row 1's last position is padding
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.float)
    info = {"stuck": torch.tensor([[0., 1., 0.], [1., 0., 1.], [1., 1., 1.]]),  # row 2: another domain
            "kl": torch.tensor([[1., 4., 1.], [6., 2., 9.], [0., 0., 0.]])}
    row = stuck_metrics(info, torch.tensor([0, 1]), mask, "binding")
    assert row["stuck_tokens/binding"] == 2                       # the padded stuck flag is not counted
    assert row["stuck_share/binding"] == pytest.approx(2 / 5)
    assert row["kl_stuck/binding"] == pytest.approx((4 + 6) / 2)
    assert row["kl_rest/binding"] == pytest.approx((1 + 1 + 2) / 3)
    assert "grad_stuck/binding" not in row                         # no grad_norm in info: not logged
    none = stuck_metrics({"stuck": torch.zeros(1, 3), "kl": torch.ones(1, 3)}, torch.tensor([0]),
                         torch.ones(1, 3), "recall")
    assert none["stuck_share/recall"] == 0 and none["kl_stuck/recall"] is None
