"""The cost counters equal a hand count on a small batch, in every trainer; the FLOPs formula."""

from dataclasses import replace

import pytest
import torch

import factworld
from mopd_mini import GRPOConfig, MOPDConfig, cost, train_student, train_teacher
from mopd_mini.offline import OfflineConfig, collect, train_offline
from mopd_mini.rollout import chat_prompt, pack


def prompt_tokens(tok, ex) -> int:
    """Tokens of one example's chat-formatted prompt, counted by the tokenizer alone."""
    return len(tok(chat_prompt(tok, ex.prompt), add_special_tokens=False)["input_ids"])


def capture(monkeypatch, module):
    """Record every rollout `module.sample` returns."""
    seen, real = [], module.sample
    monkeypatch.setattr(module, "sample", lambda *a, **k: seen.append(real(*a, **k)) or seen[-1])
    return seen


def test_counters_of_a_hand_made_rollout(tiny):
    """Two prompts, each twice (as a GRPO group): the sampler prefills each prompt once; the
    generated tokens are the completions' lengths; a forward runs over prompt + completion."""
    model, tok = tiny
    a, b = factworld.generate("binding", "train", n=1, length=8) + factworld.generate("recall", "train", n=1, length=12)
    eos = tok.eos_token_id
    comps = [[5, eos], [6, 7, eos], [8, eos], [eos]]
    rollout = pack(model, tok, [a, a, b, b], comps)
    pa, pb = prompt_tokens(tok, a), prompt_tokens(tok, b)
    assert cost.sampled(rollout) == {"cost/sample_prefill_tokens": pa + pb, "cost/generated_tokens": 8}
    assert cost.trained(rollout) == {"cost/trained_tokens": 2 * pa + 2 * pb + 8, "cost/loss_tokens": 8}
    assert cost.forward_tokens(rollout, [0]) == pa + 2


def test_grpo_counts_match_a_hand_count(bank, monkeypatch):
    from mopd_mini import grpo
    seen = capture(monkeypatch, grpo)
    run = train_teacher(bank, GRPOConfig(domain=("binding", "recall"), steps=2, prompts_per_step=2, group_size=3,
                                         eval_every=0, experiment=None, progress=False))
    tok = bank.tokenizer
    for row, rollout in zip(run.metrics, seen):
        distinct = list({ex.prompt: ex for ex in rollout.examples}.values())
        assert len(distinct) == 4 and rollout.prefill is not None   # the tiny base: prefill once
        distinct_tokens = sum(prompt_tokens(tok, ex) for ex in distinct)
        assert row["cost/sample_prefill_tokens"] == 0               # the sampler's prefill IS the training forward
        lengths = rollout.completion_mask.sum(1)
        assert row["cost/generated_tokens"] == int(lengths.sum())
        if "loss" in row:     # a step with a kept group trains on each distinct prompt once and every completion
            assert row["cost/trained_tokens"] == distinct_tokens + int(lengths.sum())
        two_pass = cost.sampled(replace(rollout, prefill=None)) | cost.trained(replace(rollout, prefill=None))
        assert two_pass["cost/sample_prefill_tokens"] == distinct_tokens
        assert two_pass["cost/trained_tokens"] == sum(prompt_tokens(tok, ex) for ex in rollout.examples) + int(lengths.sum())
    assert run.seconds > 0


def test_mopd_counts_match_a_hand_count(teacher_bank, monkeypatch):
    from mopd_mini import distill
    seen = capture(monkeypatch, distill)
    run = train_student(teacher_bank, MOPDConfig(steps=2, prompts_per_domain=2, topk=4, eval_every=0, track_steps=(),
                                                 experiment=None, progress=False))
    tok = teacher_bank.tokenizer
    for row, rollout in zip(run.metrics, seen):
        prompts = sum(prompt_tokens(tok, ex) for ex in rollout.examples)       # 4 distinct prompts, one sample each
        generated = int(rollout.completion_mask.sum())
        assert rollout.prefill is not None                                     # prefill once on the tiny base
        assert row["cost/sample_prefill_tokens"] == 0 and row["cost/generated_tokens"] == generated
        assert row["cost/teacher_prefill_tokens"] == row["cost/trained_tokens"] == prompts + generated
        assert row["cost/loss_tokens"] == generated


def test_offline_counts_match_a_hand_count(teacher_bank):
    cfg = OfflineConfig(prompts_per_domain=2, samples_per_prompt=3, steps=2, batch_size=4, loss="soft",
                        eval_every=0, experiment=None, progress=False)
    data = collect(teacher_bank, cfg)
    tok = teacher_bank.tokenizer
    distinct = list({ex.prompt: ex for ex in data.examples}.values())
    assert data.cost["cost/sample_prefill_tokens"] == sum(prompt_tokens(tok, ex) for ex in distinct)
    assert data.cost["cost/generated_tokens"] == sum(map(len, data.completions))
    run = train_offline(teacher_bank, OfflineConfig(**{**cfg.__dict__, "keep": "all"}), data)
    assert run.metrics[0]["cost/generated_tokens"] == data.cost["cost/generated_tokens"]
    for row in run.metrics[1:]:
        assert row["cost/trained_tokens"] == row["cost/teacher_prefill_tokens"] > row["cost/loss_tokens"] > 0
    total = cost.totals(run.metrics)
    assert total["cost/generated_tokens"] == data.cost["cost/generated_tokens"]
    assert total["cost/trained_tokens"] == sum(r["cost/trained_tokens"] for r in run.metrics[1:])


def test_flops_formula_and_parameter_count(bank):
    """2N + 2n per forward token (every model is an adapter on the base); 4N + 6n per trained token
    (the adapter's forward, its input gradient and its weight gradient: 2n each); N counts every
    matmul weight of the base once (tied head included), n the adapter's LoRA weights."""
    total = {"cost/sample_prefill_tokens": 10, "cost/generated_tokens": 5, "cost/teacher_prefill_tokens": 7,
             "cost/trained_tokens": 3}
    assert cost.flops(total, N=100, n=4) == (200 + 8) * 22 + (400 + 24) * 3
    assert cost.flops(total, N=100, n=0) == 200 * 22 + 400 * 3          # no adapter: the base alone
    cfg = bank.base.config
    d, f, L, V = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers, cfg.vocab_size
    heads = cfg.num_attention_heads * cfg.head_dim
    kv = cfg.num_key_value_heads * cfg.head_dim
    by_hand = L * (d * heads + 2 * d * kv + heads * d + 3 * d * f) + V * d
    assert cost.param_counts(bank) == (by_hand, 0)
    bank.create("a")
    N, n = cost.param_counts(bank, "a")
    r = bank.lora.r
    assert N == by_hand and n == L * r * ((d + heads) + 2 * (d + kv) + (heads + d) + 2 * (d + f) + (f + d))


def test_totals_and_add():
    rows = [{"step": 1, "cost/generated_tokens": 3}, {"step": 2, "cost/generated_tokens": 4, "cost/trained_tokens": 9}]
    t = cost.totals(rows)
    assert t["cost/generated_tokens"] == 7 and t["cost/trained_tokens"] == 9 and t["cost/teacher_prefill_tokens"] == 0
    assert cost.add(t, t)["cost/generated_tokens"] == 14
