"""Tests for the cures of a stuck student in mopd_mini.losses: the on-policy forward KL (the same
`forward_kl` as the offline soft labels), the generalised JSD with TRL's beta convention, and
top-k local support matching. Each gradient is checked against a closed form computed by hand in
this file on a 3-token categorical (plain Python floats, not the library's code), and the chunked
backward against autograd of an unchunked reference on random inputs."""

import math

import pytest
import torch

from mopd_mini.losses import jsd_loss, reverse_kl, forward_kl, topk_reverse_kl
from tests.test_losses import B, T, random_mask, reference_mean  # the same (B, T) mask and aggregation as the other losses

V = 11

# the 3-token categorical of the hand computations: student and teacher probabilities
P_S = [0.7, 0.2, 0.1]
P_T = [0.1, 0.3, 0.6]


def logits_of(p) -> torch.Tensor:
    """(1, 1, V) float64 logits whose softmax is p."""
    return torch.tensor([[[math.log(x) for x in p]]], dtype=torch.float64)


def grad_of(loss_fn, p_S=P_S, p_T=P_T) -> list[float]:
    """The library's gradient w.r.t. the student's logits at one position (mask weight 1)."""
    s = logits_of(p_S).requires_grad_()
    loss, _ = loss_fn(s, logits_of(p_T), torch.ones(1, 1))
    loss.backward()
    return s.grad[0, 0].tolist()


def reference_jsd(s, t, beta):
    """The generalised JSD written from its definition, unchunked, float64, every token a loop term:
    M = beta p_T + (1 - beta) p_S; beta KL(p_T || M) + (1 - beta) KL(p_S || M); the endpoints the KLs."""
    p_S, p_T = torch.softmax(s, -1), torch.softmax(t, -1)
    if beta == 0:
        return (p_T * (p_T.log() - p_S.log())).sum(-1)
    if beta == 1:
        return (p_S * (p_S.log() - p_T.log())).sum(-1)
    M = beta * p_T + (1 - beta) * p_S
    return beta * (p_T * (p_T / M).log()).sum(-1) + (1 - beta) * (p_S * (p_S / M).log()).sum(-1)


# ---------------------------------------------------------------- gradients by hand, 3 tokens

def test_forward_kl_gradient_by_hand():
    """d KL(p_T || p_S) / dz = p_S - p_T: (0.6, -0.1, -0.5)."""
    assert grad_of(forward_kl) == pytest.approx([0.6, -0.1, -0.5], abs=1e-12)


def test_reverse_kl_gradient_by_hand():
    """d KL(p_S || p_T) / dz_v = p_S(v) (log(p_S(v) / p_T(v)) - KL)."""
    kl = sum(s * math.log(s / t) for s, t in zip(P_S, P_T))
    expected = [s * (math.log(s / t) - kl) for s, t in zip(P_S, P_T)]
    assert grad_of(reverse_kl) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("beta", [0.1, 0.5, 0.9])
def test_jsd_gradient_by_hand(beta):
    """d JSD / dz_v = (1 - beta) p_S(v) (log(p_S(v) / M(v)) - KL(p_S || M)), M = beta p_T + (1 - beta) p_S."""
    M = [beta * t + (1 - beta) * s for s, t in zip(P_S, P_T)]
    kl_SM = sum(s * math.log(s / m) for s, m in zip(P_S, M))
    expected = [(1 - beta) * s * (math.log(s / m) - kl_SM) for s, m in zip(P_S, M)]
    got = grad_of(lambda s, t, m: jsd_loss(s, t, m, beta=beta))
    assert got == pytest.approx(expected, abs=1e-12)
    # and the loss value from the same hand numbers
    value = beta * sum(t * math.log(t / m) for t, m in zip(P_T, M)) + (1 - beta) * kl_SM
    loss, _ = jsd_loss(logits_of(P_S), logits_of(P_T), torch.ones(1, 1), beta=beta)
    assert loss.item() == pytest.approx(value, abs=1e-12)


