"""Is the student stuck? Pure functions over tensors: which tokens, and how much gradient they get.

Nothing here knows about models or tokenizers (like `losses`): inputs are the logits and log-probs
the trainer already holds. Notation as in `losses`: p_S the student, p_T the teacher a completion
was routed to, y_t the token the student sampled at position t, z the student's logits at t,
M the (B, T) completion mask.

  stuck_mask        the student's sampled tokens where it is confident and the teacher rejects it:
                    p_S(y_t) > p_min and log p_T(y_t) < teacher_logp_max
  stuck_metrics     one domain's stuck share (stuck tokens / completion tokens) and the gradient and KL
                    on its stuck tokens and on the rest: what the trainer logs every step
  grad_norms        || d loss_t / d z_t ||, per position, in closed form for each loss form
                    (GRAD_NORMS: kl, fkl, jsd, pg, topk, topk_support): no backward, a chunk
                    of rows at a time
  off_support_mass  the student's probability outside the teacher's top-k set

Why (docs/stuck.md): where the student puts nearly all its mass on a token y the teacher gives
almost none, the reverse KL at that position is about log(1 / p_T(y)), large, but its gradient
with respect to the student's logits,

    d KL_t / d z(v) = p_S(v) (log p_S(v) - log p_T(v) - KL_t),

goes to 0: for v = y the bracket goes to 0 (log p_S(y) - log p_T(y) -> KL_t), for v != y the
factor p_S(v) does. The position that carries most of the remaining KL gets almost none of the
gradient, so the student stays where it is. MOPD-PG's expected gradient is the reverse KL's
(and its sampled one, -A (onehot(y) - p_S), has norm |A| sqrt((1 - p_S(y))^2 + sum_{v != y} p_S(v)^2),
also -> 0); MOPD-Top-k's is carried by the student's mass on the teacher's top-k set, which
vanishes when the student has moved off that set.

The norms are per position, of the per-token term before the aggregation's weight: the
gradient the trainer's loss puts on z_t is `masked_mean`'s 1 / (B' L_b) times this one (and 0
where a UCMOPD filter drops the token).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

from .losses import CHUNK_ELEMENTS, _check_logits, _check_shapes, _upcast, log_softmax_at


def stuck_mask(student_logprobs: Tensor, teacher_logprobs: Tensor, mask: Tensor,
               p_min: float = 0.9, teacher_logp_max: float = -5.0) -> Tensor:
    """The student's sampled tokens where it is confidently wrong by the teacher's account.

        stuck_t = M_t  and  p_S(y_t) > p_min  and  log p_T(y_t) < teacher_logp_max

    (p_S(y_t) > p_min compared as log p_S(y_t) > log p_min: no exp). student_logprobs,
    teacher_logprobs: (B, T), the log-probs of the sampled tokens (temperature 1); mask: (B, T).
    Returns a (B, T) bool tensor, False outside the mask. Defaults (MOPDConfig.stuck_p,
    stuck_teacher_logp; argued in docs/stuck.md): the student above 0.9, the teacher below
    e^-5 = 0.67%.
    """
    _check_shapes("pass (B, T) log-probs of the sampled tokens and a (B, T) mask",
                  student_logprobs=student_logprobs, teacher_logprobs=teacher_logprobs, mask=mask)
    if not 0 <= p_min < 1:
        raise ValueError(f"p_min must be in [0, 1), got {p_min}")
    log_p_min = math.log(p_min) if p_min > 0 else -math.inf
    return (student_logprobs.detach() > log_p_min) & (teacher_logprobs.detach() < teacher_logp_max) & mask.bool()


def stuck_metrics(info: dict, idx, mask, d: str) -> dict:
    """One domain's stuck detector in a step's metrics (rows `idx` of the trainer's per-token tensors `info`,
    their completion mask (b, C)), pooled over its tokens:
    stuck_tokens (a count), stuck_share (stuck tokens / completion tokens), grad_stuck and grad_rest
    (the trained loss's mean per-position gradient norm on the stuck tokens and on the others),
    kl_grad_stuck and kl_grad_rest (the exact reverse KL's), kl_stuck and kl_rest (the exact reverse KL
    itself there: how much of it the stuck tokens carry). A mean over no token is None (null in
    metrics.jsonl, never NaN, which is not JSON): read it beside stuck_tokens."""
    M = mask.bool()
    stuck = info["stuck"][idx].bool() & M
    row = {f"stuck_tokens/{d}": int(stuck.sum().item()), f"stuck_share/{d}": masked_share(stuck, M)}
    for key, name in (("grad_norm", "grad"), ("kl_grad_norm", "kl_grad"), ("kl", "kl")):
        if key in info:
            row[f"{name}_stuck/{d}"] = mean_over(info[key][idx], stuck)
            row[f"{name}_rest/{d}"] = mean_over(info[key][idx], M & ~stuck)
    return row


# ---------------------------------------------------------------------------------------------
# per-position gradient norms, in closed form
# ---------------------------------------------------------------------------------------------


class Rows:
    """One chunk of masked-in positions (n rows), what every closed form reads: the student's
    log p_S and p_S (n, V), in fp32 (fp64 if given), and the row slices of the other inputs
    (`teacher_logits` (n, V), `ids` (n,), `advantage` (n,), `topk_ids` / `topk_logprobs` (n, k),
    `topk_correction`, `beta`). The teacher's log-softmax is computed on first use only."""

    def __init__(self, z_S: Tensor, inputs: dict):
        self.log_p_S = torch.log_softmax(_upcast(z_S), dim=-1)   # (n, V)
        self.p_S = self.log_p_S.exp()                             # (n, V)
        self.inputs = inputs
        self._log_p_T = None

    def need(self, name: str):
        if self.inputs.get(name) is None:
            raise ValueError(f"this gradient norm needs {name}=...; pass it to grad_norms")
        return self.inputs[name]

    @property
    def log_p_T(self) -> Tensor:
        if self._log_p_T is None:
            self._log_p_T = torch.log_softmax(_upcast(self.need("teacher_logits")), dim=-1)   # (n, V)
        return self._log_p_T


def _reverse_kl_norm(r: Rows) -> Tensor:
    """Exact reverse KL, KL_t = sum_v p_S(v) (log p_S(v) - log p_T(v)) (losses.reverse_kl):

        g(v) = p_S(v) (log p_S(v) - log p_T(v) - KL_t)

    Two tokens, p_S = (p, 1-p), p_T = (q, 1-q): ||g|| = sqrt(2) p (1-p) |log(p / (1-p)) - log(q / (1-q))|.
    With q = e^-17: 6.0 at p = 0.5, 0.30 at p = 0.99, 0.066 at p = 0.998: the factor p (1-p) goes to
    0 as p -> 1 far faster than the log grows, whatever the teacher says."""
    log_ratio = r.log_p_S - r.log_p_T                                    # (n, V)
    kl = (r.p_S * log_ratio).sum(dim=-1, keepdim=True)                   # (n, 1) KL_t
    return (r.p_S * (log_ratio - kl)).norm(dim=-1)


def _forward_kl_norm(r: Rows) -> Tensor:
    """Forward KL, KL(p_T || p_S) = sum_v p_T(v) (log p_T(v) - log p_S(v)) (losses.forward_kl):

        g(v) = p_S(v) - p_T(v)

    which stays near 1 - p_T(y) on a confidently wrong token y: it does not vanish."""
    return (r.p_S - r.log_p_T.exp()).norm(dim=-1)


def _jsd_norm(r: Rows) -> Tensor:
    """The generalised JSD of GKD (losses.jsd_loss), M = beta p_T + (1 - beta) p_S:

        g(v) = (1 - beta) p_S(v) (log(p_S(v) / M(v)) - KL(p_S || M))        0 < beta < 1

    and at the ends the forward KL's (beta = 0) and the reverse KL's (beta = 1) forms, as the loss.
    On a confidently wrong token y (p_S(y) -> 1, p_T(y) -> 0), M(y) -> 1 - beta, so the bracket on
    y goes to 0 and the other terms carry p_S(v) -> 0: the norm vanishes for every 0 < beta < 1,
    as the reverse KL's does (on tests/test_diagnostics.py's stuck categorical it stays below half
    the forward KL's and shrinks as p_S(y) grows), while its direction there is the forward KL's
    (08's summary)."""
    beta = float(r.need("beta"))
    if beta == 0.0:
        return _forward_kl_norm(r)
    if beta == 1.0:
        return _reverse_kl_norm(r)
    log_M = torch.logaddexp(r.log_p_T + math.log(beta), r.log_p_S + math.log(1 - beta))   # (n, V) log M
    log_ratio = r.log_p_S - log_M
    kl = (r.p_S * log_ratio).sum(dim=-1, keepdim=True)                   # (n, 1) KL(p_S || M)
    return (1 - beta) * (r.p_S * (log_ratio - kl)).norm(dim=-1)


def _pg_norm(r: Rows) -> Tensor:
    """MOPD-PG's per-token surrogate, -A_t log p_S(y_t) with A_t a constant (the clipped advantage
    the loss uses; losses.pg_loss):

        g(v) = -A_t ([v = y_t] - p_S(v)),   ||g|| = |A_t| sqrt((1 - p_S(y_t))^2 + sum_{v != y_t} p_S(v)^2)

    The sampled gradient, not its expectation: |A_t| is at most the clip c, and the root goes to 0 as
    p_S(y_t) -> 1."""
    ids, A = r.need("ids"), r.need("advantage")                          # (n,), (n,)
    d = r.p_S.clone()                                                    # (n, V) p_S - onehot(y)
    d.scatter_add_(-1, ids[:, None], torch.full_like(d[:, :1], -1.0))
    return _upcast(A).abs() * d.norm(dim=-1)


def _topk_norm(r: Rows) -> Tensor:
    """MOPD-Top-k's per-position term (losses.topk_reverse_kl), K the teacher's top-k set:

        l_t = sum_{v in K} [ p_S(v) (log p_S(v) - log p_T(v)) - p_S(v) + p_T(v) ]     (correction)
        l_t = sum_{v in K}   p_S(v) (log p_S(v) - log p_T(v))                         (without)

    With f(v) = d l_t / d p_S(v) = log p_S(v) - log p_T(v) (+ 1 without the correction) and
    d p_S(v) / d z(u) = p_S(v) ([u = v] - p_S(u)):

        g(u) = [u in K] p_S(u) f(u) - p_S(u) S,    S = sum_{v in K} p_S(v) f(v)

    Every term carries a p_S on the set, or S (a sum over the set): when the student's mass on K
    goes to 0 (it sits off the teacher's support), so does the gradient."""
    ids, log_p_T = r.need("topk_ids"), _upcast(r.need("topk_logprobs"))  # (n, k)
    log_p = r.log_p_S.gather(-1, ids)                                    # (n, k) log p_S(v), v in K
    p = log_p.exp()
    f = log_p - log_p_T + (0.0 if r.inputs.get("topk_correction", True) else 1.0)
    S = (p * f).sum(dim=-1, keepdim=True)                                # (n, 1)
    g = -r.p_S * S                                                       # (n, V)
    g.scatter_add_(-1, ids, p * f)
    return g.norm(dim=-1)


def _topk_support_norm(r: Rows) -> Tensor:
    """Local support matching (losses.topk_reverse_kl(support=True)): the reverse KL of the pair
    renormalised over the teacher's top-k set K, q_S = p_S / m_S and q_T = p_T / m_T on K:

        g(u) = q_S(u) (log q_S(u) - log q_T(u) - l_t)   for u in K,   0 for u not in K

    q_S depends on the logits in K only (a softmax over K), so the norm does not shrink as the
    student's mass m_S on K goes to 0 (the difference from plain Top-k, `_topk_norm`); it vanishes
    where the stuck token is in K with q_S -> 1 and q_T -> 0, as the reverse KL's does."""
    ids = r.need("topk_ids")                                             # (n, k)
    log_q_S = r.log_p_S.gather(-1, ids).log_softmax(dim=-1)              # (n, k) the student over K
    log_q_T = _upcast(r.need("topk_logprobs")).log_softmax(dim=-1)       # (n, k) the teacher over K
    q_S = log_q_S.exp()
    l = (q_S * (log_q_S - log_q_T)).sum(dim=-1, keepdim=True)            # (n, 1)
    return (q_S * (log_q_S - log_q_T - l)).norm(dim=-1)


@dataclass(frozen=True)
class GradNorm:
    """A loss form's closed-form per-position gradient norm: `fn(rows) -> (n,)` and what it needs."""

    fn: Callable[[Rows], Tensor]
    needs: tuple[str, ...]


GRAD_NORMS: dict[str, GradNorm] = {
    "kl": GradNorm(_reverse_kl_norm, ("teacher_logits",)),
    "fkl": GradNorm(_forward_kl_norm, ("teacher_logits",)),
    "jsd": GradNorm(_jsd_norm, ("teacher_logits",)),
    "pg": GradNorm(_pg_norm, ("ids", "advantage")),
    "topk": GradNorm(_topk_norm, ("topk_ids", "topk_logprobs")),
    "topk_support": GradNorm(_topk_support_norm, ("topk_ids", "topk_logprobs")),
}
"""loss form -> its closed form (the names of MOPDConfig.loss, and `topk_support` for loss "topk"
with topk_support=True: `form_of`; fkl: losses.forward_kl's forward KL; jsd reads `beta`). A new
loss adds an entry: a function of one chunk of `Rows` and the inputs it reads."""


def form_of(loss: str, topk_support: bool = False) -> str:
    """The GRAD_NORMS form a trainer's loss trains: its name, or "topk_support" for Top-k with
    local support matching (another loss under the same MOPDConfig.loss)."""
    return "topk_support" if loss == "topk" and topk_support else loss


@torch.no_grad()
def grad_norms(forms, student_logits: Tensor, mask: Tensor, *, teacher_logits: Tensor | None = None,
               ids: Tensor | None = None, advantage: Tensor | None = None, topk_ids: Tensor | None = None,
               topk_logprobs: Tensor | None = None, topk_correction: bool = True, beta: float = 0.5,
               chunk_size: int | None = None) -> dict[str, Tensor]:
    """|| d l_t / d z_t ||_2 at every masked-in position, for each loss form in `forms` (GRAD_NORMS).

    student_logits: (B, T, V), any float dtype (no gradient is taken); mask: (B, T). The inputs
    each form reads: teacher_logits (B, T, V) (kl, fkl); ids (B, T) the sampled tokens and advantage
    (B, T) (pg); topk_ids, topk_logprobs (B, T, k) and topk_correction (topk, topk_support); beta
    (jsd, 0 <= beta <= 1). Returns
    {form: (B, T)} in fp32 (fp64 for fp64 logits), 0 outside the mask.

    Memory: only masked-in rows, `chunk_size` at a time (default ~4 MB of fp32, as losses.reverse_kl):
    the (n, V) temporaries of one chunk (log p_S, p_S, log p_T, one gradient), never a (B, T, V)
    fp32 tensor. The student's log-softmax is computed once per chunk for all the forms.
    """
    forms = list(dict.fromkeys(forms))
    unknown = [f for f in forms if f not in GRAD_NORMS]
    if unknown:
        raise ValueError(f"no closed-form gradient norm for {unknown}; known: {list(GRAD_NORMS)}")
    _check_logits(student_logits=student_logits)
    _check_shapes("pass a (B, T) mask for (B, T, V) logits", leading_dims=2, student_logits=student_logits, mask=mask)
    if "jsd" in forms and not 0 <= beta <= 1:
        raise ValueError(f"beta must be in [0, 1] (0: forward KL, 1: reverse KL), got {beta}")
    B, T, V = student_logits.shape
    given = {"teacher_logits": teacher_logits, "ids": ids, "advantage": advantage, "topk_ids": topk_ids,
             "topk_logprobs": topk_logprobs}
    for f in forms:
        for name in GRAD_NORMS[f].needs:
            if given[name] is None:
                raise ValueError(f"the {f!r} gradient norm needs {name}=...")
            _check_shapes(f"pass {name} for the (B, T) positions of the logits", leading_dims=2,
                          student_logits=student_logits, **{name: given[name]})
    flat = {k: None if v is None else v.detach().reshape(B * T, *v.shape[2:]) for k, v in given.items()}
    z = student_logits.detach().reshape(B * T, V)
    dtype = _upcast(z[:0]).dtype
    out = {f: torch.zeros(B * T, dtype=dtype, device=z.device) for f in forms}
    rows = mask.reshape(B * T).nonzero().squeeze(1)                    # (R,) flat completion positions
    for idx in rows.split(chunk_size or max(1, CHUNK_ELEMENTS // V)):
        r = Rows(z[idx], {**{k: None if v is None else v[idx] for k, v in flat.items()},
                          "topk_correction": topk_correction, "beta": beta})
        for f in forms:
            out[f][idx] = GRAD_NORMS[f].fn(r)
    return {f: v.view(B, T) for f, v in out.items()}


@torch.no_grad()
def off_support_mass(student_logits: Tensor, teacher_topk_ids: Tensor) -> Tensor:
    """The student's probability outside the teacher's top-k set K, per position:

        off_t = 1 - sum_{v in K} p_S(v)          (= 1 - topk_reverse_kl's `student_topk_mass`)

    student_logits: (B, T, V); teacher_topk_ids: (B, T, k). Returns (B, T) in fp32, clamped at 0
    (rounding). Near 1, MOPD-Top-k's gradient is near 0 (see `_topk_norm`). A chunked log-softmax
    (losses.log_softmax_at): no (B, T, V) fp32 copy. The trainer takes it from the Top-k info it
    already has; this is the same quantity for callers without it.
    """
    return (1 - log_softmax_at(student_logits.detach(), teacher_topk_ids).exp().sum(dim=-1)).clamp(min=0)


def masked_share(flags: Tensor, mask: Tensor) -> float:
    """The share of masked-in tokens whose flag is set, pooled over the batch (0 if none)."""
    m = mask.bool()
    return (flags.bool() & m).sum().item() / max(int(m.sum().item()), 1)


def mean_over(x: Tensor, where: Tensor) -> float | None:
    """x's mean over the positions where `where` holds (pooled), or None when there are none:
    None, not NaN, so a metrics row stays valid JSON (null)."""
    w = where.bool()
    return x[w].mean().item() if w.any() else None
