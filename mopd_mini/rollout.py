"""Prompts in, completions out: building the model's prompt, on-policy sampling, masks.

    rollout = sample(model, tokenizer, examples, temperature=1.0)   # the student's own samples
    logits = completion_logits(model, rollout)                      # (B, C, V), with grad
    answers = generate_answers(model, tokenizer, prompts)           # greedy, for evaluation

A rollout is one padded block per batch: the prompts LEFT-padded to a common width P, so every
completion starts at column P, followed by C generated columns. Positions are counted from each
row's first real token, identically when sampling and when scoring, so the log-probs a loss
recomputes are exactly those of the policy that sampled (on-policy, no importance weight).

Sampling is a plain loop over a KV cache rather than `model.generate`, so that every knob that
shapes the distribution is visible here: the temperature, and a top-p nucleus only where one is asked
for (`top_p`, 1.0 by default: MOPD distils on the student's untruncated distribution; UCMOPD's
exploration samples and MOPDConfig.top_p truncate), greedy for evaluation.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

import torch
from torch import Tensor
from transformers import DynamicCache

import factworld

from .losses import log_softmax_at
from .tokenizer import INSTRUCTION, is_tiny
from .validate import guarded


# ---------------------------------------------------------------------------------------------
# prompts
# ---------------------------------------------------------------------------------------------


def chat_prompt(tokenizer, prompt: str) -> str:
    """A raw FactWorld prompt in the model's own format: Qwen3 gets FactWorld's instruction in
    one user turn with thinking off; the tiny model, which has no words for it, gets the task."""
    content = prompt if is_tiny(tokenizer) else f"{INSTRUCTION}\n\n{prompt}"
    return tokenizer.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                         add_generation_prompt=True, enable_thinking=False)


def encode_prompts(model, tokenizer, prompts: list[str], max_new_tokens: int) -> tuple[Tensor, Tensor]:
    """Left-padded (B, P) ids and mask of the chat-formatted prompts, checked against the model."""
    if not prompts:
        raise ValueError("no prompts to sample from: pass at least one example")
    texts = [chat_prompt(tokenizer, p) for p in prompts]
    encoded = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)  # one batched call
    rows, unk = encoded["input_ids"], tokenizer.unk_token_id
    for text, ids, offsets in zip(texts, rows, encoded["offset_mapping"]):
        unknown = [text[a:b] for i, (a, b) in zip(ids, offsets) if i == unk]
        if unknown:
            raise ValueError(f"the prompt has words outside this model's vocabulary: {unknown[:5]}; keep "
                             "FactWorld knobs within the tiny vocabulary (agents < 64, objects < 8, values "
                             "< 128, length < 64) or use a Qwen3 model")
    limit = model.config.max_position_embeddings
    longest = max(map(len, rows))
    if longest + max_new_tokens > limit:
        raise ValueError(f"a prompt of {longest} tokens + {max_new_tokens} new tokens exceeds the model's "
                         f"context of {limit}; use a shorter FactWorld length or fewer max_new_tokens")
    pad = tokenizer.pad_token_id
    ids = torch.tensor([[pad] * (longest - len(r)) + r for r in rows])          # (B, P)
    mask = torch.tensor([[0] * (longest - len(r)) + [1] * len(r) for r in rows])  # (B, P)
    return ids, mask


def check_budget(tokenizer, domains: dict, max_new_tokens: int, n: int = 32) -> None:
    """A ValueError when some gold answer of the domains, plus the end of turn, does not fit in
    `max_new_tokens`: such a completion can never end, so its reward would always be 0. The tiny
    tokenizer spells `v127.` in 2 tokens; Qwen3's in 5 (`v`, `1`, `2`, `7`, `.`). Checked on n test
    examples per domain and length (train and evaluation lengths)."""
    def cost(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"]) + 1  # + EOS
    answers = {ex.answer for d in domains.values() for L in dict.fromkeys(d.train_lengths + d.eval_lengths)
               for ex in d.test_examples(L, n)}
    longest = max(answers, key=cost)
    if cost(longest) > max_new_tokens:
        raise ValueError(f"max_new_tokens={max_new_tokens} cannot hold the answer {longest!r} and the end of turn "
                         f"({cost(longest)} tokens with this tokenizer), so its reward would always be 0; use "
                         f"max_new_tokens >= {cost(longest)} (the Qwen3 presets, for_model('qwen3'), use 8)")


def position_ids(attention_mask: Tensor) -> Tensor:
    """Each row's positions counted from its first real token (left padding gets 0)."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def eos_ids(model, tokenizer) -> list[int]:
    """Every token that ends a completion (Qwen3 has two)."""
    ids = model.generation_config.eos_token_id
    ids = ids if isinstance(ids, list) else [ids]
    return sorted({i for i in ids + [tokenizer.eos_token_id] if i is not None})


