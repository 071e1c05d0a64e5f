"""Routed teacher scoring: every completion is scored by ITS OWN domain's teacher.

The student sampled a completion y for a prompt x of domain d; the teacher of d prefills x + y
(one forward, no sampling) and returns, at each completion position t:

    logprobs       log pi_T(y_t | x, y_<t)            (B, C)      what MOPD-PG needs
    topk_ids       the teacher's k most likely tokens  (B, C, k)   what MOPD-Top-k needs
    topk_logprobs  their log-probs                     (B, C, k)
    logits         the full distribution               (B, C, V)   for the exact reverse KL

Teacher distributions are never averaged: routing picks exactly one teacher per sample.

A route may also name a FOREIGN teacher (`bank.add_foreign`: a separate model, its own base plus
its own adapter, same tokenizer): its rows are prefilled by that model, the others as below, and
the scores are the same tensors, so the losses and the logging do not know the difference.

Two ways to run the teachers, with identical results (a test checks this to 1e-5):
    "mixed"  ONE forward for the whole batch, each row through its own LoRA adapter: inside
             every LoRA layer,  y_b = W x_b + s_t B_t A_t x_b  with t the teacher of row b
             (the base matmul once for all rows; each teacher's low-rank update on its rows)
    "swap"   one forward per teacher over its rows, switching the active adapter between them

"mixed" is the default: it costs one base forward whatever the number of teachers
(docs/benchmarks.md measures it at about 1.0x scoring the whole batch with a single teacher).
Each teacher's rows are a slice of the batch when they are contiguous (train_student lists its
prompts domain by domain), so no activation is copied. Adapters that the routed pass does not
cover (DoRA, LoRA on embeddings or convolutions) fall back to peft's own mixed-adapter batches
(`adapter_names=[...]`), which gather and scatter the rows in every layer.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

import torch
from peft.tuners.lora import LoraLayer
from torch import Tensor, nn

from .adapters import BASE, AdapterBank
from .losses import log_softmax_at, reverse_kl
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
        if name not in bank.foreign:
            bank.check(name)
    return [route[d] for d in rollout.domains]


def summarise(logits: Tensor, ids: Tensor, k: int, full: bool) -> TeacherScores:
    """Sampled-token log-probs and top-k from (B, C, V) logits, without a (B, C, V) log-softmax
    or fp32 copy: log_softmax_at works a chunk of rows at a time."""
    V = logits.shape[-1]
    if not 1 <= k <= V:
        raise ValueError(f"top-k k must be between 1 and the vocabulary size {V}, got {k}")
    top_ids = logits.topk(k, dim=-1).indices                            # (B, C, k)
    logp = log_softmax_at(logits, torch.cat([ids[..., None], top_ids], -1))  # (B, C, 1 + k), fp32
    return TeacherScores(logp[..., 0], top_ids, logp[..., 1:], logits if full else None)


# ---------------------------------------------------------------------------------------------
# the routed pass: one forward, every row through its own teacher's LoRA update
# ---------------------------------------------------------------------------------------------


def row_groups(names: list[str], device=None) -> list[tuple[str, slice | Tensor]]:
    """(teacher, rows) for every teacher in `names` (BASE rows get no update): a slice when the
    teacher's rows are contiguous, else a (b,) index tensor."""
    groups = []
    for teacher in dict.fromkeys(names):
        rows = [i for i, n in enumerate(names) if n == teacher]
        if teacher != BASE:
            contiguous = rows[-1] - rows[0] + 1 == len(rows)
            groups.append((teacher, slice(rows[0], rows[-1] + 1) if contiguous
                           else torch.tensor(rows, device=device)))
    return groups


def _routed_lora_forward(layer: LoraLayer, groups, x: Tensor, *args, **kwargs) -> Tensor:
    """One LoRA layer in a routed pass:  y_b = W x_b + s_t B_t A_t x_b,  t = the teacher of row b.
    Same arithmetic as peft's single-adapter forward (update in the adapter's dtype, added, then
    cast back), applied to each teacher's rows only. Teachers run without dropout."""
    result = layer.base_layer(x, *args, **kwargs)                       # (B, T, out) W x, all rows
    for teacher, rows in groups:
        if teacher not in layer.lora_A:
            continue                                                    # this teacher skips this layer
        A, B, s = layer.lora_A[teacher], layer.lora_B[teacher], layer.scaling[teacher]
        if isinstance(rows, slice) and _fusable(result, x, B):         # one kernel, in place:
            y = result[rows].view(-1, result.shape[-1])                 # (b T, out) a view of the rows
            y.addmm_(A(x[rows]).flatten(0, -2), B.weight.T, alpha=s)    # W x + s B (A x)
        elif isinstance(rows, slice):                                   # a view: nothing copied
            result[rows] += B(A(x[rows].to(A.weight.dtype))) * s          # W x + s B A x
        else:
            y_t = result.index_select(0, rows) + B(A(x.index_select(0, rows).to(A.weight.dtype))) * s
            result.index_copy_(0, rows, y_t.to(result.dtype))
    return result


