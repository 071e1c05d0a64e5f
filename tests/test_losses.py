"""Tests for mopd_mini.losses: each loss against an independent brute-force reference, and each
estimator against the exact quantity it estimates."""

import math

import pytest
import torch

from mopd_mini.losses import (group_advantages, masked_mean, pg_loss, policy_gradient_loss,
                              reverse_kl, topk_reverse_kl)

B, T, V, K = 3, 5, 11, 4


def random_mask():
    """A fixed random (B, T) float mask whose second row is all zero (an empty completion)."""
    g = torch.Generator().manual_seed(0)
    mask = (torch.rand(B, T, generator=g) < 0.6).double()
    mask[0, 0] = 1.0
    mask[1] = 0.0
    return mask


def reference_mean(x, mask):
    """The aggregation written out with loops: token mean per sequence, mean over non-empty ones."""
    per_seq = []
    for b in range(x.shape[0]):
        tokens = [x[b, t] for t in range(x.shape[1]) if mask[b, t]]
        if tokens:
            per_seq.append(sum(tokens) / len(tokens))
    return sum(per_seq) / len(per_seq) if per_seq else torch.tensor(0.0, dtype=x.dtype)


def naive_reverse_kl(s, t, mask):
    """Full-tensor reverse KL with plain autograd, the reference for the chunked one."""
    log_p_S, log_p_T = torch.log_softmax(s, -1), torch.log_softmax(t, -1)
    kl = (log_p_S.exp() * (log_p_S - log_p_T)).sum(-1)
    return reference_mean(kl, mask), kl


def teacher_topk(teacher_logits, k):
    """The teacher's top-k ids and full-vocabulary log-probs at them, as a scorer would return."""
    top = torch.log_softmax(teacher_logits, -1).topk(k, dim=-1)
    return top.indices, top.values


# ---------------------------------------------------------------- aggregation and policy gradient

def test_masked_mean_matches_loops_and_skips_empty_rows():
    x, mask = torch.randn(B, T, dtype=torch.float64), random_mask()
    torch.testing.assert_close(masked_mean(x, mask), reference_mean(x, mask))
    torch.testing.assert_close(masked_mean(x, mask.bool()), reference_mean(x, mask))


def test_masked_mean_of_no_tokens_is_zero_with_a_graph():
    x = torch.randn(B, T, requires_grad=True)
    loss = masked_mean(x, torch.zeros(B, T))
    assert loss.item() == 0.0 and loss.requires_grad
    loss.backward()
    assert torch.equal(x.grad, torch.zeros(B, T))


@pytest.mark.parametrize("adv_shape", [(B, T), (B,), (B, 1)])
def test_policy_gradient_loss_matches_reference(adv_shape):
    logprobs = (-torch.rand(B, T, dtype=torch.float64)).requires_grad_()
    advantages = torch.randn(adv_shape, dtype=torch.float64, requires_grad=True)
    mask = random_mask()
    loss, info = policy_gradient_loss(logprobs, advantages, mask)
    A = advantages.detach().reshape(B, -1).expand(B, T)
    torch.testing.assert_close(loss, -reference_mean(A * logprobs.detach(), mask))
    torch.testing.assert_close(info["advantage"], A)
    loss.backward()
    assert advantages.grad is None                              # stopgrad(A)
    n_rows = sum(1 for b in range(B) if mask[b].any())           # B'
    expected = -A * mask / mask.sum(1, keepdim=True).clamp(min=1) / n_rows
    torch.testing.assert_close(logprobs.grad, expected)          # dL/dlog pi = -A M / (L_b B')


# ---------------------------------------------------------------- MOPD-PG

def test_pg_loss_matches_reference():
    student, teacher = -3 * torch.rand(2, B, T, dtype=torch.float64)
    student.requires_grad_()
    mask, c = random_mask(), 1.0
    loss, info = pg_loss(student, teacher, mask, clip=c)
    A_raw = teacher - student.detach()
    A = torch.tensor([[min(max(a, -c), c) for a in row] for row in A_raw.tolist()], dtype=torch.float64)
    torch.testing.assert_close(loss, -reference_mean(A * student.detach(), mask))
    torch.testing.assert_close(info["advantage_raw"], A_raw)
    torch.testing.assert_close(info["advantage"], A)
    torch.testing.assert_close(info["sampled_kl"], student.detach() - teacher)
    assert all(not t.requires_grad for t in info.values())


