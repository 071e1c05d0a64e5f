"""The routed teachers' outputs: every completion is prefilled by ITS OWN domain's teacher.

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

Two ways to run the teachers, with the same results (tests check this to 1e-5):
    "mixed"  ONE forward for the whole batch, each row through its own LoRA adapter: inside
             every LoRA layer,  y_b = W x_b + s_t B_t A_t x_b  with t the teacher of row b
             (the base matmul once for all rows; each teacher's low-rank update on its rows)
    "swap"   one forward per teacher over its rows, switching the active adapter between them

"mixed" is the default: it costs one base forward whatever the number of teachers
(docs/benchmarks.md measures it at about 1.0x scoring the whole batch with a single teacher).
On a base small enough (`FOLDED_LIMIT`: the tiny one, not Qwen3-1.7B) and in fp32 it keeps each teacher's
folded weights W + s_t B_t A_t beside the adapter and gives each teacher's rows one matmul with
them, so a routed teacher costs what a separate folded teacher model would (the same scores up to
fp32 rounding; the weights are rebuilt whenever a teacher's adapter changes).
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

from .config import SCORING_MODES as MODES  # noqa: E402  (one pass with per-row adapters, or one per teacher)
from . import deprecation  # noqa: E402

# the old names, one release ("merge" is combining adapters, mopd_mini.merge; one adapter into the base weights
# is a fold; "score" is grading an answer, factworld.score)
__getattr__ = deprecation.old_names(__name__, {"merged_weights": "mopd_mini.routing:folded_weights",
                                                "MERGED_LIMIT": "mopd_mini.routing:FOLDED_LIMIT",
                                                "score": "mopd_mini.routing:teacher_outputs",
                                                "TeacherScores": "mopd_mini.routing:TeacherOutputs"})


@dataclass
class TeacherOutputs:
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


def summarise(logits: Tensor, ids: Tensor, k: int, full: bool) -> TeacherOutputs:
    """Sampled-token log-probs and top-k from (B, C, V) logits, without a (B, C, V) log-softmax
    or fp32 copy: log_softmax_at works a chunk of rows at a time."""
    V = logits.shape[-1]
    if not 1 <= k <= V:
        raise ValueError(f"top-k k must be between 1 and the vocabulary size {V}, got {k}")
    top_ids = logits.topk(k, dim=-1).indices                            # (B, C, k)
    logp = log_softmax_at(logits, torch.cat([ids[..., None], top_ids], -1))  # (B, C, 1 + k), fp32
    return TeacherOutputs(logp[..., 0], top_ids, logp[..., 1:], logits if full else None)


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


def _routed_lora_forward(layer: LoraLayer, groups, folded: dict | None, x: Tensor, *args, **kwargs) -> Tensor:
    """One LoRA layer in a routed pass:  y_b = W x_b + s_t B_t A_t x_b,  t = the teacher of row b.
    Same arithmetic as peft's single-adapter forward (update in the adapter's dtype, added, then
    cast back), applied to each teacher's rows only. Teachers run without dropout.
    `folded` ({teacher: W + s_t B_t A_t} of this layer, when the bank is small enough to hold them:
    `folded_weights`): then each teacher's rows take one matmul with its folded weight, as a
    separate teacher model would, instead of the base matmul plus the two low-rank ones."""
    if folded is not None:
        bias = layer.base_layer.bias
        if len(groups) == 1:                                            # one teacher for the whole batch
            return nn.functional.linear(x, folded[groups[0][0]], bias)
        result = x.new_empty(x.shape[:-1] + (layer.base_layer.out_features,))
        for teacher, rows in groups:
            result[rows] = nn.functional.linear(x[rows], folded[teacher], bias)
        return result
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
    """The update can be added by one fused addmm: one dtype throughout, no bias, contiguous. Over a
    bf16 base, peft's fp32 adapters take the cast-and-add path; adapters held in the base's dtype
    (`AdapterBank.compact`, `MOPDConfig.compact_teachers`) take this one."""
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


FOLDED_LIMIT = 64 * 2**20
"""bytes: the routed pass holds each teacher's folded weights (W + s B A of every LoRA layer) when all
of them together fit in this; the tiny base's take 1.3 MB a teacher, Qwen3-1.7B's 2.8 GB (bf16), so
there the teachers stay low-rank updates on the one base (the point of holding them as adapters)"""


def _full_precision(weight: Tensor) -> bool:
    """Whether folded weights may stand in for W x + s B A x: fp32 or fp64 weights. A quantised base
    has no W + s B A to form; in bf16 or fp16, W + s B A rounded to that dtype loses the low bits of
    the update, and the teacher's log-probs then differ from the student's own forward through the
    same adapter (noise in MOPD's advantage: bench.bf16_floor)."""
    return weight.is_floating_point() and torch.finfo(weight.dtype).bits >= 32


def folded_weights(bank: AdapterBank, layers: list, teachers: list[str]) -> dict | None:
    """{layer index: {teacher: W + s B A}} for the routed pass, or None when the teachers' folded
    weights would not fit in FOLDED_LIMIT. Built once and kept on the bank; a layer's entry is
    rebuilt when its base weight or the teacher's A or B has changed since (their version counters:
    a load, a copy or an optimizer step on the teacher each bump them)."""
    if not teachers or any(t not in layer.lora_A for layer in layers for t in teachers):
        return None               # a teacher that skips a layer: the low-rank path handles it row by row
    if not all(_full_precision(layer.base_layer.weight) for layer in layers):
        return None               # a quantised base (packed weights), or one in bf16 / fp16 (see _full_precision)
    size = len(teachers) * sum(layer.base_layer.weight.numel() * layer.base_layer.weight.element_size()
                               for layer in layers)
    if size > FOLDED_LIMIT:
        return None
    cache = getattr(bank, "_folded", None)
    if cache is None:
        cache = bank._folded = {}     # {(layer, teacher): (the weights' versions, W + s B A)}
    out = {}
    for i, layer in enumerate(layers):
        W = layer.base_layer.weight
        for t in teachers:
            A, B = layer.lora_A[t].weight, layer.lora_B[t].weight
            key, stamp = (id(layer), t), tuple((p.data_ptr(), p._version) for p in (W, A, B))
            if key not in cache or cache[key][0] != stamp:
                with torch.no_grad():
                    update = (B.float() @ A.float()) * layer.scaling[t]
                    cache[key] = (stamp, (W.float() + update).to(W.dtype))
            out.setdefault(i, {})[t] = cache[key][1]
    return out


@contextmanager
def routed(bank: AdapterBank, names: list[str], device=None):
    """Inside: `bank.model` runs row b through adapter names[b] (BASE: none), in one forward.
    Yields False (and changes nothing) when an adapter is of a kind the routed pass does not cover."""
    layers = lora_layers(bank)
    teachers = set(names) - {BASE}
    if not _routable(layers, teachers):
        yield False
        return
    groups = row_groups(names, device)
    folded = folded_weights(bank, layers, sorted(teachers)) if BASE not in names else None
    for i, layer in enumerate(layers):
        layer.forward = partial(_routed_lora_forward, layer, groups,
                                None if folded is None else folded[i])   # an instance attribute...
    try:
        yield True
    finally:
        for layer in layers:
            del layer.forward                                            # ...removed: peft's forward again


@torch.no_grad()
def teacher_outputs(bank: AdapterBank, rollout: Rollout, route: dict[str, str], *, mode: str = "mixed",
                    k: int = 64, full: bool = True) -> TeacherOutputs:
    """What the teacher each completion's domain is routed to (`route`: domain -> adapter) says about it:
    its log-probs of the sampled tokens, its top-k and (`full`) its logits."""
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
        t = teacher_outputs(bank, rollout, {d: name for d in set(rollout.domains)}, k=1)
        _, info = reverse_kl(student_logits, t.logits, rollout.completion_mask)
        out[name] = (info["kl"].sum() / rollout.completion_mask.sum()).item()
    return out


# every public function (and class method) of this module: its annotated arguments checked at a call from outside
# the package (mopd_mini.validate.guard_public); the package's own calls, e.g. the training loop's, skip the checks
from .validate import guard_public  # noqa: E402

guard_public(globals())