# ---------------------------------------------------------------------------------------------
# sampling
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prompt:
    """A bare prompt, for sampling text that is not a FactWorld example (no task, no gold)."""

    prompt: str
    task: str = ""


@dataclass
class Rollout:
    """A batch of prompts and the completions sampled for them."""

    input_ids: Tensor        # (B, P + C) prompt (left-padded) then completion (pad after EOS)
    attention_mask: Tensor   # (B, P + C) 1 on real prompt tokens and on completion tokens
    completion_mask: Tensor  # (B, C)     1 on generated tokens up to and including EOS
    prompt_len: int          # P
    examples: list           # the FactWorld examples, one per row
    sample_logprobs: Tensor  # (B, C)     log-probs when sampled (a diagnostic: losses recompute)
    ended: Tensor            # (B,)       True where the completion emitted EOS within the budget
    prefill: "Prefill | None" = None  # the sampler's prompt prefill WITH grad (sample(grad_prefill=True))

    @property
    def completion_ids(self) -> Tensor:
        return self.input_ids[:, self.prompt_len:]  # (B, C)

    @property
    def domains(self) -> list[str]:
        return [ex.task for ex in self.examples]

    def texts(self, tokenizer) -> list[str]:
        rows = [ids[m.bool()].tolist() for ids, m in zip(self.completion_ids.cpu(), self.completion_mask.cpu())]
        return tokenizer.batch_decode(rows, skip_special_tokens=True)  # one call: the rewards' decode per step

    def rewards(self, tokenizer) -> Tensor:
        """The verifiable reward, (B,) in {0, 1}: FactWorld's match against the gold answer under the
        example's own metric (relaxed; final for a domain that grades the final answer only), and 0 for a completion that never ended (truncated at max_new_tokens: a hard zero, the
        default that DAPO's overlong filtering replaces by masking truncated completions out of
        the loss). Without that rule only the first token is graded and whatever follows the
        answer drifts freely under RL; with it, a teacher must also learn to stop."""
        match = torch.tensor([float(factworld.grade(t, ex)) for t, ex in
                              zip(self.texts(tokenizer), self.examples)])
        return match * self.ended.float().cpu()

    def rows(self, index: list[int]) -> "Rollout":
        """The sub-batch of the given rows (same columns, so it scores identically)."""
        i = torch.tensor(index, dtype=torch.long)
        return Rollout(self.input_ids[i], self.attention_mask[i], self.completion_mask[i],
                       self.prompt_len, [self.examples[j] for j in index], self.sample_logprobs[i],
                       self.ended[i])  # (no prefill: a sub-batch is for scoring, never for training)


@dataclass
class Prefill:
    """The student's prompt prefill, kept WITH its autograd graph for the training forward
    (`completion_logits(model, rollout, prefill=rollout.prefill)`), one row per rollout row.

    keys_values  per layer, the prompt's keys and values (B, heads, P, head_dim): the tensors the
                 prefill computed, carrying grad (never copies made under no_grad)
    logits       (B, 1, V) the logits at the prompt's last position, which predict completion token 0"""

    keys_values: list[tuple[Tensor, Tensor]]
    logits: Tensor


def _draw(probs: Tensor, generator: torch.Generator | None) -> Tensor:
    """One token per row ~ probs (B, V). The trainers seed a CPU generator; on a GPU the draw then
    happens on the CPU (a (B, V) copy per token), so a seed gives the same samples on every device."""
    if generator is not None and generator.device != probs.device:
        return torch.multinomial(probs.to(generator.device), 1, generator=generator)[:, 0].to(probs.device)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]


