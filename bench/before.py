"""The library's code as it was before the speed changes (commit 82625b4), kept here only so that
every change can be measured before/after, side by side, in the same run.

    with library_before():      # mopd_mini runs its old code paths inside this block
        ...

Each function below is the old body (argument checks trimmed); `library_before` swaps them into
the modules that look them up, and restores the new ones on exit. Nothing in mopd_mini uses this.
"""

from __future__ import annotations

import dataclasses
from contextlib import ExitStack, contextmanager
from unittest import mock

import torch

from mopd_mini import distill, grpo, losses, teachers
from mopd_mini import rollout as rollout_module
from mopd_mini.adapters import BASE
from mopd_mini.losses import _check_logits, _check_shapes, _upcast, masked_mean
from mopd_mini.rollout import chat_prompt, eos_ids, position_ids
from mopd_mini.teachers import TeacherScores, route_names

COMMIT = "82625b4"
CHUNK_ELEMENTS = 1 << 24  # reverse_kl's chunk then: 64 MB of fp32 (now 4 MB)


def encode_prompts(model, tokenizer, prompts, max_new_tokens):
    """Before: one tokenizer call per prompt, `tokenizer.unk_token_id` looked up per token."""
    if not prompts:
        raise ValueError("no prompts to sample from: pass at least one example")
    rows = []
    for p in prompts:
        text = chat_prompt(tokenizer, p)
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        unknown = [text[a:b] for i, (a, b) in zip(enc["input_ids"], enc["offset_mapping"])
                   if i == tokenizer.unk_token_id]
        if unknown:
            raise ValueError(f"unknown words {unknown[:5]}")
        rows.append(enc["input_ids"])
    longest = max(map(len, rows))
    pad = tokenizer.pad_token_id
    ids = torch.tensor([[pad] * (longest - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (longest - len(r)) + [1] * len(r) for r in rows])
    return ids, mask


@torch.no_grad()
def sample(model, tokenizer, examples, *, temperature=1.0, greedy=False, max_new_tokens=8, generator=None,
           **forward_kwargs):
    """Before: every row prefilled, also the G copies of a GRPO prompt; `logits_to_keep=1` on the
    prefill (a non-contiguous (B, 1, H) slice, for which torch's matmul copies the (H, V) LM head
    once per row); and the old encode_prompts."""
    device = next(model.parameters()).device
    prompt_ids, prompt_mask = encode_prompts(model, tokenizer, [e.prompt for e in examples], max_new_tokens)
    ids, mask = prompt_ids.to(device), prompt_mask.to(device)
    stop = torch.tensor(eos_ids(model, tokenizer), device=device)
    done = torch.zeros(len(ids), dtype=torch.bool, device=device)
    tokens, logps, alive_steps = [], [], []
    cache, step_ids, step_pos = None, ids, position_ids(mask)
    for _ in range(max_new_tokens):
        out = model(input_ids=step_ids, attention_mask=mask, position_ids=step_pos, cache=cache,
                    use_cache=True, logits_to_keep=1, **forward_kwargs)
        cache = out.cache
        logp = torch.log_softmax(out.logits[:, -1].float() / (1.0 if greedy else temperature), -1)
        y = logp.argmax(-1) if greedy else torch.multinomial(logp.exp(), 1, generator=generator)[:, 0]
        alive = ~done
        y = torch.where(alive, y, tokenizer.pad_token_id)
        tokens.append(y), logps.append(logp.gather(1, y[:, None])[:, 0]), alive_steps.append(alive)
        mask = torch.cat([mask, alive.long()[:, None]], 1)
        done |= torch.isin(y, stop)
        step_ids, step_pos = y[:, None], step_pos[:, -1:] + 1
        if done.all():
            break
    completion_mask = torch.stack(alive_steps, 1).float()
    kwargs = dict(input_ids=torch.cat([ids, torch.stack(tokens, 1)], 1), attention_mask=mask,
                  completion_mask=completion_mask, prompt_len=ids.shape[1], examples=list(examples),
                  sample_logprobs=torch.stack(logps, 1) * completion_mask)
    if "ended" in {f.name for f in dataclasses.fields(rollout_module.Rollout)}:
        kwargs["ended"] = done
    return rollout_module.Rollout(**kwargs)


def completion_logits(model, rollout, **forward_kwargs):
    """Before: the LM head on C + 1 positions, then a slice (a non-contiguous (B, C, V) view)."""
    C = rollout.completion_mask.shape[1]
    out = model(input_ids=rollout.input_ids, attention_mask=rollout.attention_mask,
                position_ids=position_ids(rollout.attention_mask), logits_to_keep=C + 1, **forward_kwargs)
    return out.logits[:, :-1]


def token_logprobs(logits, ids):
    """Before: a (B, C, V) fp32 copy for the log-sum-exp (kept for backward)."""
    lse = logits.float().logsumexp(-1)
    return logits.gather(-1, ids[..., None]).squeeze(-1).float() - lse


def summarise(logits, ids, k, full):
    """Before: a (B, C, V) fp32 copy for the log-sum-exp."""
    lse = logits.float().logsumexp(-1, keepdim=True)
    top_z, top_ids = logits.topk(k, dim=-1)
    sampled = logits.gather(-1, ids[..., None]).float() - lse
    return TeacherScores(sampled[..., 0], top_ids, top_z.float() - lse, logits if full else None)


@torch.no_grad()
def score(bank, rollout, route, *, mode="mixed", k=64, full=True):
    """Before: "mixed" = peft's mixed-adapter batch (rows gathered and scattered in every LoRA
    layer); eval()/train() toggled over every module on every call."""
    names = route_names(bank, rollout, route)
    was_training = bank.model.training
    bank.model.eval()
    try:
        if mode == "mixed":
            peft_names = ["__base__" if n == BASE else n for n in names]
            logits = completion_logits(bank.model, rollout, adapter_names=peft_names)
        else:
            logits = None
            for teacher in dict.fromkeys(names):
                rows = [i for i, n in enumerate(names) if n == teacher]
                with bank.use(teacher) as model:
                    part = completion_logits(model, rollout.rows(rows))
                if logits is None:
                    logits = part.new_empty((len(names),) + part.shape[1:])
                logits[rows] = part
    finally:
        bank.model.train(was_training)
    return summarise(logits, rollout.completion_ids, k, full)


def topk_reverse_kl(student_logits, teacher_topk_ids, teacher_topk_logprobs, mask, correction=True):
    """Before: a (B, T, V) fp32 upcast and autograd's log-sum-exp (a (B, T, V) softmax in backward)."""
    _check_logits(student_logits=student_logits)
    _check_shapes("", leading_dims=2, student_logits=student_logits, teacher_topk_ids=teacher_topk_ids,
                  teacher_topk_logprobs=teacher_topk_logprobs, mask=mask)
    z = _upcast(student_logits)
    lse = z.logsumexp(dim=-1, keepdim=True)
    log_p_S = z.gather(-1, teacher_topk_ids) - lse
    log_p_T = _upcast(teacher_topk_logprobs.detach())
    p_S, p_T = log_p_S.exp(), log_p_T.exp()
    per_token = (p_S * (log_p_S - log_p_T)).sum(dim=-1)
    if correction:
        per_token = per_token + (p_T - p_S).sum(dim=-1)
    return masked_mean(per_token, mask), {"per_token": per_token.detach(),
                                          "student_topk_mass": p_S.sum(dim=-1).detach(),
                                          "teacher_topk_mass": p_T.sum(dim=-1)}


# every place the library looks these names up
PATCHES = {
    "encode_prompts": [(rollout_module, "encode_prompts")],
    "sample": [(rollout_module, "sample"), (distill, "sample"), (grpo, "sample")],
    "completion_logits": [(rollout_module, "completion_logits"), (distill, "completion_logits"),
                          (teachers, "completion_logits"), (grpo, "completion_logits")],
    "token_logprobs": [(rollout_module, "token_logprobs"), (distill, "token_logprobs"), (grpo, "token_logprobs")],
    "summarise": [(teachers, "summarise")],
    "score": [(teachers, "score")],
    "topk_reverse_kl": [(losses, "topk_reverse_kl"), (distill, "topk_reverse_kl")],
    "_CHUNK_ELEMENTS": [(losses, "_CHUNK_ELEMENTS")],
}
OLD = {"encode_prompts": encode_prompts, "sample": sample, "completion_logits": completion_logits, "token_logprobs": token_logprobs,
       "summarise": summarise, "score": score, "topk_reverse_kl": topk_reverse_kl, "_CHUNK_ELEMENTS": CHUNK_ELEMENTS}


@contextmanager
def library_before(*names: str):
    """Inside: the named old code paths (default: all of them) replace the new ones."""
    with ExitStack() as stack:
        for name in names or OLD:
            for module, attr in PATCHES[name]:
                stack.enter_context(mock.patch.object(module, attr, OLD[name]))
        yield