def test_pg_clip_on_hand_made_example():
    student = torch.tensor([[-1.0, -2.0, -10.0, -30.0]])
    teacher = torch.tensor([[-8.0, -1.0, -1.0, -10.0]])   # A_raw = [-7, 1, 9, 20]
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])           # the last (A = 20) is not a completion token
    _, info = pg_loss(student, teacher, mask, clip=5.0)
    assert torch.equal(info["advantage_raw"], torch.tensor([[-7.0, 1.0, 9.0, 20.0]]))
    assert torch.equal(info["advantage"], torch.tensor([[-5.0, 1.0, 5.0, 5.0]]))
    assert torch.equal(info["clipped"], torch.tensor([[True, False, True, False]]))
    assert info["clip_fraction"].item() == pytest.approx(2 / 3)
    _, info = pg_loss(student, teacher, mask, clip=None)
    assert torch.equal(info["advantage"], info["advantage_raw"])
    assert info["clip_fraction"].item() == 0.0 and not info["clipped"].any()


def test_pg_expected_gradient_is_reverse_kl_gradient():
    """E_{y ~ p_S}[grad L_PG] = grad KL(p_S || p_T): one categorical position, many samples."""
    torch.manual_seed(0)
    N = 200_000
    s = torch.tensor([0.5, -1.0, 2.0, 0.0, -0.5], dtype=torch.float64, requires_grad=True)
    t = torch.tensor([1.5, 0.0, -1.0, 0.5, 1.0], dtype=torch.float64)
    log_p_S, log_p_T = torch.log_softmax(s, -1), torch.log_softmax(t, -1)
    exact, = torch.autograd.grad((log_p_S.exp() * (log_p_S - log_p_T)).sum(), s, retain_graph=True)

    p_S = log_p_S.exp().detach()
    y = torch.multinomial(p_S, N, replacement=True)                       # (N,) y ~ p_S
    student, teacher = log_p_S[y][:, None], log_p_T[y][:, None]           # (N, 1): N sequences of 1 token
    loss, info = pg_loss(student, teacher, torch.ones(N, 1), clip=None)
    estimate, = torch.autograd.grad(loss, s)

    # per-sample gradients -A_i (onehot(y_i) - p_S); the mean's standard error is their std / sqrt(N)
    per_sample = -info["advantage"] * (torch.nn.functional.one_hot(y, 5) - p_S)
    stderr = per_sample.std(0) / math.sqrt(N)
    assert exact.abs().max() > 50 * stderr.max()                     # the test can tell them apart
    assert ((estimate - exact).abs() <= 5 * stderr).all(), (estimate, exact, stderr)


# ---------------------------------------------------------------- MOPD-Top-k

def reference_topk(s, ids, teacher_lp, mask, correction):
    """The top-k loss with a full log_softmax and plain loops over (b, t, j)."""
    log_p_S = torch.log_softmax(s, -1)
    per_token = torch.zeros(s.shape[:2], dtype=s.dtype)
    for b in range(s.shape[0]):
        for t in range(s.shape[1]):
            for j in range(ids.shape[-1]):
                lp_s, lp_t = log_p_S[b, t, ids[b, t, j]], teacher_lp[b, t, j]
                per_token[b, t] += lp_s.exp() * (lp_s - lp_t)
                if correction:
                    per_token[b, t] += lp_t.exp() - lp_s.exp()
    return reference_mean(per_token, mask), per_token


@pytest.mark.parametrize("correction", [True, False])
def test_topk_matches_reference(correction):
    torch.manual_seed(1)
    s, t = torch.randn(2, B, T, V, dtype=torch.float64)
    ids, teacher_lp = teacher_topk(t, K)
    mask = random_mask()
    loss, info = topk_reverse_kl(s, ids, teacher_lp, mask, correction=correction)
    ref_loss, ref_per_token = reference_topk(s, ids, teacher_lp, mask, correction)
    torch.testing.assert_close(loss, ref_loss)
    torch.testing.assert_close(info["per_token"], ref_per_token)
    torch.testing.assert_close(info["student_topk_mass"], torch.softmax(s, -1).gather(-1, ids).sum(-1))
    torch.testing.assert_close(info["teacher_topk_mass"], teacher_lp.exp().sum(-1))