@guarded
@torch.no_grad()
def sample(model, tokenizer, examples: list, *, temperature: float = 1.0, greedy: bool = False,
           max_new_tokens: int = 8, generator: torch.Generator | None = None, top_p: float = 1.0,
           grad_prefill: bool = False, min_new_tokens: int = 0, **forward_kwargs) -> Rollout:
    """One completion per example from `model` as it is now (its active adapter):
    y_t ~ softmax(logits_t / temperature), untruncated at the default top_p=1; `greedy` takes the argmax
    instead. `top_p` < 1 truncates to the nucleus (UCMOPD's exploration samples, and MOPDConfig.top_p where a
    run sets it; 1 by default); `sample_logprobs` are then those of the truncated, renormalised distribution.
    `forward_kwargs` go to every forward (e.g. peft's `adapter_names` for a mixed batch).

    `grad_prefill`: the prompt prefill runs WITH grad and the rollout keeps it (`rollout.prefill`),
    so that the training forward need not run over the prompt again (see `completion_logits`). The
    decode steps still run without grad, on a detached view of the same keys and values; the draws
    are the same as without it.

    `min_new_tokens`: the end-of-turn tokens get probability 0 before that many tokens (as
    `generate`'s option of that name), so every completion is at least that long; the
    `sample_logprobs` are those of the distribution drawn from. For measuring what a long answer
    costs (bench.scaling); the trainers never set it."""
    if not greedy and not temperature > 0:
        raise ValueError(f"temperature must be > 0 (got {temperature}); use greedy=True for argmax decoding")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1] (1: no truncation), got {top_p}")
    if not 0 <= min_new_tokens <= max_new_tokens:
        raise ValueError(f"min_new_tokens must be in [0, max_new_tokens={max_new_tokens}], got {min_new_tokens}")
    device = next(model.parameters()).device
    prompts = [e.prompt for e in examples]
    distinct = {p: i for i, p in enumerate(dict.fromkeys(prompts))}        # GRPO repeats each prompt G times
    prompt_ids, prompt_mask = encode_prompts(model, tokenizer, list(distinct), max_new_tokens)
    ids, mask = prompt_ids.to(device), prompt_mask.to(device)                 # (U, P) one row per distinct prompt
    row_of = torch.tensor([distinct[p] for p in prompts], device=device)      # (B,) the distinct row of each row
    stop = torch.tensor(eos_ids(model, tokenizer), device=device)
    done = torch.zeros(len(examples), dtype=torch.bool, device=device)
    tokens, logps, alive_steps = [], [], []
    cache, step_ids, step_pos = None, ids, position_ids(mask)
    for t in range(max_new_tokens):
        # the LM head on the last position only, named by index: the int `logits_to_keep=1` slices the
        # prefill's hidden states to a non-contiguous (B, 1, H) view, for which torch's matmul copies the
        # whole (H, V) head once per row (B x 622 MB at Qwen3's vocabulary)
        last = torch.tensor([step_ids.shape[1] - 1], device=device)
        first = cache is None
        with torch.enable_grad() if grad_prefill and first else nullcontext():  # (the copies below too)
            out = model(input_ids=step_ids, attention_mask=mask, position_ids=step_pos, cache=cache,
                        use_cache=True, logits_to_keep=last, **forward_kwargs)
            cache, logits = out.cache, out.logits[:, -1]
            if len(logits) < len(examples):  # the prefill ran once per distinct prompt: copy it to each of its rows
                cache.reorder_cache(row_of)  # index_select: new tensors, through which grad flows back
                logits, ids, mask, step_pos = logits[row_of], ids[row_of], mask[row_of], step_pos[row_of]
            if grad_prefill and first:       # keep the grad-carrying tensors; decode on detached views of them
                prefill = Prefill([(layer.keys, layer.values) for layer in cache.layers], logits[:, None])
                for layer in cache.layers:   # DynamicLayer.update concatenates into NEW tensors: these stay intact
                    layer.keys, layer.values = layer.keys.detach(), layer.values.detach()
                logits = logits.detach()
        logp = torch.log_softmax(logits.float() / (1.0 if greedy else temperature), -1)  # (B, V)
        if t < min_new_tokens:                                 # no end of turn yet: renormalise without it
            logp = logp.index_fill(1, stop, -torch.inf)
            logp = logp - logp.logsumexp(-1, keepdim=True)
        if top_p < 1 and not greedy:
            logp = nucleus(logp, top_p)
        y = logp.argmax(-1) if greedy else _draw(logp.exp(), generator)
        alive = ~done                                          # this step's token is real for these rows
        y = torch.where(alive, y, tokenizer.pad_token_id)      # finished rows only pad
        tokens.append(y), logps.append(logp.gather(1, y[:, None])[:, 0]), alive_steps.append(alive)
        mask = torch.cat([mask, alive.long()[:, None]], 1)
        done |= torch.isin(y, stop)
        step_ids, step_pos = y[:, None], step_pos[:, -1:] + 1
        if done.all():
            break
    completion_mask = torch.stack(alive_steps, 1).float()      # (B, C) 1 up to and including EOS
    return Rollout(torch.cat([ids, torch.stack(tokens, 1)], 1), mask, completion_mask, ids.shape[1],
                   list(examples), torch.stack(logps, 1) * completion_mask, done,
                   prefill if grad_prefill else None)


