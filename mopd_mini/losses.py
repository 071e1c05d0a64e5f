"""The MOPD losses, and the GRPO advantage, as pure functions over tensors.

Trainers call these. Nothing here knows about models or tokenizers; every input is a tensor of
log-probs or logits that the trainer has already computed. Notation follows the paper: `pi_S`
is the student, `pi_T` the teacher a completion was routed to, `y_t` the token the student
sampled at position `t`, `M` the (B, T) completion mask (1 on generated tokens, float or bool).

The three ways to pull the student toward its teacher on the student's own samples:

  pg_loss          MOPD-PG, the paper's default: a REINFORCE loss whose per-token advantage is
                   A_t = log pi_T(y_t) - log pi_S(y_t), clipped to [-c, c]. Needs only the
                   log-prob of the sampled token from each model.
  topk_reverse_kl  MOPD-Top-k: the reverse KL summed over the teacher's top-k tokens, with the
                   bias correction `- p_S + p_T` that puts its minimum at p_S = p_T.
  reverse_kl       the exact full-vocabulary reverse KL: the quantity the other two estimate.
                   Chunked, so it never holds several (B, T, V) fp32 tensors at once.

and the cures for a student stuck confidently wrong (p_S(y) -> 1 on a token y with p_T(y) -> 0,
where the reverse KL's gradient vanishes; docs/stuck.md, "The failure, in formulas"),
on the same student samples:

  forward_kl       the FORWARD KL(p_T || p_S) over the full vocabulary: MOPD's loss "fkl" when
                   applied to the student's own rollout (one function, two uses: see below).
  jsd_loss         the generalised Jensen-Shannon divergence of GKD with TRL's `beta` convention
                   (beta = 0 the forward KL, beta = 1 the reverse KL). Chunked.
  topk_reverse_kl(support=True)
                   local support matching: the reverse KL between the student and the teacher
                   both renormalised over the teacher's top-k set.

and the two OFFLINE losses, on trajectories the teachers sampled (the critique's baselines):

  cross_entropy    cross-entropy of the given tokens (OfflineConfig's loss "ce"): RFT on the teachers'
                   correct samples, SFT on the generator's gold answers.
  forward_kl       the forward KL(p_T || p_S) over the full vocabulary at every position
                   (soft-label distillation), named for its math. Chunked like reverse_kl. The
                   same function is MOPD's on-policy "fkl" on the student's rollouts.

plus `policy_gradient_loss` (the REINFORCE surrogate that MOPD-PG and GRPO share),
`group_advantages` (GRPO's group-normalised reward, used to train the teachers), and
`log_softmax_at` (log-probs of a few tokens per position without a (B, T, V) log-softmax: what
top-k and the sampled-token log-probs need).

Memory at Qwen3's vocabulary (V = 151,936): the (B, T, V) losses work a chunk of rows at a time
in forward and backward, so besides the (B, T, V) gradient they hand back (in the logits' dtype)
they hold one chunk of fp32 temporaries, never a (B, T, V) fp32 copy (docs/benchmarks.md).

Aggregation, everywhere: token mean within each sequence, then mean over the batch,

    masked_mean(x, M) = (1/B') sum_b (1/L_b) sum_t M_bt x_bt,    L_b = sum_t M_bt.

Every loss returns `(loss, info)`; `info` holds detached tensors for logging and plots.

Where this file departs from the paper:
  * B' counts only sequences with at least one completion token (the paper divides by B); an
    empty completion would otherwise pull the loss toward 0. A batch with no tokens gives 0.
  * MOPD-PG has no importance weight and no PPO ratio clip: in a single process the student's
    log-probs are recomputed in the training forward pass, so sampler and trainer agree.
  * Log-probs are computed in fp32 (or fp64 if given) whatever the logits' dtype.
  * Teachers are constants: no gradient ever flows into teacher log-probs or logits.
"""

import math

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from . import deprecation

Info = dict[str, Tensor]

CHUNK_ELEMENTS = 1 << 20  # 2**20 fp32 numbers = 4 MB: the default size of one chunk of rows


def _check_shapes(fix: str, leading_dims: int | None = None, **tensors: Tensor) -> None:
    """Raise a ValueError naming every shape unless the tensors agree on their leading dims."""
    if len({t.shape[:leading_dims] for t in tensors.values()}) > 1:
        given = ", ".join(f"{name} {tuple(t.shape)}" for name, t in tensors.items())
        where = "" if leading_dims is None else f" in their first {leading_dims} dims"
        raise ValueError(f"shapes must agree{where}, got {given}; {fix}")


