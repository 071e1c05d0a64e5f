"""UCMOPD's two options for the MOPD trainer, as pure tensor functions (arXiv 2608.26735).

The options are `MOPDConfig.golden_gain` / `.endorsement` (config); `filters` applies both to one
step's batch, and the trainer (`distill.ucmopd_objective`) takes the loss on the tokens it keeps.
The study that compares UCMOPD with plain MOPD is the ablations' third (`ucmopd_study`, docs/ablations.md).
Nothing here knows about models. A_t is MOPD-PG's per-token advantage, log pi_T(y_t) - log pi_S(y_t)
(before the clip), M the (B, T) completion mask.

Golden-Gain Enhancement (which samples the student learns from):

    r(y)      = (1 / max(n_plus, 1)) * sum_{t: A_t > 0} A_t        n_plus = #{t : A_t > 0, M_t = 1}
    keep(y_e) = r(y_e) >= r(y_anchor)                               (the anchor is always kept)

    the positive-advantage density: how much, per token the teacher endorses more than the
    student, the sample has to teach (0 when no token has A_t > 0).

Teacher-Endorsement Filtering (which tokens the student learns from):

    cll_t = log p_T(y_t) + H[p_T(. | y_<t)]         centred log-likelihood (0 for a typical token)
    s_t   = exp(min(cll_t, 0))                       endorsement, in (0, 1]; 1 if at least typical
    w_t   = s_t if A_t > 0,  1 - s_t if A_t < 0,  1 if A_t = 0
    keep_t ~ Bernoulli(w_t), seeded                  (a mask on the loss, not a weight)

    A token the student should raise (A_t > 0) is learned from only as often as the teacher
    endorses it; a token it should lower (A_t < 0) only as often as the teacher does NOT: an
    untypical token that the teacher merely likes more than the student is mostly skipped, and a
    typical one that the student over-weights is pushed down less often.

How the trainer applies them (`filters`, whose docstring has the order): the
loss averages over the KEPT tokens (each row's mean over its kept tokens, `losses.masked_mean`),
where the paper's 1/T reads as the full length; and the mask also applies to MOPD-Top-k and the
exact KL, an extension beyond the paper.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .losses import CHUNK_ELEMENTS, _check_shapes
from . import config  # the options GoldenGain and Endorsement live with MOPDConfig in the torch-free config module

__getattr__ = config.old_paths(__name__, ("GoldenGain", "Endorsement"))  # their old path, one release


def positive_advantage_density(advantages: Tensor, mask: Tensor) -> Tensor:
    """r(y) = (1/max(n_plus, 1)) sum_{t: A_t > 0} A_t over the masked tokens. (B, T) -> (B,)."""
    _check_shapes("pass (B, T) advantages and a (B, T) mask", advantages=advantages, mask=mask)
    positive = (advantages > 0) & mask.bool()                                  # (B, T)
    total = torch.where(positive, advantages, 0.0).sum(1)                      # (B,)
    return total / positive.sum(1).clamp(min=1)


def golden_gain_keep(anchor_density: Tensor, explore_density: Tensor) -> Tensor:
    """Which exploration samples to keep: r(y_e) >= r(y_anchor) of the same prompt.

    anchor_density: (P,), one anchor per prompt; explore_density: (P, m). Returns (P, m) bool."""
    if anchor_density.dim() != 1 or explore_density.dim() != 2 or len(anchor_density) != len(explore_density):
        raise ValueError(f"anchor_density must be (P,) and explore_density (P, m) for the same P prompts; got "
                         f"{tuple(anchor_density.shape)} and {tuple(explore_density.shape)}")
    return explore_density >= anchor_density[:, None]


def entropy(logits: Tensor) -> Tensor:
    """H[softmax(logits)] per position, (..., V) -> (...), in fp32, a chunk of rows at a time
    (no (..., V) fp32 copy at Qwen3's vocabulary)."""
    V = logits.shape[-1]
    flat = logits.reshape(-1, V)
    out = torch.empty(len(flat), dtype=torch.promote_types(logits.dtype, torch.float32), device=logits.device)
    step = max(1, CHUNK_ELEMENTS // V)
    for i in range(0, len(flat), step):
        logp = flat[i:i + step].to(out.dtype).log_softmax(-1)                  # (n, V)
        out[i:i + step] = -(logp.exp() * logp).sum(-1)
    return out.view(logits.shape[:-1])


def endorsement_keep_prob(teacher_logprobs: Tensor, teacher_entropy: Tensor, advantages: Tensor) -> Tensor:
    """w_t: s_t = exp(min(log p_T(y_t) + H_t, 0)) where A_t > 0, 1 - s_t where A_t < 0, 1 where A_t = 0."""
    _check_shapes("pass (B, T) teacher log-probs, teacher entropies and advantages",
                  teacher_logprobs=teacher_logprobs, teacher_entropy=teacher_entropy, advantages=advantages)
    s = (teacher_logprobs + teacher_entropy).clamp(max=0).exp()               # (B, T) endorsement
    return torch.where(advantages > 0, s, torch.where(advantages < 0, 1 - s, torch.ones_like(s)))


def endorsement_mask(teacher_logprobs: Tensor, teacher_entropy: Tensor, advantages: Tensor, mask: Tensor,
                     generator: torch.Generator | None = None) -> tuple[Tensor, dict]:
    """The Bernoulli(w_t) keep-mask on the loss, (B, T) float, times `mask`. Seeded by `generator`
    (a CPU generator: the same draw on every device). info: `keep_prob` (B, T) w_t, `masked_fraction`
    (scalar), the share of the masked-in tokens that the filter drops."""
    _check_shapes("pass a (B, T) mask", advantages=advantages, mask=mask)
    w = endorsement_keep_prob(teacher_logprobs, teacher_entropy, advantages.detach())
    u = torch.rand(w.shape, generator=generator, device=generator.device if generator else w.device).to(w.device)
    M = mask.to(w.dtype)
    keep = (u < w).to(w.dtype) * M
    dropped = (M - keep).sum() / M.sum().clamp(min=1)
    return keep, {"keep_prob": w, "masked_fraction": dropped}


def filters(cfg: config.MOPDConfig, step: int, advantage: Tensor, mask: Tensor, domains: list[str], anchors: int,
            teacher_logprobs: Tensor, teacher_logits: Tensor | None, student_logprobs: Tensor,
            sample_logprobs: Tensor | None) -> tuple[Tensor, Tensor | None, dict]:
    """Both options of `cfg` applied to one step's batch: (the loss's keep-mask (B, T), MOPD-PG's
    per-token weight or None, the step's metrics gg_kept and tef_masked, overall and per domain).

    Rows [0, anchors) are the anchors, one per prompt; the rows after them are each prompt's
    `cfg.golden_gain.samples` exploration samples, prompt by prompt. `advantage` is A_t before the
    clip (the student's temperature-1 log-probs, not the sampler's). Golden-Gain keeps or drops whole
    rows (each row's density over all its completion tokens); with `importance_cap`, MOPD-PG weights an
    exploration row's tokens by the capped ratio pi_S / pi_sampler. Teacher-Endorsement then masks
    tokens of the rows kept, from a generator seeded by (cfg.seed, step, endorsement.seed): one stream
    per step, so a resumed run draws what the uninterrupted one did."""
    loss_mask, pg_weight, row = mask.clone(), None, {}
    if cfg.golden_gain is not None:
        m = cfg.golden_gain.samples
        density = positive_advantage_density(advantage, mask)                # (B,)
        keep = golden_gain_keep(density[:anchors], density[anchors:].view(anchors, m))  # (P, m)
        rows = torch.cat([torch.ones(anchors, dtype=torch.bool, device=keep.device), keep.reshape(-1)])
        loss_mask = loss_mask * rows[:, None]
        for d in dict.fromkeys(domains[:anchors]):
            of_d = torch.tensor([x == d for x in domains[:anchors]], device=keep.device)
            row[f"gg_kept/{d}"] = keep[of_d].float().mean().item()
        row["gg_kept"] = keep.float().mean().item()
        if cfg.golden_gain.importance_cap is not None and cfg.loss == "pg":
            ratio = (student_logprobs - sample_logprobs).exp().clamp(max=cfg.golden_gain.importance_cap)
            pg_weight = torch.where(torch.arange(len(mask), device=mask.device)[:, None] < anchors, 1.0, ratio)
    if cfg.endorsement is not None:
        generator = torch.Generator().manual_seed(
            (cfg.seed * 1_000_003 + step) * 1_009 + cfg.endorsement.seed)     # one stream per step: resumable
        before = loss_mask
        loss_mask, _ = endorsement_mask(teacher_logprobs, entropy(teacher_logits), advantage, before, generator)
        for d in dict.fromkeys(domains):
            of_d = torch.tensor([x == d for x in domains], device=mask.device)
            row[f"tef_masked/{d}"] = (1 - loss_mask[of_d].sum() / before[of_d].sum().clamp(min=1)).item()
        row["tef_masked"] = (1 - loss_mask.sum() / before.sum().clamp(min=1)).item()
    return loss_mask, pg_weight, row