def pack(model, tokenizer, examples: list, completions: list[list[int]]) -> Rollout:
    """A rollout of GIVEN completions (token ids, up to and including EOS), laid out exactly as
    `sample` lays out its own: prompts left-padded to width P, then C completion columns padded
    after each row's end. What the offline trainer feeds its student (teacher-forced)."""
    if len(examples) != len(completions):
        raise ValueError(f"{len(examples)} examples but {len(completions)} completions: give one each")
    if not all(completions):
        raise ValueError("an empty completion has nothing to train on; drop it first")
    C = max(map(len, completions))
    prompt_ids, prompt_mask = encode_prompts(model, tokenizer, [e.prompt for e in examples], C)
    pad = tokenizer.pad_token_id
    ids = torch.tensor([c + [pad] * (C - len(c)) for c in completions])                  # (B, C)
    completion_mask = torch.tensor([[1.0] * len(c) + [0.0] * (C - len(c)) for c in completions])
    stop = set(eos_ids(model, tokenizer))
    ended = torch.tensor([c[-1] in stop for c in completions])
    device = next(model.parameters()).device
    return Rollout(torch.cat([prompt_ids, ids], 1).to(device),
                   torch.cat([prompt_mask, completion_mask.long()], 1).to(device), completion_mask.to(device),
                   prompt_ids.shape[1], list(examples), torch.zeros_like(completion_mask).to(device), ended)


def nucleus(logp: Tensor, top_p: float) -> Tensor:
    """Top-p truncation of (B, V) log-probs: keep the most likely tokens whose cumulative mass
    reaches top_p (the most likely one always, whatever top_p in (0, 1]), renormalise; the others
    get -inf. The first token is kept by position, not by `0 >= top_p`: a top_p below float32's
    smallest number (1e-300) compares as 0 and would drop every token (an all -inf row, which
    torch.multinomial refuses at step 1)."""
    sorted_logp, order = logp.sort(-1, descending=True)                     # (B, V)
    before = sorted_logp.exp().cumsum(-1) - sorted_logp.exp()               # mass strictly before each
    cut = before >= top_p
    cut[..., 0] = False                                                     # the most likely token, always
    drop = torch.zeros_like(logp, dtype=torch.bool).scatter(-1, order, cut)  # vocabulary order
    kept = logp.masked_fill(drop, -torch.inf)
    return kept - kept.logsumexp(-1, keepdim=True)


def concat(a: Rollout, b: Rollout, pad_id: int) -> Rollout:
    """Two rollouts of the same prompts' width P as one batch (a's rows, then b's); the shorter
    completion block is padded (mask 0), so every row scores as it would alone."""
    if a.prompt_len != b.prompt_len:
        raise ValueError(f"rollouts with prompt widths {a.prompt_len} and {b.prompt_len} cannot be "
                         "concatenated; sample them from the same prompts")
    C = max(a.completion_mask.shape[1], b.completion_mask.shape[1])

    def widen(x: Tensor, extra: int, value) -> Tensor:
        return torch.cat([x, x.new_full((len(x), extra), value)], 1) if extra else x

    parts = [(r, C - r.completion_mask.shape[1]) for r in (a, b)]
    return Rollout(torch.cat([widen(r.input_ids, e, pad_id) for r, e in parts]),
                   torch.cat([widen(r.attention_mask, e, 0) for r, e in parts]),
                   torch.cat([widen(r.completion_mask, e, 0) for r, e in parts]), a.prompt_len,
                   list(a.examples) + list(b.examples),
                   torch.cat([widen(r.sample_logprobs, e, 0) for r, e in parts]), torch.cat([a.ended, b.ended]))


