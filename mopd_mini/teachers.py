"""Routed teacher scoring: every completion is scored by ITS OWN domain's teacher.

The student sampled a completion y for a prompt x of domain d; the teacher of d prefills x + y
(one forward, no sampling) and returns, at each completion position t:

    logprobs       log pi_T(y_t | x, y_<t)            (B, C)      what MOPD-PG needs
    topk_ids       the teacher's k most likely tokens  (B, C, k)   what MOPD-Top-k needs
    topk_logprobs  their log-probs                     (B, C, k)
    logits         the full distribution               (B, C, V)   for the exact reverse KL

Teacher distributions are never averaged: routing picks exactly one teacher per sample.

Two ways to run the teachers, with identical results (a test checks this to 1e-5):
    "mixed"  ONE forward for the whole batch, each row through its own LoRA adapter
             (peft's mixed-adapter batches: `adapter_names=[...]`)
    "swap"   one forward per teacher over its rows, switching the active adapter between them
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .adapters import BASE, AdapterBank
from .rollout import Rollout, completion_logits

MODES = ("mixed", "swap")


@dataclass
class TeacherScores:
    """What the routed teachers said about one rollout."""

    logprobs: Tensor             # (B, C)    log pi_T(y_t)
    topk_ids: Tensor             # (B, C, k) teacher's top-k token ids
    topk_logprobs: Tensor        # (B, C, k) their log-probs under the teacher
    logits: Tensor | None = None  # (B, C, V) the full distribution (logits), when asked for


def route_names(bank: AdapterBank, rollout: Rollout, route: dict[str, str]) -> list[str]:
    """The teacher adapter of every row, from its domain tag; clear errors for gaps."""
    missing = sorted(set(rollout.domains) - set(route))
    if missing:
        raise ValueError(f"no teacher routed for domain(s) {missing}; route = {route}. "
                         "Give every domain in the batch a teacher adapter")
    for name in set(route.values()):
        bank.check(name)
    return [route[d] for d in rollout.domains]


def summarise(logits: Tensor, ids: Tensor, k: int, full: bool) -> TeacherScores:
    """Sampled-token log-probs and top-k from (B, C, V) logits, without a (B, C, V) log-softmax."""
    V = logits.shape[-1]
    if not 1 <= k <= V:
        raise ValueError(f"top-k k must be between 1 and the vocabulary size {V}, got {k}")
    lse = logits.float().logsumexp(-1, keepdim=True)                    # (B, C, 1)
    top_z, top_ids = logits.topk(k, dim=-1)                             # (B, C, k)
    sampled = logits.gather(-1, ids[..., None]).float() - lse           # (B, C, 1) log pi_T(y_t)
    return TeacherScores(sampled[..., 0], top_ids, top_z.float() - lse, logits if full else None)


@torch.no_grad()
def score(bank: AdapterBank, rollout: Rollout, route: dict[str, str], *, mode: str = "mixed",
          k: int = 64, full: bool = True) -> TeacherScores:
    """Score each completion with the teacher its domain is routed to (`route`: domain -> adapter)."""
    if mode not in MODES:
        raise ValueError(f"unknown scoring mode {mode!r}; valid modes: {MODES}")
    names = route_names(bank, rollout, route)
    was_training = bank.model.training
    bank.model.eval()  # teachers never run dropout; peft's mixed batches require eval mode
    try:
        if mode == "mixed":
            peft_names = ["__base__" if n == BASE else n for n in names]   # peft's name for "no adapter"
            logits = completion_logits(bank.model, rollout, adapter_names=peft_names)
        else:
            logits = None
            for teacher in dict.fromkeys(names):                        # each teacher once, in order
                rows = [i for i, n in enumerate(names) if n == teacher]
                with bank.use(teacher) as model:
                    part = completion_logits(model, rollout.rows(rows))  # (b, C, V)
                if logits is None:
                    logits = part.new_empty((len(names),) + part.shape[1:])
                logits[rows] = part
    finally:
        bank.model.train(was_training)
    return summarise(logits, rollout.completion_ids, k, full)