def test_corrected_topk_is_stationary_at_the_teacher_and_uncorrected_is_not():
    torch.manual_seed(2)
    t = torch.randn(B, T, V, dtype=torch.float64)
    ids, teacher_lp = teacher_topk(t, K)            # k < V: the set misses some mass
    grads = {}
    for correction in (True, False):
        s = t.clone().requires_grad_()              # p_S = p_T
        loss, _ = topk_reverse_kl(s, ids, teacher_lp, torch.ones(B, T), correction=correction)
        grads[correction], = torch.autograd.grad(loss, s)
    assert grads[True].abs().max() < 1e-12
    assert grads[False].abs().max() > 1e-3


def test_corrected_topk_is_nonnegative():
    torch.manual_seed(3)
    s, t = 3 * torch.randn(2, 4, 8, 50, dtype=torch.float64)
    _, info = topk_reverse_kl(s, *teacher_topk(t, 10), torch.ones(4, 8))
    assert (info["per_token"] >= -1e-12).all()


# ---------------------------------------------------------------- exact reverse KL

@pytest.mark.parametrize("chunk_size", [1, 2, 4, None])
def test_reverse_kl_forward_and_gradient_match_naive(chunk_size):
    torch.manual_seed(4)
    s, t = torch.randn(2, B, T, V, dtype=torch.float64)
    mask = random_mask()
    assert mask.sum() % 2 != 0 and mask.sum() % 4 != 0     # chunks 2 and 4 leave a ragged last chunk
    s.requires_grad_()
    t.requires_grad_()                                      # to check that none flows there
    loss, info = reverse_kl(s, t, mask, chunk_size=chunk_size)
    loss.backward()
    s_ref = s.detach().clone().requires_grad_()
    ref_loss, ref_kl = naive_reverse_kl(s_ref, t.detach(), mask)
    ref_loss.backward()
    torch.testing.assert_close(loss, ref_loss)
    torch.testing.assert_close(info["kl"], ref_kl.detach() * mask)   # 0 off the mask
    torch.testing.assert_close(s.grad, s_ref.grad)
    assert t.grad is None


def test_reverse_kl_gradcheck():
    torch.manual_seed(5)
    s = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    t = torch.randn(2, 3, 4, dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]])
    assert torch.autograd.gradcheck(lambda s: reverse_kl(s, t, mask, chunk_size=2)[0], (s,))


def test_reverse_kl_large_vocabulary():
    torch.manual_seed(6)
    s, t = torch.randn(2, 2, 3, 50_000)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    s_ref = s.clone().requires_grad_()
    ref_loss, _ = naive_reverse_kl(s_ref, t, mask)
    ref_loss.backward()
    for chunk_size in (None, 2):                    # default: all 5 rows in one chunk; then 3 chunks
        s.requires_grad_().grad = None
        loss, _ = reverse_kl(s, t, mask, chunk_size=chunk_size)
        loss.backward()
        torch.testing.assert_close(loss, ref_loss)
        torch.testing.assert_close(s.grad, s_ref.grad)


def test_low_precision_logits_are_computed_in_fp32():
    torch.manual_seed(7)
    s, t = torch.randn(2, B, T, V)
    s16 = s.bfloat16().requires_grad_()
    mask = random_mask().float()
    loss, _ = reverse_kl(s16, t, mask)
    loss.backward()
    ref_loss, _ = naive_reverse_kl(s16.detach().float(), t, mask)
    assert loss.dtype == torch.float32 and s16.grad.dtype == torch.bfloat16
    torch.testing.assert_close(loss, ref_loss)
    loss, _ = topk_reverse_kl(s16, *teacher_topk(t, K), mask)
    ref_loss, _ = reference_topk(s16.detach().float(), *teacher_topk(t, K), mask, correction=True)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, ref_loss)


# ---------------------------------------------------------------- all three at teacher == student