def test_support_matching_gradient_by_hand():
    """The teacher's top-2 set is {2, 1}: q_S = (0.1, 0.2) / 0.3 and q_T = (0.6, 0.3) / 0.9 on it;
    gradient q_S (log(q_S / q_T) - KL) on the set, exactly 0 on token 0 (off the set)."""
    ids = torch.tensor([[[2, 1]]])
    lp = torch.tensor([[[math.log(0.6), math.log(0.3)]]], dtype=torch.float64)
    q_S = [0.1 / 0.3, 0.2 / 0.3]
    q_T = [0.6 / 0.9, 0.3 / 0.9]
    kl = sum(s * math.log(s / t) for s, t in zip(q_S, q_T))
    s = logits_of(P_S).requires_grad_()
    loss, info = topk_reverse_kl(s, ids, lp, torch.ones(1, 1), support=True)
    loss.backward()
    assert loss.item() == pytest.approx(kl, abs=1e-12)
    g = s.grad[0, 0]
    assert g[0].item() == 0.0                                            # off the set: exactly 0
    assert [g[2].item(), g[1].item()] == pytest.approx([q * (math.log(q / t) - kl) for q, t in zip(q_S, q_T)],
                                                       abs=1e-12)
    assert info["student_topk_mass"].item() == pytest.approx(0.3, abs=1e-12)   # logged from the full p_S


def test_the_stuck_case():
    """p_S(wrong) = 0.999 on a token the teacher gives e^-17: the reverse KL's and JSD's gradients
    have all but vanished, the forward KL's has norm about sqrt(2) (+1 on the wrong token, -1 on the
    teacher's); the closed form of each, by hand."""
    eps, tiny = 1e-3, math.exp(-17)
    p_S, p_T = [1 - eps, eps / 2, eps / 2], [tiny, 1 - 2 * tiny, tiny]
    norm = lambda g: math.sqrt(sum(x * x for x in g))
    fkl = grad_of(forward_kl, p_S, p_T)
    assert fkl == pytest.approx([a - b for a, b in zip(p_S, p_T)], abs=1e-12)
    assert norm(fkl) == pytest.approx(math.sqrt(2), abs=2e-3)
    kl = sum(s * math.log(s / t) for s, t in zip(p_S, p_T))
    rkl = grad_of(reverse_kl, p_S, p_T)
    assert rkl == pytest.approx([s * (math.log(s / t) - kl) for s, t in zip(p_S, p_T)], abs=1e-9)
    assert kl > 16 and norm(rkl) < 0.03                 # a KL of about 17 nats with almost no gradient
    jsd = grad_of(lambda s, t, m: jsd_loss(s, t, m, beta=0.5), p_S, p_T)
    assert norm(jsd) < 0.01


# ---------------------------------------------------------------- JSD: TRL's convention

def test_jsd_endpoints_are_the_two_kls_and_the_middle_matches_the_definition():
    """beta = 0 is the forward KL (forward_kl), beta = 1 the reverse KL (reverse_kl), as in
    TRL's GKDTrainer; a middle value matches the unchunked float64 definition to 1e-6."""
    torch.manual_seed(11)
    s, t = torch.randn(2, B, T, V, dtype=torch.float64)
    mask = random_mask()
    fkl, _ = forward_kl(s, t, mask)
    rkl, _ = reverse_kl(s, t, mask)
    assert jsd_loss(s, t, mask, beta=0.0)[0].item() == pytest.approx(fkl.item(), abs=1e-12)
    assert jsd_loss(s, t, mask, beta=1.0)[0].item() == pytest.approx(rkl.item(), abs=1e-12)
    for beta in (0.0, 0.3, 0.5, 1.0):
        loss, info = jsd_loss(s, t, mask, beta=beta, chunk_size=2)
        ref = reference_jsd(s, t, beta)
        assert abs(loss.item() - reference_mean(ref, mask).item()) < 1e-6
        torch.testing.assert_close(info["jsd"], ref * mask, atol=1e-6, rtol=0)
    assert fkl.item() != pytest.approx(rkl.item(), abs=1e-3)   # the two ends really differ here