def _check_logits(**logits: Tensor) -> None:
    """Raise a ValueError unless every logits tensor is 3-D (B, T, V)."""
    for name, z in logits.items():
        if z.dim() != 3:
            raise ValueError(f"{name} must be 3-D (B, T, V), got {tuple(z.shape)}; "
                             "add the missing batch or time dim with .unsqueeze()")


def _compute_dtype(x: Tensor) -> torch.dtype:
    """The dtype the maths is done in: at least fp32 (bf16/fp16 go up to fp32, fp64 stays fp64)."""
    return torch.promote_types(x.dtype, torch.float32)


def _upcast(x: Tensor) -> Tensor:
    """x in its compute dtype."""
    return x.to(_compute_dtype(x))


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """Token mean within each sequence, then mean over the sequences that have tokens.

        (1/B') sum_b (1/L_b) sum_t M_bt x_bt,   L_b = sum_t M_bt,   B' = #{b : L_b > 0}

    x, mask: (B, T). Returns a scalar; `x.sum() * 0` (0, still in the graph) if no token is masked in.
    """
    _check_shapes("pass x and mask as (B, T)", x=x, mask=mask)
    M = mask.to(x.dtype)                               # (B, T) M_bt
    L = M.sum(dim=1)                                   # (B,)   L_b
    per_seq = (M * x).sum(dim=1) / L.clamp(min=1)      # (B,)   (1/L_b) sum_t M_bt x_bt
    has_tokens = L > 0                                 # (B,)   the B' sequences that count
    if not has_tokens.any():
        return x.sum() * 0
    return per_seq[has_tokens].mean()


def policy_gradient_loss(logprobs: Tensor, advantages: Tensor, mask: Tensor) -> tuple[Tensor, Info]:
    """REINFORCE surrogate: its gradient is the policy gradient -E[A grad log pi(y_t)].

        L = - masked_mean( stopgrad(A_bt) * log pi(y_bt) )

    logprobs: (B, T) log-probs of the sampled tokens, with grad. advantages: (B, T) per token,
    or (B,) / (B, 1) per sequence (GRPO), shared by all of its tokens. mask: (B, T).
    info: `advantage` (B, T).
    """
    _check_shapes("pass logprobs and mask as (B, T)", logprobs=logprobs, mask=mask)
    B, T = logprobs.shape
    if tuple(advantages.shape) not in [(B, T), (B,), (B, 1)]:
        raise ValueError(f"advantages must be (B, T), (B,) or (B, 1) = {(B, T)}, {(B,)} or {(B, 1)}, "
                         f"got {tuple(advantages.shape)}; give one advantage per token or per sequence")
    A = advantages.detach().reshape(B, -1).expand(B, T)   # (B, T) stopgrad(A), per sequence -> per token
    loss = -masked_mean(A * logprobs, mask)
    return loss, {"advantage": A}


def pg_loss(student_logprobs: Tensor, teacher_logprobs: Tensor, mask: Tensor,
            clip: float | None = 5.0) -> tuple[Tensor, Info]:
    """MOPD-PG: policy gradient with the per-token advantage "teacher log-prob minus student log-prob".

        A_t      = stopgrad( log pi_T(y_t) - log pi_S(y_t) )
        A_t_clip = clip(A_t, -c, c)                           (c = `clip`; None: no clip)
        L_PG     = - masked_mean( A_t_clip * log pi_S(y_t) )

    Since E_{y~pi_S}[grad log pi_S(y)] = 0, the expected gradient of L_PG (unclipped) is the
    gradient of the per-token reverse KL(pi_S || pi_T) at the visited prefixes: MOPD-PG is
    REINFORCE with the advantage swapped, nothing else.

    student_logprobs, teacher_logprobs, mask: (B, T), log-probs of the sampled tokens y_t.
    info: `advantage_raw`, `advantage` (clipped), `clipped` (bool, masked tokens with |A_t| > c),
    `sampled_kl` = log pi_S(y_t) - log pi_T(y_t) (the k1 estimate of the per-token reverse KL),
    all (B, T); `clip_fraction`, the fraction of masked tokens clipped (scalar).
    """
    if clip is not None and not clip > 0:
        raise ValueError(f"clip must be > 0, or None for no clip; got {clip}")
    _check_shapes("pass (B, T) log-probs of the sampled tokens and a (B, T) mask",
                  student_logprobs=student_logprobs, teacher_logprobs=teacher_logprobs, mask=mask)
    c = math.inf if clip is None else clip
    A_raw = (teacher_logprobs - student_logprobs).detach()   # (B, T) log pi_T(y_t) - log pi_S(y_t)
    A_clip = A_raw.clamp(-c, c)                              # (B, T) clip(A_t, -c, c)
    loss, _ = policy_gradient_loss(student_logprobs, A_clip, mask)
    M = mask.bool()                                          # (B, T)
    clipped = (A_raw.abs() > c) & M                          # (B, T) tokens where the clip binds
    return loss, {
        "advantage_raw": A_raw,
        "advantage": A_clip,
        "clipped": clipped,
        "clip_fraction": clipped.sum() / M.sum().clamp(min=1),
        "sampled_kl": -A_raw,                                # k1: log pi_S(y_t) - log pi_T(y_t)
    }