def _fusable(result: Tensor, x: Tensor, B: nn.Linear) -> bool:
    """The update can be added by one fused addmm: one dtype throughout, no bias, contiguous."""
    return (B.bias is None and result.is_contiguous() and result.dim() >= 2
            and result.dtype == x.dtype == B.weight.dtype)


def _routable(layers: list, teachers: set[str]) -> bool:
    """True when every LoRA layer holds the teachers as plain, unmerged linear LoRA (what the
    routed pass computes) and nothing else has replaced its forward."""
    for layer in layers:
        if "forward" in vars(layer) or layer.merged or not isinstance(layer.base_layer, nn.Linear):
            return False
        for t in teachers:
            if t in layer.lora_variant or layer.use_dora.get(t) or any(
                    t in getattr(layer, d, {}) for d in ("lora_embedding_A", "lora_magnitude_vector")):
                return False
            if t in layer.lora_A and not isinstance(layer.lora_A[t], nn.Linear):
                return False
    return True


def lora_layers(bank: AdapterBank) -> list:
    """The model's LoRA layers, found once per set of adapters (a walk over every module costs about
    1% of a tiny MOPD step; the layers change only when an adapter is added or removed)."""
    key = (id(bank.model), tuple(bank.names))
    cached = getattr(bank, "_lora_layers", None)
    if cached is None or cached[0] != key:
        cached = bank._lora_layers = (key, [m for m in bank.model.modules() if isinstance(m, LoraLayer)])
    return cached[1]


@contextmanager
def routed(bank: AdapterBank, names: list[str], device=None):
    """Inside: `bank.model` runs row b through adapter names[b] (BASE: none), in one forward.
    Yields False (and changes nothing) when an adapter is of a kind the routed pass does not cover."""
    layers = lora_layers(bank)
    if not _routable(layers, set(names) - {BASE}):
        yield False
        return
    groups = row_groups(names, device)
    for layer in layers:
        layer.forward = partial(_routed_lora_forward, layer, groups)     # an instance attribute...
    try:
        yield True
    finally:
        for layer in layers:
            del layer.forward                                            # ...removed: peft's forward again


@torch.no_grad()
def score(bank: AdapterBank, rollout: Rollout, route: dict[str, str], *, mode: str = "mixed",
          k: int = 64, full: bool = True) -> TeacherScores:
    """Score each completion with the teacher its domain is routed to (`route`: domain -> adapter)."""
    if mode not in MODES:
        raise ValueError(f"unknown scoring mode {mode!r}; valid modes: {MODES}")
    names = route_names(bank, rollout, route)
    foreign = [i for i, n in enumerate(names) if n in bank.foreign]
    if foreign:  # some rows go to separate models: score the bank's rows and each model's apart
        logits = None
        own = [i for i, n in enumerate(names) if n not in bank.foreign]
        parts = [(own, None)] if own else []
        parts += [([i for i in foreign if names[i] == n], n) for n in dict.fromkeys(names[i] for i in foreign)]
        for rows, name in parts:
            sub = rollout.rows(rows)
            if name is None:
                part = _bank_logits(bank, sub, [names[i] for i in rows], mode)
            else:
                teacher = bank.foreign[name]
                part = _bank_logits(teacher.bank, sub, [teacher.adapter] * len(rows), mode)
            if logits is None:
                logits = part.new_empty((len(names),) + part.shape[1:])
            logits[rows] = part
        return summarise(logits, rollout.completion_ids, k, full)
    return summarise(_bank_logits(bank, rollout, names, mode), rollout.completion_ids, k, full)


def _bank_logits(bank: AdapterBank, rollout: Rollout, names: list[str], mode: str):
    """(B, C, V) logits of every row through the bank's adapter names[b] (BASE: none)."""
    was_training = bank.model.training
    if was_training:
        bank.model.eval()  # teachers never run dropout; peft's mixed batches require eval mode
    try:
        if mode == "mixed":
            with routed(bank, names, rollout.input_ids.device) as ok:
                logits = completion_logits(bank.model, rollout) if ok else None
            if logits is None:  # an adapter kind the routed pass does not cover: peft's mixed batches
                peft_names = ["__base__" if n == BASE else n for n in names]   # peft's "no adapter"
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
        if was_training:
            bank.model.train()
    return logits


@torch.no_grad()
def kl_on_samples(bank: AdapterBank, rollout: Rollout, student: str, teachers: list[str]) -> dict[str, float]:
    """The exact per-token reverse KL(student || teacher), token mean over the rollout's completion
    tokens, for each teacher (an adapter, BASE or a foreign teacher) on the SAME samples: how far
    apart two teachers start from one student (the same-origin ablation's first number)."""
    with bank.use(student) as model:
        student_logits = completion_logits(model, rollout)                   # (B, C, V)
    out = {}
    for name in teachers:
        t = score(bank, rollout, {d: name for d in set(rollout.domains)}, k=1)
        _, info = reverse_kl(student_logits, t.logits, rollout.completion_mask)
        out[name] = (info["kl"].sum() / rollout.completion_mask.sum()).item()
    return out