def test_jsd_near_each_end_leads_with_that_ends_kl():
    """The middle formula's first-order term names the direction without the special cases:
    JSD_beta ~ beta KL(p_T || p_S) as beta -> 0 and ~ (1 - beta) KL(p_S || p_T) as beta -> 1."""
    torch.manual_seed(12)
    s, t = torch.randn(2, 2, 3, 6, dtype=torch.float64)
    mask = torch.ones(2, 3)
    d = 1e-6
    fkl, rkl = forward_kl(s, t, mask)[0].item(), reverse_kl(s, t, mask)[0].item()
    assert jsd_loss(s, t, mask, beta=d)[0].item() / d == pytest.approx(fkl, rel=1e-3)
    assert jsd_loss(s, t, mask, beta=1 - d)[0].item() / d == pytest.approx(rkl, rel=1e-3)


@pytest.mark.parametrize("chunk_size", [1, 2, 4, None])
def test_jsd_chunked_backward_matches_autograd(chunk_size):
    torch.manual_seed(13)
    s, t = torch.randn(2, B, T, V, dtype=torch.float64) * 2
    mask = random_mask()
    s.requires_grad_()
    t.requires_grad_()
    loss, _ = jsd_loss(s, t, mask, beta=0.3, chunk_size=chunk_size)
    loss.backward()
    s_ref = s.detach().clone().requires_grad_()
    reference_mean(reference_jsd(s_ref, t.detach(), 0.3), mask).backward()
    torch.testing.assert_close(s.grad, s_ref.grad)
    assert t.grad is None                                       # the teacher is a constant


def test_jsd_gradcheck_bf16_and_teacher_zeros():
    torch.manual_seed(14)
    s = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    t = torch.randn(2, 3, 4, dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]])
    assert torch.autograd.gradcheck(lambda s: jsd_loss(s, t, mask, beta=0.7, chunk_size=2)[0], (s,))
    t[..., 0] = -math.inf                                       # p_T(v) = 0 on a token
    loss, _ = jsd_loss(s, t, mask, beta=0.5)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(s.grad).all()
    z = torch.randn(2, 3, 40).bfloat16().requires_grad_()       # low precision in, fp32 maths, grad in bf16
    loss, _ = jsd_loss(z, torch.randn(2, 3, 40).bfloat16(), torch.ones(2, 3))
    loss.backward()
    assert loss.dtype == torch.float32 and z.grad.dtype == torch.bfloat16


def test_jsd_is_zero_at_the_teacher_and_refuses_a_bad_beta():
    torch.manual_seed(15)
    t = torch.randn(B, T, V, dtype=torch.float64)
    assert abs(jsd_loss(t + 2.0, t, torch.ones(B, T), beta=0.4)[0].item()) < 1e-12
    for beta in (-0.1, 1.5):
        with pytest.raises(ValueError, match="beta must be in"):
            jsd_loss(t, t, torch.ones(B, T), beta=beta)


# ---------------------------------------------------------------- support matching