def completion_logits(model, rollout: Rollout, prefill: Prefill | None = None, **forward_kwargs) -> Tensor:
    """The model's logits at the positions that predict each completion token: (B, C, V).

    One forward over prompt + completion (a prefill); the LM head runs on those C positions only
    (`logits_to_keep`), never on the prompt, which at V = 151,936 is most of the memory. The
    result is one contiguous (B, C, V) tensor (no slice of a larger one), so the losses chunk it
    without a copy.

    With `prefill` (the sampler's own prompt prefill, run with grad: `sample(grad_prefill=True)`)
    the prompt is not run again: the forward covers the first C - 1 completion tokens only, on top
    of the prefill's keys and values, and the logits of completion token 0 are the prefill's last
    ones. Same logits, same gradient (the graph reaches the adapter through the prompt's keys and
    values), one prompt forward fewer per step. Only for the model that sampled, in the same
    mode: the trainers use it when dropout is 0 and activation checkpointing is off."""
    if prefill is not None:
        return _logits_on_prefill(model, rollout, prefill, **forward_kwargs)
    P, C = rollout.prompt_len, rollout.completion_mask.shape[1]
    keep = torch.arange(P - 1, P + C - 1, device=rollout.input_ids.device)  # P-1 .. P+C-2 predict P .. P+C-1
    out = model(input_ids=rollout.input_ids, attention_mask=rollout.attention_mask,
                position_ids=position_ids(rollout.attention_mask), logits_to_keep=keep, use_cache=False,
                **forward_kwargs)
    return out.logits


def prefill_reusable(model, checkpointing: bool) -> bool:
    """Whether a trainer may train on the sampler's prefill (`sample(grad_prefill=True)`): only when
    train() and eval() run the same forward, so the prefill that sampled is the one that trains: no
    dropout with p > 0 anywhere (LoRA's included), no attention dropout, and no activation
    checkpointing (it acts in train mode only, and a cached forward cannot be recomputed).

    And only in fp32 (or fp64). MOPD's advantage is log pi_T(y) - log pi_S(y), the teacher's from a
    whole forward over prompt + completion; in bf16 (or fp16) the prefill-then-continue forward rounds
    differently from that whole forward, and the difference is noise in the advantage: with the
    student a copy of its teacher, |A| of 2.8e-3 nats on average (1.6e-2 at most) and 2.6% of a real
    step's gradient at Qwen3-1.7B's width (2 layers), against a per-token KL of 0.01-0.07 late in a
    run. The whole forward matches the teacher's bit for bit (bench.bf16_floor); it costs the prompt's
    forward once more per step. (fp32 logits alone do not help: the paths differ in the hidden states.)"""
    if checkpointing:
        return False
    if torch.finfo(model.get_input_embeddings().weight.dtype).bits < 32:
        return False
    if any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in model.modules()):
        return False
    return not getattr(model.config, "attention_dropout", 0.0)


def _logits_on_prefill(model, rollout: Rollout, prefill: Prefill, **forward_kwargs) -> Tensor:
    P, C = rollout.prompt_len, rollout.completion_mask.shape[1]
    if C == 1:
        return prefill.logits
    # a fresh cache holding the prefill's own tensors: update() concatenates into new tensors, so the
    # prefill is left as it was and the gradient flows through the concatenation into it
    cache = DynamicCache(ddp_cache_data=prefill.keys_values, config=model.config)
    mask = rollout.attention_mask[:, :P + C - 1]                             # prompt + tokens 0 .. C-2
    out = model(input_ids=rollout.input_ids[:, P:P + C - 1], attention_mask=mask,
                position_ids=position_ids(mask)[:, P:], cache=cache, use_cache=True, **forward_kwargs)
    return torch.cat([prefill.logits, out.logits], 1)                        # (B, C, V): predict tokens 0 .. C-1


def token_logprobs(logits: Tensor, ids: Tensor) -> Tensor:
    """log pi(y_t | x, y_<t) of the given tokens: logits (B, C, V), ids (B, C) -> (B, C), fp32.
    z_y - log sum_v exp z_v, a chunk of rows at a time (no (B, C, V) fp32 copy; see losses)."""
    return log_softmax_at(logits, ids[..., None])[..., 0]


@guarded
def generate_answers(model, tokenizer, prompts: list[str], max_new_tokens: int = 8,
                     batch_size: int = 64) -> list[str]:
    """Greedy answers to raw FactWorld prompts (exactly `Example.prompt`), in the model's own
    prompt format; works on a plain base and on a peft model with whichever adapter is active."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    answers = []
    for i in range(0, len(prompts), batch_size):
        chunk = [Prompt(p) for p in prompts[i: i + batch_size]]
        answers += sample(model, tokenizer, chunk, greedy=True, max_new_tokens=max_new_tokens).texts(tokenizer)
    return answers


# every public function (and class method) of this module: its annotated arguments checked at a call from outside
# the package (mopd_mini.validate.guard_public); the package's own calls, e.g. the training loop's, skip the checks
from .validate import guard_public  # noqa: E402

guard_public(globals())