def test_teacher_equals_student_gives_zero():
    torch.manual_seed(8)
    logits = torch.randn(B, T, V, dtype=torch.float64)
    mask = random_mask()
    logprobs = torch.log_softmax(logits, -1)[..., 0]
    loss, info = pg_loss(logprobs, logprobs, mask)
    assert loss.item() == 0.0 and not info["advantage"].any() and not info["sampled_kl"].any()
    loss, info = topk_reverse_kl(logits, *teacher_topk(logits, K), mask)
    assert abs(loss.item()) < 1e-12 and info["per_token"].abs().max() < 1e-12
    loss, info = reverse_kl(logits, logits, mask)
    assert abs(loss.item()) < 1e-12 and info["kl"].abs().max() < 1e-12


def test_no_completion_tokens_gives_zero_loss_with_a_graph():
    torch.manual_seed(9)
    s, t = torch.randn(2, B, T, V, dtype=torch.float64)
    s.requires_grad_()
    mask = torch.zeros(B, T)
    lp_s, lp_t = torch.log_softmax(s, -1)[..., 0], torch.log_softmax(t, -1)[..., 0]
    for loss, info in [pg_loss(lp_s, lp_t, mask), topk_reverse_kl(s, *teacher_topk(t, K), mask),
                       reverse_kl(s, t, mask)]:
        grad, = torch.autograd.grad(loss, s)
        assert loss.item() == 0.0 and not grad.any()
    assert info["kl"].abs().max() == 0.0


# ---------------------------------------------------------------- GRPO advantages

def test_group_advantages():
    torch.manual_seed(10)
    rewards = torch.stack([
        torch.ones(8),                              # all correct: no signal
        torch.full((8,), 0.1),                      # constant, with a mean that rounds: still no signal
        torch.tensor([1.0, 0, 0, 1, 1, 0, 0, 0]),
        torch.randn(8),
    ])
    A, keep = group_advantages(rewards)
    assert keep.tolist() == [False, False, True, True]
    assert torch.equal(A[:2], torch.zeros(2, 8))
    torch.testing.assert_close(A[2:].mean(1), torch.zeros(2), atol=1e-6, rtol=0)
    torch.testing.assert_close(A[2:].std(1, correction=0), torch.ones(2), atol=1e-4, rtol=0)
    expected = (rewards[3] - rewards[3].mean()) / (rewards[3].std(correction=0) + 1e-6)
    torch.testing.assert_close(A[3], expected)


# ---------------------------------------------------------------- validation

def test_validation_errors():
    lp, mask = torch.zeros(B, T), torch.ones(B, T)
    logits = torch.zeros(B, T, V)
    ids, teacher_lp = torch.zeros(B, T, K, dtype=torch.long), torch.zeros(B, T, K)
    for clip in (0.0, -1.0):
        with pytest.raises(ValueError, match="clip must be > 0"):
            pg_loss(lp, lp, mask, clip=clip)
    with pytest.raises(ValueError, match="shapes must agree"):
        pg_loss(lp, torch.zeros(B, T + 1), mask)
    with pytest.raises(ValueError, match="advantages must be"):
        policy_gradient_loss(lp, torch.zeros(B + 1), mask)
    with pytest.raises(ValueError, match="k must be between 1 and V"):
        topk_reverse_kl(logits, torch.zeros(B, T, V + 1, dtype=torch.long), torch.zeros(B, T, V + 1), mask)
    with pytest.raises(ValueError, match="shapes must agree"):
        topk_reverse_kl(logits, ids, teacher_lp[:, :, :-1], mask)
    with pytest.raises(ValueError, match="shapes must agree"):
        topk_reverse_kl(logits, ids, teacher_lp, mask[:, :-1])
    with pytest.raises(ValueError, match="must be 3-D"):
        reverse_kl(logits[0], logits[0], mask)
    with pytest.raises(ValueError, match="shapes must agree"):
        reverse_kl(logits, torch.zeros(B, T, V + 1), mask)
    with pytest.raises(ValueError, match="shapes must agree"):
        reverse_kl(logits, logits, mask[:-1])


# ---------------------------------------------------------------- offline losses (RFT, soft labels)