def test_support_matching_matches_reference_and_ignores_the_mass_off_the_set():
    torch.manual_seed(16)
    s, t = torch.randn(2, B, T, V, dtype=torch.float64)
    top = torch.log_softmax(t, -1).topk(4, dim=-1)
    ids, lp = top.indices, top.values
    mask = random_mask()
    s.requires_grad_()
    loss, info = topk_reverse_kl(s, ids, lp, mask, support=True)
    loss.backward()
    s_ref = s.detach().clone().requires_grad_()
    log_q_S = s_ref.gather(-1, ids).log_softmax(-1)            # the student renormalised on the set
    log_q_T = lp - lp.logsumexp(-1, keepdim=True)              # the teacher renormalised on the set
    per_token = (log_q_S.exp() * (log_q_S - log_q_T)).sum(-1)
    reference_mean(per_token, mask).backward()
    torch.testing.assert_close(loss, reference_mean(per_token.detach(), mask))
    torch.testing.assert_close(info["per_token"], per_token.detach())
    torch.testing.assert_close(s.grad, s_ref.grad)
    off = torch.ones_like(s, dtype=torch.bool).scatter(-1, ids, False)
    assert (s.grad[off] == 0).all()                              # blind to the logits off the set
    # the correction has no effect, and moving mass off the set changes nothing
    same, _ = topk_reverse_kl(s.detach(), ids, lp, mask, correction=False, support=True)
    moved = s.detach().masked_fill(off, 30.0)                   # almost all mass off the set now
    assert same.item() == pytest.approx(loss.item(), abs=1e-12)
    assert topk_reverse_kl(moved, ids, lp, mask, support=True)[0].item() == pytest.approx(loss.item(), abs=1e-10)
    # 0 where the student's in-set shape is the teacher's, whatever its mass on the set
    at_teacher = torch.full_like(s, -5.0).scatter(-1, ids, lp + 1.0)
    assert abs(topk_reverse_kl(at_teacher, ids, lp, mask, support=True)[0].item()) < 1e-12
    # the plain top-k loss is not blind to it: it is another objective
    assert topk_reverse_kl(moved, ids, lp, mask)[0].item() != pytest.approx(
        topk_reverse_kl(s.detach(), ids, lp, mask)[0].item(), abs=1e-3)


# ---------------------------------------------------------------- the options in the trainer

def test_a_cure_not_chosen_is_not_computed_and_the_exact_kl_is_always_logged(teacher_bank, mixed_examples,
                                                                             monkeypatch):
    from mopd_mini import distill, routing
    from mopd_mini.config import MOPDConfig
    from mopd_mini.distill import FORMS, mopd_objective
    from mopd_mini.rollout import completion_logits, sample
    from mopd_mini.evaluation import TEACHER_OF
    bank = teacher_bank
    with bank.use("teacher_binding") as model:
        rollout = sample(model, bank.tokenizer, mixed_examples, max_new_tokens=4,
                         generator=torch.Generator().manual_seed(1))
        logits = completion_logits(model, rollout)
    route = {d: TEACHER_OF.format(d) for d in ("binding", "recall")}
    scores = routing.teacher_outputs(bank, rollout, route, k=8)
    exact = reverse_kl(logits, scores.logits, rollout.completion_mask)[1]["kl"]
    calls = []
    real = {"forward_kl": distill.forward_kl, "jsd_loss": distill.jsd_loss}
    for name, fn in real.items():
        monkeypatch.setattr(distill, name, lambda *a, _n=name, _f=fn, **k: calls.append(_n) or _f(*a, **k))
    for loss in FORMS:
        _, info = mopd_objective(MOPDConfig(loss=loss, topk=8), logits, rollout, scores)
        torch.testing.assert_close(info["kl"], exact)
    assert calls == []                                         # neither cure ran for the three forms
    for loss, name in (("fkl", "forward_kl"), ("jsd", "jsd_loss")):
        calls.clear()
        value, info = mopd_objective(MOPDConfig(loss=loss, topk=8), logits, rollout, scores)
        assert calls == [name]                                 # exactly the chosen one, once
        torch.testing.assert_close(info["kl"], exact)          # the exact reverse KL beside it
    fkl = forward_kl(logits, scores.logits, rollout.completion_mask)[0]
    assert mopd_objective(MOPDConfig(loss="fkl", topk=8), logits, rollout, scores)[0].item() == pytest.approx(fkl.item())