def _chunks(n_rows: int, V: int, chunk_size: int | None) -> list[slice]:
    """Row slices of about CHUNK_ELEMENTS numbers each (or `chunk_size` rows)."""
    step = chunk_size or max(1, CHUNK_ELEMENTS // V)
    return [slice(i, min(i + step, n_rows)) for i in range(0, n_rows, step)]


class _LogSoftmaxAt(torch.autograd.Function):
    """log softmax(z)[ids] for (N, V) logits and (N, k) ids, a chunk of rows at a time.

        forward:   out_nj = z_{n, ids_nj} - lse_n,          lse_n = log sum_v exp z_nv
        backward:  dz_nv  = sum_j g_nj [v = ids_nj] - softmax(z_n)_v sum_j g_nj

    Saves only z, ids and lse (N,); the one (N, V) tensor it makes is the gradient, in z's dtype.
    """

    @staticmethod
    def forward(ctx, z: Tensor, ids: Tensor, chunk_size: int | None) -> Tensor:
        dtype = _compute_dtype(z)
        lse = torch.empty(len(z), dtype=dtype, device=z.device)                    # (N,)
        for rows in _chunks(len(z), z.shape[-1], chunk_size):
            lse[rows] = z[rows].to(dtype).logsumexp(dim=-1)                         # one (n, V) temporary
        ctx.save_for_backward(z, ids, lse)
        ctx.chunk_size = chunk_size
        return z.gather(-1, ids).to(dtype) - lse[:, None]                           # (N, k)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: Tensor) -> tuple[Tensor, None, None]:
        z, ids, lse = ctx.saved_tensors
        grad = torch.empty_like(z)                                                  # (N, V), z's dtype
        g = grad_out.to(lse.dtype)                                                  # (N, k)
        for rows in _chunks(len(z), z.shape[-1], ctx.chunk_size):
            d = z[rows].to(lse.dtype, copy=True)                                    # (n, V) the only temporary
            d.sub_(lse[rows, None]).exp_().mul_(-g[rows].sum(-1, keepdim=True))      # - softmax(z)_v sum_j g_j
            d.scatter_add_(-1, ids[rows], g[rows])                                  # + g_j at v = ids_j
            grad[rows] = d
        return grad, None, None


def log_softmax_at(logits: Tensor, ids: Tensor, chunk_size: int | None = None) -> Tensor:
    """log softmax(logits)[ids]: the log-probs of a few tokens per position, in fp32 (or fp64).

        out[..., j] = z[ids[..., j]] - log sum_v exp z_v

    logits: (..., V), any float dtype; ids: (..., k) long. Returns (..., k). Equal to
    `logits.float().log_softmax(-1).gather(-1, ids)`, but forward and backward run a chunk of rows
    at a time (`chunk_size` rows; default ~4 MB of fp32), so no (..., V) fp32 copy or softmax is
    ever held: the only (..., V) tensor is the gradient, in the logits' dtype.
    """
    V, k = logits.shape[-1], ids.shape[-1]
    if ids.shape[:-1] != logits.shape[:-1]:
        raise ValueError(f"ids {tuple(ids.shape)} must match the logits {tuple(logits.shape)} in all but "
                         "the last dim; pass one row of token ids per logit row")
    out = _LogSoftmaxAt.apply(logits.reshape(-1, V), ids.reshape(-1, k), chunk_size)  # (N, k)
    return out.view(*ids.shape)


def topk_reverse_kl(student_logits: Tensor, teacher_topk_ids: Tensor, teacher_topk_logprobs: Tensor,
                    mask: Tensor, correction: bool = True, support: bool = False) -> tuple[Tensor, Info]:
    """MOPD-Top-k: reverse KL over the teacher's top-k tokens, bias-corrected (or, `support=True`,
    local support matching: both distributions renormalised over the set; see the end).

        per_token_t = sum_{v in TopK_T(t)} [ p_S(v) (log p_S(v) - log p_T(v)) - p_S(v) + p_T(v) ]
        L_topk      = masked_mean(per_token)

    p_S(v) is the student's full-vocabulary probability gathered at v (no renormalisation over
    the set). Each summand is a generalised KL term: >= 0, with derivative log(p_S(v) / p_T(v))
    in p_S(v), so the minimum is at p_S = p_T on the set. `correction=False` drops `- p_S + p_T`:
    that truncated sum is NOT minimised at p_S = p_T (the student lowers it by moving mass off
    the set).

    student_logits: (B, T, V), any float dtype. teacher_topk_ids: (B, T, k) long.
    teacher_topk_logprobs: (B, T, k), the teacher's full-vocabulary log-probs at those ids.
    mask: (B, T). info: `per_token`, `student_topk_mass` = sum_{v in TopK} p_S(v),
    `teacher_topk_mass` = sum_{v in TopK} p_T(v), all (B, T) at every position.

    Memory: `log_softmax_at`, a chunk of rows at a time: no (B, T, V) fp32 copy or softmax, in
    forward or backward; the one (B, T, V) tensor is the gradient, in the logits' dtype.

    Gradient (correction on), with z the student's logits, m_S = sum_{u in K} p_S(u) and
    m_T = sum_{u in K} p_T(u):

        dL_t / dz_v = p_S(v) log(p_S(v) / p_T(v)) [v in K]  -  p_S(v) sum_{u in K} p_S(u) log(p_S(u) / p_T(u))

    Every term carries a factor p_S on the set: where the student has moved its mass off the
    teacher's top-k (m_S -> 0: the student writes a token the teacher does not consider), the
    gradient goes to 0 with it and nothing pulls the student back.

    support=True, local support matching ("teacher top-K local support matching", arXiv
    2603.25562: a truncated reverse KL comparing the two distributions over the teacher-supported
    set): the student and the teacher renormalised over the teacher's top-k set K,
    q_S(v) = p_S(v) / m_S, q_T(v) = p_T(v) / m_T, and the reverse KL between them:

        per_token_t = sum_{v in K} q_S(v) log(q_S(v) / q_T(v))          (>= 0, 0 iff q_S = q_T)
        dL_t / dz_v = q_S(v) (log q_S(v) - log q_T(v) - per_token_t)  for v in K,   0 for v not in K

    (the reverse KL's gradient, on the renormalised pair). The direction is reverse, as the
    paper's. `correction` has no effect here: sum_{v in K} (q_T(v) - q_S(v)) = 1 - 1 = 0.
    Where the student is stuck OFF the set (m_S -> 0), the in-set gradient does not vanish
    (q_S is renormalised: the shape on K is still pulled to the teacher's, with an O(1) gradient),
    but the loss is blind to the mass outside K: it never raises m_S itself (the in-set gradient
    sums to 0). Where the stuck token y is IN the set (q_S(y) -> 1, q_T(y) -> 0) it vanishes as
    the reverse KL's does. info as above (the masses from the full-vocabulary p_S, no grad).
    """
    _check_logits(student_logits=student_logits)
    _check_shapes("pass top-k ids, top-k log-probs and mask for the (B, T) positions of the logits",
                  leading_dims=2, student_logits=student_logits, teacher_topk_ids=teacher_topk_ids,
                  teacher_topk_logprobs=teacher_topk_logprobs, mask=mask)
    _check_shapes("pass one log-prob per top-k id", teacher_topk_ids=teacher_topk_ids,
                  teacher_topk_logprobs=teacher_topk_logprobs)
    V, k = student_logits.shape[-1], teacher_topk_ids.shape[-1]
    if not 1 <= k <= V:
        raise ValueError(f"k must be between 1 and V = {V}, got k = {k}; take a top-k with k <= V")
    if support:
        return _support_kl(student_logits, teacher_topk_ids, teacher_topk_logprobs, mask)
    log_p_S = log_softmax_at(student_logits, teacher_topk_ids)   # (B, T, k) log p_S(v) = z_v - lse
    log_p_T = _upcast(teacher_topk_logprobs.detach())            # (B, T, k) log p_T(v), a constant
    p_S, p_T = log_p_S.exp(), log_p_T.exp()                      # (B, T, k)
    per_token = (p_S * (log_p_S - log_p_T)).sum(dim=-1)          # (B, T) sum_v p_S log(p_S / p_T)
    if correction:
        per_token = per_token + (p_T - p_S).sum(dim=-1)          # (B, T) ... - p_S(v) + p_T(v)
    return masked_mean(per_token, mask), {
        "per_token": per_token.detach(),
        "student_topk_mass": p_S.sum(dim=-1).detach(),
        "teacher_topk_mass": p_T.sum(dim=-1),
    }


def _support_kl(student_logits: Tensor, ids: Tensor, teacher_topk_logprobs: Tensor,
                mask: Tensor) -> tuple[Tensor, Info]:
    """topk_reverse_kl(support=True): the reverse KL of the pair renormalised over the set K."""
    z_K = _upcast(student_logits.gather(-1, ids))                          # (B, T, k) z_v, v in K
    log_q_S = z_K.log_softmax(dim=-1)                                      # (B, T, k) log q_S: no (B, T, V) temporary
    log_p_T = _upcast(teacher_topk_logprobs.detach())                      # (B, T, k)
    log_q_T = log_p_T.log_softmax(dim=-1)                                  # (B, T, k) log p_T - log m_T
    per_token = (log_q_S.exp() * (log_q_S - log_q_T)).sum(dim=-1)          # (B, T)
    with torch.no_grad():
        student_mass = log_softmax_at(student_logits, ids).exp().sum(dim=-1)  # (B, T) m_S, for logging
    return masked_mean(per_token, mask), {
        "per_token": per_token.detach(),
        "student_topk_mass": student_mass,
        "teacher_topk_mass": log_p_T.exp().sum(dim=-1),
    }


def _kl_rows(z_S: Tensor, z_T: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """For a chunk of logit rows (n, V): p_S, log(p_S / p_T) (n, V) and KL(p_S || p_T) (n,), in fp32."""
    log_p_S = torch.log_softmax(_upcast(z_S), dim=-1)               # (n, V)
    log_ratio = log_p_S - torch.log_softmax(_upcast(z_T), dim=-1)   # (n, V) log p_S(v) - log p_T(v)
    p_S = log_p_S.exp()                                             # (n, V)
    return p_S, log_ratio, (p_S * log_ratio).sum(dim=-1)            # KL = sum_v p_S(v) log(p_S/p_T)


class _ChunkedReverseKL(torch.autograd.Function):
    """Per-row KL(p_S || p_T) over (N, V) logits, a chunk of rows at a time, forward and backward.

    Forward saves only its inputs; backward recomputes each chunk. So at most one chunk's worth
    of fp32 (n, V) temporaries is alive at a time, instead of several (N, V) ones.
    """

    @staticmethod
    def forward(ctx, z_S: Tensor, z_T: Tensor, rows: Tensor, chunk_size: int) -> Tensor:
        """z_S, z_T: (N, V) logits; rows: (R,) the row indices to compute. Returns KL (N,), 0 off `rows`."""
        ctx.save_for_backward(z_S, z_T, rows)
        ctx.chunk_size = chunk_size
        kl = torch.zeros(len(z_S), dtype=_compute_dtype(z_S), device=z_S.device)   # (N,)
        for idx in rows.split(chunk_size):                                       # (n,) row indices
            kl[idx] = _kl_rows(z_S[idx], z_T[idx])[-1]                           # KL_t of these rows
        return kl

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_kl: Tensor) -> tuple[Tensor, None, None, None]:
        z_S, z_T, rows = ctx.saved_tensors
        grad = torch.zeros_like(z_S)                # (N, V) in the logits' dtype; rows not computed get 0
        for idx in rows.split(ctx.chunk_size):
            p_S, log_ratio, kl = _kl_rows(z_S[idx], z_T[idx])    # recompute rather than store
            # dKL_t / dz_S(v) = p_S(v) * (log p_S(v) - log p_T(v) - KL_t), times the upstream dL/dKL_t
            grad[idx] = (p_S * (log_ratio - kl[:, None]) * grad_kl[idx, None]).to(grad.dtype)
        return grad, None, None, None               # the teacher's logits are constants


def _chunked_kl(kl_fn, student_logits: Tensor, teacher_logits: Tensor, mask: Tensor,
                chunk_size: int | None, *args) -> tuple[Tensor, Info]:
    """Shared by reverse_kl, forward_kl and jsd_loss: check the shapes, run the chunked autograd
    Function `kl_fn` (with its extra `args`) over the masked-in positions only, aggregate with
    masked_mean."""
    _check_logits(student_logits=student_logits, teacher_logits=teacher_logits)
    _check_shapes("pass student and teacher logits over the same positions and vocabulary",
                  student_logits=student_logits, teacher_logits=teacher_logits)
    _check_shapes("pass a (B, T) mask for (B, T, V) logits", leading_dims=2,
                  student_logits=student_logits, mask=mask)
    B, T, V = student_logits.shape
    if chunk_size is None:
        chunk_size = max(1, CHUNK_ELEMENTS // V)
    rows = mask.reshape(B * T).nonzero().squeeze(1)          # (R,) flat positions of completion tokens
    kl = kl_fn.apply(student_logits.reshape(B * T, V), teacher_logits.reshape(B * T, V).detach(),
                     rows, chunk_size, *args).view(B, T)       # (B, T) KL_t, 0 outside the mask
    return masked_mean(kl, mask), {"kl": kl.detach()}


def reverse_kl(student_logits: Tensor, teacher_logits: Tensor, mask: Tensor,
               chunk_size: int | None = None) -> tuple[Tensor, Info]:
    """Exact full-vocabulary reverse KL, per token, averaged with masked_mean.

        KL_t = sum_v p_S(v) (log p_S(v) - log p_T(v)),     L_KL = masked_mean(KL)

    student_logits, teacher_logits: (B, T, V), any float dtype; mask: (B, T). Only masked-in
    positions are computed, `chunk_size` rows at a time (default: ~4 MB of fp32 per chunk), in
    the forward and again in the backward, so memory stays flat at V = 151,936. Gradient flows
    to student_logits only. info: `kl` (B, T), 0 at positions outside the mask.

    Gradient with respect to the student's logits z (per position, before the mean's weights):

        dKL_t / dz_v = p_S(v) (log p_S(v) - log p_T(v) - KL_t)

    Where the student is confidently wrong, p_S(y) -> 1 on a token y with p_T(y) -> 0: KL_t ~
    log(1 / p_T(y)) is large, yet every component vanishes (for v = y the bracket -> 0, for v != y
    the factor p_S(v) -> 0): the position that carries the KL gets almost no gradient (the student
    is stuck). The forward KL (forward_kl, loss "fkl") does not have this property.
    """
    return _chunked_kl(_ChunkedReverseKL, student_logits, teacher_logits, mask, chunk_size)


def cross_entropy(logits: Tensor, ids: Tensor, mask: Tensor) -> tuple[Tensor, Info]:
    """Cross-entropy of the given tokens (supervised fine-tuning), with the course's aggregation.

        nll_t = - log p(y_t | x, y_<t) = - (z_{y_t} - log sum_v exp z_v),    L_CE = masked_mean(nll)

    logits: (B, T, V) at the positions that predict ids, any float dtype; ids: (B, T) long, the
    target tokens (in RFT: a teacher's correct completion; in SFT on gold: the gold answer); mask: (B, T). The log-softmax works
    a chunk of rows at a time (log_softmax_at): no (B, T, V) fp32 copy. info: `nll` (B, T).
    """
    _check_logits(logits=logits)
    _check_shapes("pass (B, T) target ids and mask for (B, T, V) logits", leading_dims=2,
                  logits=logits, ids=ids, mask=mask)
    nll = -log_softmax_at(logits, ids[..., None])[..., 0]     # (B, T) -log p(y_t)
    return masked_mean(nll, mask), {"nll": nll.detach()}


def _forward_kl_rows(z_S: Tensor, z_T: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """For a chunk of logit rows (n, V): p_S, p_T (n, V) and KL(p_T || p_S) (n,), in fp32."""
    log_p_S = torch.log_softmax(_upcast(z_S), dim=-1)               # (n, V)
    log_p_T = torch.log_softmax(_upcast(z_T), dim=-1)               # (n, V)
    p_T = log_p_T.exp()                                             # (n, V)
    kl = torch.where(p_T > 0, p_T * (log_p_T - log_p_S), 0.0).sum(dim=-1)  # sum_v p_T log(p_T / p_S)
    return log_p_S.exp(), p_T, kl


class _ChunkedForwardKL(torch.autograd.Function):
    """Per-row KL(p_T || p_S) over (N, V) logits, a chunk of rows at a time, forward and backward
    (dKL_t / dz_S(v) = p_S(v) - p_T(v)): one chunk of fp32 (n, V) temporaries alive at a time."""

    @staticmethod
    def forward(ctx, z_S: Tensor, z_T: Tensor, rows: Tensor, chunk_size: int) -> Tensor:
        ctx.save_for_backward(z_S, z_T, rows)
        ctx.chunk_size = chunk_size
        kl = torch.zeros(len(z_S), dtype=_compute_dtype(z_S), device=z_S.device)   # (N,)
        for idx in rows.split(chunk_size):
            kl[idx] = _forward_kl_rows(z_S[idx], z_T[idx])[-1]
        return kl

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_kl: Tensor) -> tuple[Tensor, None, None, None]:
        z_S, z_T, rows = ctx.saved_tensors
        grad = torch.zeros_like(z_S)
        for idx in rows.split(ctx.chunk_size):
            p_S, p_T, _ = _forward_kl_rows(z_S[idx], z_T[idx])
            grad[idx] = ((p_S - p_T) * grad_kl[idx, None]).to(grad.dtype)
        return grad, None, None, None               # the teacher's logits are constants


def forward_kl(student_logits: Tensor, teacher_logits: Tensor, mask: Tensor,
               chunk_size: int | None = None) -> tuple[Tensor, Info]:
    """The FORWARD KL from the teacher's full distribution, per position (soft-label distillation offline,
    the cure "fkl" on-policy).

        KL_t = sum_v p_T(v) (log p_T(v) - log p_S(v)),     L_soft = masked_mean(KL)

    (= the cross-entropy of the student under the teacher's soft labels, minus the teacher's
    entropy, a constant). Unlike reverse_kl this is mass-covering: the student is pulled to put
    probability wherever the teacher does. Two uses of this one function: offline (soft-label
    distillation, `offline.py`), the positions are those of TEACHER samples; on-policy (MOPD's
    loss "fkl", `distill.mopd_objective`), the same KL at every position of the STUDENT's own
    rollout (DAgger-like: the student's prefixes, the teacher's full distribution as the label).
    student_logits, teacher_logits: (B, T, V); mask: (B, T). Chunked in forward and backward like
    reverse_kl. Gradient flows to student_logits only. info: `kl` (B, T).

    Gradient with respect to the student's logits z:

        dKL_t / dz_v = p_S(v) - p_T(v)

    Where the student is confidently wrong (p_S(y) -> 1, p_T(y) -> 0) it does not vanish: it is
    about +1 on y and -p_T(v) on the teacher's tokens, norm -> sqrt(1 + sum_v p_T(v)^2), sqrt(2)
    for a one-token teacher. It is bounded by sqrt(2) everywhere. The cost: mass-covering, and
    large where p_S gives the teacher's tokens almost nothing (the loss, not its gradient, grows
    as log(1 / p_S)).
    """
    return _chunked_kl(_ChunkedForwardKL, student_logits, teacher_logits, mask, chunk_size)


def _jsd_rows(z_S: Tensor, z_T: Tensor, beta: float, value: bool = True) -> tuple[Tensor, Tensor, Tensor | None]:
    """For a chunk of logit rows (n, V), 0 < beta < 1, in fp32: p_S (n, V), the reverse KL's bracket
    against the mixture, log(p_S / M) - KL(p_S || M) (n, V), and (`value`) JSD_beta (n,), with
    M = beta p_T + (1 - beta) p_S and JSD = sum_v [beta p_T log p_T + (1 - beta) p_S log p_S - M log M]
    (the two KLs to M, summed: their log M terms add up to M log M)."""
    log_p_S = torch.log_softmax(_upcast(z_S), dim=-1)                       # (n, V)
    p_S = log_p_S.exp()
    p_T = torch.softmax(_upcast(z_T), dim=-1)                               # (n, V)
    M = p_T.mul(beta).add_(p_S, alpha=1 - beta)                             # (n, V) the mixture
    s_ratio = torch.where(p_S > 0, log_p_S - M.log(), 0.0)                  # (n, V) log(p_S / M), 0 where p_S = 0
    kl_S = (p_S * s_ratio).sum(dim=-1, keepdim=True)                        # (n, 1) KL(p_S || M)
    jsd = None
    if value:
        xlogx = torch.special.xlogy                                          # x log x, 0 at x = 0
        jsd = (beta * xlogx(p_T, p_T).sum(-1) + (1 - beta) * (p_S * torch.where(p_S > 0, log_p_S, 0.0)).sum(-1)
               - xlogx(M, M).sum(-1))
    return p_S, s_ratio.sub_(kl_S), jsd


class _ChunkedJSD(torch.autograd.Function):
    """Per-row generalised JSD over (N, V) logits, a chunk of rows at a time, forward and backward
    (dJSD_t / dz_S(v) = (1 - beta) p_S(v) (log(p_S(v) / M(v)) - KL(p_S || M))): one chunk of fp32
    (n, V) temporaries alive at a time."""

    @staticmethod
    def forward(ctx, z_S: Tensor, z_T: Tensor, rows: Tensor, chunk_size: int, beta: float) -> Tensor:
        ctx.save_for_backward(z_S, z_T, rows)
        ctx.chunk_size, ctx.beta = chunk_size, beta
        jsd = torch.zeros(len(z_S), dtype=_compute_dtype(z_S), device=z_S.device)  # (N,)
        for idx in rows.split(chunk_size):
            jsd[idx] = _jsd_rows(z_S[idx], z_T[idx], beta)[-1]
        return jsd

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_jsd: Tensor) -> tuple[Tensor, None, None, None, None]:
        z_S, z_T, rows = ctx.saved_tensors
        beta = ctx.beta
        grad = torch.zeros_like(z_S)
        for idx in rows.split(ctx.chunk_size):
            p_S, bracket, _ = _jsd_rows(z_S[idx], z_T[idx], beta, value=False)   # recompute rather than store
            grad[idx] = (p_S.mul_(bracket).mul_((1 - beta) * grad_jsd[idx, None])).to(grad.dtype)
        return grad, None, None, None, None          # the teacher's logits are constants


def jsd_loss(student_logits: Tensor, teacher_logits: Tensor, mask: Tensor, beta: float = 0.5,
             chunk_size: int | None = None) -> tuple[Tensor, Info]:
    """Generalised Jensen-Shannon divergence (GKD, arXiv 2306.13649), per token, with masked_mean.

    The convention is TRL's GKDTrainer.generalized_jsd_loss (trl/trainer/gkd_trainer.py), checked
    against its code: the mixture puts beta on the TEACHER,

        M_t      = beta p_T + (1 - beta) p_S
        JSD_t    = beta KL(p_T || M_t) + (1 - beta) KL(p_S || M_t)          for 0 < beta < 1
        beta = 0 : KL(p_T || p_S), the forward KL (= forward_kl, loss "fkl")
        beta = 1 : KL(p_S || p_T), the reverse KL (= reverse_kl, loss "kl")

    (in TRL, beta = 0 is `F.kl_div(student_log_probs, teacher_log_probs, log_target=True)`, which is
    sum p_T (log p_T - log p_S).) The endpoints are special cases, as in TRL: the middle formula
    itself tends to 0 at both ends (M -> p_S as beta -> 0, M -> p_T as beta -> 1), so JSD_beta is
    not continuous in beta at 0 and 1; JSD_0.5 is the symmetric JSD, bounded by log 2. Aggregation
    is the course's masked_mean (TRL's "batchmean" is a plain mean over all tokens).

    Gradient with respect to the student's logits z (0 < beta < 1; the p_T terms' derivatives
    cancel against part of the p_S ones: dJSD_t / dp_S(v) = (1 - beta) log(p_S(v) / M(v))):

        dJSD_t / dz_v = (1 - beta) p_S(v) (log(p_S(v) / M(v)) - KL(p_S || M_t))

    the reverse KL's gradient, scaled by (1 - beta), against the mixture M instead of p_T. Where the
    student is confidently wrong (p_S(y) -> 1, p_T(y) -> 0): M(y) -> (1 - beta) stays away from 0, so
    log(p_S(y) / M(y)) -> -log(1 - beta) = KL(p_S || M) and the bracket on y goes to 0; on the
    teacher's tokens the factor p_S(v) does. So the gradient vanishes there too, like the reverse
    KL's (the stuck-gradient table in docs/benchmarks.md measures how fast); what JSD buys is a
    bounded loss and gradient, not an escape from the stuck case (the forward KL's endpoint is).

    student_logits, teacher_logits: (B, T, V), any float dtype; mask: (B, T); 0 <= beta <= 1.
    Chunked in forward and backward like reverse_kl (one chunk of fp32 (n, V) temporaries at a
    time). Gradient flows to student_logits only. info: `jsd` (B, T), 0 outside the mask.
    """
    if not 0 <= beta <= 1:
        raise ValueError(f"beta must be in [0, 1] (0: forward KL, 1: reverse KL), got {beta}")
    if beta == 0:
        loss, info = forward_kl(student_logits, teacher_logits, mask, chunk_size)
    elif beta == 1:
        loss, info = reverse_kl(student_logits, teacher_logits, mask, chunk_size)
    else:
        loss, info = _chunked_kl(_ChunkedJSD, student_logits, teacher_logits, mask, chunk_size, float(beta))
    return loss, {"jsd": info["kl"]}


def group_advantages(rewards: Tensor, eps: float = 1e-6) -> tuple[Tensor, Tensor]:
    """GRPO advantages: each reward normalised within its group of completions of one prompt.

        A_pg = (r_pg - mean_g r_p) / (std_g r_p + eps)      (population std)

    rewards: (P, G), P prompts x G completions each. Returns advantages (P, G) and keep (P,) bool:
    the groups whose rewards are not all equal. A zero-variance group carries no signal (every
    advantage is 0) and the trainer skips it; its advantages are returned as exactly 0.
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be (P, G) = (prompts, group size), got {tuple(rewards.shape)}; "
                         "reshape with rewards.view(P, G)")
    r = _upcast(rewards)                                   # (P, G)
    mean = r.mean(dim=1, keepdim=True)                     # (P, 1)
    std = r.std(dim=1, correction=0, keepdim=True)         # (P, 1) population std (unbiased=False)
    keep = (r != r[:, :1]).any(dim=1)                      # (P,) some reward differs: variance > 0
    A = (r - mean) / (std + eps)                           # (P, G)
    return torch.where(keep[:, None], A, 0.0), keep


# every public function above checks its annotated arguments when called from outside the package
# (mopd_mini.validate.guard_public); the package's own calls, e.g. the training loop's, skip the checks
from .validate import guard_public  # noqa: E402

guard_public(globals())

__getattr__ = deprecation.old_names(__name__, {"sft_loss": "mopd_mini.losses:cross_entropy"})  # renamed: one release