def naive_sft(logits, ids, mask):
    """Cross-entropy written out with loops over the sequence."""
    nll = torch.zeros(ids.shape, dtype=logits.dtype)
    for b in range(ids.shape[0]):
        for t in range(ids.shape[1]):
            z = logits[b, t]
            nll[b, t] = torch.log(torch.exp(z).sum()) - z[ids[b, t]]
    return reference_mean(nll, mask), nll


def naive_forward_kl(s, t, mask):
    """KL(p_T || p_S) per position from explicit softmaxes."""
    p_T, p_S = torch.softmax(t, -1), torch.softmax(s, -1)
    kl = (p_T * (p_T.log() - p_S.log())).sum(-1)
    return reference_mean(kl, mask), kl


def test_cross_entropy_matches_loops_and_its_gradient():
    from mopd_mini.losses import cross_entropy
    torch.manual_seed(7)
    s = torch.randn(B, T, V, dtype=torch.float64, requires_grad=True)
    ids = torch.randint(0, V, (B, T))
    mask = random_mask()
    loss, info = cross_entropy(s, ids, mask)
    loss.backward()
    s_ref = s.detach().clone().requires_grad_()
    ref_loss, ref_nll = naive_sft(s_ref, ids, mask)
    ref_loss.backward()
    torch.testing.assert_close(loss, ref_loss)
    torch.testing.assert_close(info["nll"], ref_nll.detach())
    torch.testing.assert_close(s.grad, s_ref.grad)
    # it equals torch's cross_entropy on a single sequence with every token counted
    flat = torch.nn.functional.cross_entropy(s[0].detach(), ids[0])
    torch.testing.assert_close(cross_entropy(s[:1].detach(), ids[:1], torch.ones(1, T))[0], flat)


def test_the_old_name_sft_loss_warns_and_gives_cross_entropy():
    """losses.sft_loss was renamed cross_entropy (it is RFT's and SFT on gold's loss alike): the old
    name works for one release, with a DeprecationWarning that names the new one."""
    from mopd_mini import losses
    with pytest.warns(DeprecationWarning, match=r"importing sft_loss from mopd_mini.losses is deprecated.*"
                                                r"use mopd_mini.losses.cross_entropy"):
        assert losses.sft_loss is losses.cross_entropy
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        losses.nothing


@pytest.mark.parametrize("chunk_size", [1, 3, None])
def test_forward_kl_matches_naive_and_reaches_zero_at_the_teacher(chunk_size):
    from mopd_mini.losses import forward_kl
    torch.manual_seed(8)
    s, t = torch.randn(2, B, T, V, dtype=torch.float64)
    mask = random_mask()
    s.requires_grad_()
    t.requires_grad_()
    loss, info = forward_kl(s, t, mask, chunk_size=chunk_size)
    loss.backward()
    s_ref = s.detach().clone().requires_grad_()
    ref_loss, ref_kl = naive_forward_kl(s_ref, t.detach(), mask)
    ref_loss.backward()
    torch.testing.assert_close(loss, ref_loss)
    torch.testing.assert_close(info["kl"], ref_kl.detach() * mask)
    torch.testing.assert_close(s.grad, s_ref.grad)
    assert t.grad is None
    assert torch.all(info["kl"] >= -1e-12)
    zero, _ = forward_kl(t.detach() + 3.0, t.detach(), mask)   # a shift of the logits is the same p
    assert abs(zero.item()) < 1e-12
    # forward, not reverse: the two differ on asymmetric distributions
    assert not torch.allclose(loss, reverse_kl(s.detach(), t.detach(), mask)[0])


def test_forward_kl_gradcheck_and_teacher_zeros():
    """Finite differences agree; a teacher with p_T(v) = 0 on some tokens (logit -inf) is fine."""
    from mopd_mini.losses import forward_kl
    torch.manual_seed(9)
    s = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    t = torch.randn(2, 3, 4, dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]])
    assert torch.autograd.gradcheck(lambda s: forward_kl(s, t, mask, chunk_size=2)[0], (s,))
    t[..., 0] = -math.inf
    loss, _ = forward_kl(s, t, mask)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(s.grad).all()