@pytest.mark.parametrize("bad, words", [
    (dict(beta=1.5), ("beta", "[0, 1]")),
    (dict(beta=-0.1), ("beta",)),
    (dict(lmbda=1.2), ("lmbda",)),
    (dict(lmbda_prefix="student"), ("teacher", "gold")),
    (dict(top_p=0.0), ("top_p",)),
    (dict(top_p=1.5), ("top_p",)),
    (dict(loss="jsd2"), ("fkl", "jsd")),
])
def test_check_refuses_bad_cure_settings(bad, words):
    from mopd_mini.config import MOPDConfig
    with pytest.raises(ValueError) as err:
        MOPDConfig(**bad).check()
    assert all(w in str(err.value) for w in words)


def test_off_policy_steps_need_a_full_distribution_loss_and_no_golden_gain():
    from mopd_mini.config import GoldenGain, MOPDConfig
    with pytest.raises(ValueError, match="golden_gain"):
        MOPDConfig(loss="kl", lmbda=0.5, golden_gain=GoldenGain()).check()
    MOPDConfig(lmbda=1.0, golden_gain=GoldenGain()).check()
    with pytest.raises(ValueError, match="full distribution"):
        MOPDConfig(loss="pg", lmbda=0.5).check()
    for loss in ("kl", "fkl", "jsd", "topk"):
        MOPDConfig(loss=loss, lmbda=0.5).check()


def test_the_lmbda_draw_is_a_seeded_stream_per_step():
    """Bernoulli(lmbda) per step from its own (seed, step) stream: the same on every call (so a
    resumed run draws what the uninterrupted one did), never a draw at lmbda = 1, never on-policy
    at 0, about lmbda of the steps on-policy otherwise, and another seed draws otherwise."""
    from mopd_mini.config import MOPDConfig
    from mopd_mini.distill import on_policy
    cfg = MOPDConfig(lmbda=0.3, seed=4)
    draws = [on_policy(cfg, s) for s in range(1, 401)]
    assert draws == [on_policy(cfg, s) for s in range(1, 401)]
    assert 0.22 < sum(draws) / len(draws) < 0.38
    assert draws != [on_policy(MOPDConfig(lmbda=0.3, seed=5), s) for s in range(1, 401)]
    assert all(on_policy(MOPDConfig(lmbda=1.0), s) for s in range(1, 50))
    assert not any(on_policy(MOPDConfig(lmbda=0.0), s) for s in range(1, 50))


def test_off_policy_prefixes_are_the_teachers_samples_or_the_gold(teacher_bank, monkeypatch):
    """lmbda = 0: every step's completions come from each domain's own teacher (sampled with that
    adapter active), or are the gold answers; top_p reaches the student's sampler only."""
    from mopd_mini import distill
    from mopd_mini.config import MOPDConfig
    from mopd_mini.distill import train_student
    seen, real = [], distill.sample
    def spy(model, *a, **k):
        seen.append((model.active_adapter, k.get("top_p", 1.0)))
        return real(model, *a, **k)
    monkeypatch.setattr(distill, "sample", spy)
    common = dict(steps=2, prompts_per_domain=2, topk=4, eval_every=0, track_steps=(), experiment=None,
                  progress=False)
    train_student(teacher_bank, MOPDConfig(loss="kl", lmbda=0.0, top_p=0.8, **common))
    assert seen == [("teacher_binding", 1.0), ("teacher_recall", 1.0)] * 2
    seen.clear()
    train_student(teacher_bank, MOPDConfig(top_p=0.8, **common))
    assert seen == [("student", 0.8)] * 2
    packed = []
    real_pack = distill.pack
    monkeypatch.setattr(distill, "pack", lambda *a, **k: packed.append(a[3]) or real_pack(*a, **k))
    seen.clear()
    run = train_student(teacher_bank, MOPDConfig(loss="fkl", lmbda=0.0, lmbda_prefix="gold", **common))
    tok = teacher_bank.tokenizer
    assert seen == [] and len(packed) == 2 and all(r["on_policy"] == 0.0 for r in run.metrics)
    from mopd_mini.domains import get_domains
    gold = [tok(ex.answer, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            for d in get_domains(("binding", "recall")).values() for ex in d.train_examples(1, 2, 0)]
    assert packed[0] == gold
