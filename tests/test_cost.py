"""One cost ledger: in every trainer the cost counters (each step's cost/* columns and
`cost.totals`) equal a count made by hand from that step's own examples and tokens, and
`cost.flops` of the run equals the formula written out by hand, (2N + 2n) per forward token and
(4N + 6n) per trained token. A run reloaded from disk (a second train_grpo call) reports exactly the counters of the run
that wrote it (the baselines' Bench, which reloads its teachers: tests/studies/test_baselines.py).

By hand means: prompt tokens from the tokenizer alone (the chat-formatted prompt, no padding);
completion tokens from the sampled ids, up to and including the first end-of-turn token (or the
whole budget when none came); which rows a forward runs over from what the trainer does (the
sampler prefills each distinct prompt once; under prefill once that prefill is the training
forward, so a GRPO group's prompt is trained once for its G completions; a teacher prefills
prompt + completion of every row; the offline student trains on its step's batch, chosen by
`batch_indices`)."""

import copy

import pytest
import torch

import factworld
from mopd_mini import AdapterBank, GRPOConfig, MOPDConfig, cost, runs, train_grpo, train_student
from mopd_mini.config import OfflineConfig
from mopd_mini.offline import batch_indices, collect, train_offline
from mopd_mini.rollout import chat_prompt, eos_ids, pack


def prompt_tokens(tok, ex) -> int:
    """Tokens of one example's chat-formatted prompt, counted by the tokenizer alone."""
    return len(tok(chat_prompt(tok, ex.prompt), add_special_tokens=False)["input_ids"])


def completion_length(ids: list[int], stop: set[int]) -> int:
    """Tokens of one sampled completion: up to and including the first stop token, else all."""
    for i, t in enumerate(ids):
        if t in stop:
            return i + 1
    return len(ids)


def capture(monkeypatch, module):
    """Record every rollout `module.sample` returns, in order."""
    seen, real = [], module.sample
    monkeypatch.setattr(module, "sample", lambda *a, **k: seen.append(real(*a, **k)) or seen[-1])
    return seen


def generated(rollout, stop) -> list[int]:
    """Each row's completion length, by hand from its ids."""
    return [completion_length(row, stop) for row in rollout.completion_ids.tolist()]


def by_hand_flops(bank, adapter, forward: int, trained: int) -> float:
    """The formula of cost.FORMULA written out: (2N + 2n) per forward token, (4N + 6n) per trained one."""
    N, n = cost.param_counts(bank, adapter)      # checked against the architecture below
    return (2 * N + 2 * n) * forward + (4 * N + 6 * n) * trained


def grpo_hand_count(tok, stop, rollouts, metrics) -> dict:
    """Hand totals of a GRPO run (a teacher, Mix-RL, a cascade) from its captured rollouts; checks
    every step's columns on the way."""
    assert len(rollouts) == len(metrics)
    total = {"sample_prefill": 0, "generated": 0, "trained": 0}
    for rollout, row in zip(rollouts, metrics):
        distinct = list({ex.prompt: ex for ex in rollout.examples}.values())
        prompts = sum(prompt_tokens(tok, ex) for ex in distinct)
        gen = sum(generated(rollout, stop))
        assert row["cost/generated_tokens"] == gen
        trains = "loss" in row
        if rollout.prefill is not None:   # prefill once: the distinct prompts' prefill is the training forward
            assert row.get("cost/sample_prefill_tokens") == (0 if trains else prompts)
            assert row.get("cost/trained_tokens", 0) == (prompts + gen if trains else 0)
        else:                             # two passes: the sampler's prefill, then a forward over every row
            assert row["cost/sample_prefill_tokens"] == prompts
            all_rows = sum(prompt_tokens(tok, ex) for ex in rollout.examples)
            assert row.get("cost/trained_tokens", 0) == (all_rows + gen if trains else 0)
        assert "cost/teacher_prefill_tokens" not in row
        total["sample_prefill"] += row["cost/sample_prefill_tokens"]
        total["generated"] += gen
        total["trained"] += row.get("cost/trained_tokens", 0)
    return total


def check_totals(run, hand: dict) -> None:
    t = cost.totals(run.metrics)
    assert t["cost/sample_prefill_tokens"] == hand["sample_prefill"]
    assert t["cost/generated_tokens"] == hand["generated"]
    assert t["cost/teacher_prefill_tokens"] == hand.get("teacher_prefill", 0)
    assert t["cost/trained_tokens"] == hand["trained"]


@pytest.fixture
def skip_some_groups(monkeypatch):
    """Every other GRPO step keeps no group (as when all of a group's rewards are equal), so the
    steps that train nothing are counted too."""
    from mopd_mini import grpo
    real, calls = grpo.group_advantages, []

    def every_other(rewards):
        adv, keep = real(rewards)
        calls.append(1)
        return (adv, torch.zeros_like(keep)) if len(calls) % 2 == 0 else (adv, torch.ones_like(keep))
    monkeypatch.setattr(grpo, "group_advantages", every_other)


@pytest.mark.parametrize("kind", ["teacher", "mixrl", "cascade"])
def test_grpo_trainers_count_by_hand(kind, teacher_bank, monkeypatch, skip_some_groups):
    """A GRPO teacher, Mix-RL (both domains, one adapter) and a cascade's second stage (from a
    teacher): each step's counters and the run's totals and FLOPs equal the hand count, on steps
    that train and on steps that keep no group (the sampler's prefill is then a plain forward)."""
    from mopd_mini import grpo
    seen = capture(monkeypatch, grpo)
    domain = {"teacher": "binding", "mixrl": ("binding", "recall"), "cascade": "recall"}[kind]
    extra = dict(name="cascade", init_from="teacher_binding", eval_domains=("binding",)) if kind == "cascade" else {}
    cfg = GRPOConfig(domain=domain, steps=4, prompts_per_step=2, group_size=3, eval_every=0, experiment=None,
                     progress=False, **({"name": "t"} if kind == "teacher" else {}), **extra)
    run = train_grpo(teacher_bank, cfg)
    tok = teacher_bank.tokenizer
    stop = set(eos_ids(teacher_bank.model, tok))
    assert all(len({ex.prompt for ex in r.examples}) == 2 * len(cfg.domains) for r in seen)
    assert any("loss" in row for row in run.metrics) and any("loss" not in row for row in run.metrics)
    hand = grpo_hand_count(tok, stop, seen, run.metrics)
    check_totals(run, hand)
    assert cost.flops(cost.totals(run.metrics), *cost.param_counts(teacher_bank, cfg.adapter)) == by_hand_flops(
        teacher_bank, cfg.adapter, hand["sample_prefill"] + hand["generated"], hand["trained"])


def test_grpo_two_passes_count_by_hand(teacher_bank, monkeypatch, skip_some_groups):
    """Where the sampler's prefill cannot be reused (train mode differs from eval mode: dropout),
    the sampler prefills each distinct prompt once and the training forward runs over every row."""
    from mopd_mini import grpo
    seen = capture(monkeypatch, grpo)
    monkeypatch.setattr(grpo, "prefill_reusable", lambda *a: False)
    run = train_grpo(teacher_bank, GRPOConfig(domain="binding", name="t", steps=2, prompts_per_step=2,
                                              group_size=3, eval_every=0, experiment=None, progress=False))
    assert all(r.prefill is None for r in seen)
    tok = teacher_bank.tokenizer
    check_totals(run, grpo_hand_count(tok, set(eos_ids(teacher_bank.model, tok)), seen, run.metrics))


@pytest.mark.parametrize("loss, extra", [("pg", {}), ("topk", {}), ("kl", {}), ("fkl", {}), ("jsd", {"beta": 0.3}),
                                         ("topk", {"topk_support": True}), ("kl", {"top_p": 0.9})])
def test_mopd_counts_by_hand_in_each_loss(loss, extra, teacher_bank, monkeypatch):
    """MOPD in each loss: one sample per prompt; the sampler's prefill is the training forward
    (prefill once), the routed teachers prefill prompt + completion of every row, the student
    trains on prompt + completion of every row; the loss on the completion tokens. The same count
    holds for fkl, jsd, support matching and top_p: what each adds is nothing the ledger counts
    (cost's docstring)."""
    from mopd_mini import distill
    seen = capture(monkeypatch, distill)
    run = train_student(teacher_bank, MOPDConfig(loss=loss, steps=3, prompts_per_domain=2, topk=4, eval_every=0,
                                                 track_steps=(), experiment=None, progress=False, **extra))
    tok = teacher_bank.tokenizer
    stop = set(eos_ids(teacher_bank.model, tok))
    hand = {"sample_prefill": 0, "generated": 0, "teacher_prefill": 0, "trained": 0}
    assert len(seen) == len(run.metrics) == 3
    for row, rollout in zip(run.metrics, seen):
        assert rollout.prefill is not None and len({ex.prompt for ex in rollout.examples}) == 4
        prompts = sum(prompt_tokens(tok, ex) for ex in rollout.examples)
        gen = sum(generated(rollout, stop))
        assert row["cost/sample_prefill_tokens"] == 0 and row["cost/generated_tokens"] == gen
        assert row["cost/teacher_prefill_tokens"] == prompts + gen
        assert row["cost/trained_tokens"] == prompts + gen and row["cost/loss_tokens"] == gen
        hand["generated"] += gen
        hand["teacher_prefill"] += prompts + gen
        hand["trained"] += prompts + gen
    check_totals(run, hand)
    assert cost.flops(cost.totals(run.metrics), *cost.param_counts(teacher_bank, "student")) == by_hand_flops(
        teacher_bank, "student", hand["generated"] + hand["teacher_prefill"], hand["trained"])


def test_ucmopd_golden_gain_counts_both_samplings_by_hand(teacher_bank, monkeypatch):
    """UCMOPD's golden gain samples twice a step (one anchor per prompt, then m explorations per
    prompt): each sampling prefills the distinct prompts once, so the sampler prefill is twice the
    distinct prompts' tokens; the teachers score and the student trains every row of both (no
    prefill once: two passes)."""
    from mopd_mini import distill
    from mopd_mini.config import GoldenGain
    seen = capture(monkeypatch, distill)
    m = 2
    run = train_student(teacher_bank, MOPDConfig(steps=2, prompts_per_domain=2, topk=4, eval_every=0, track_steps=(),
                                                 golden_gain=GoldenGain(samples=m), experiment=None, progress=False))
    tok = teacher_bank.tokenizer
    stop = set(eos_ids(teacher_bank.model, tok))
    assert len(seen) == 2 * len(run.metrics)
    for row, anchor, explore in zip(run.metrics, seen[0::2], seen[1::2]):
        assert len(explore.examples) == m * len(anchor.examples) and anchor.prefill is None
        distinct = sum(prompt_tokens(tok, ex) for ex in anchor.examples)
        gen = sum(generated(anchor, stop)) + sum(generated(explore, stop))
        every_row = (1 + m) * distinct + gen
        assert row["cost/sample_prefill_tokens"] == 2 * distinct and row["cost/generated_tokens"] == gen
        assert row["cost/teacher_prefill_tokens"] == row["cost/trained_tokens"] == every_row
        assert row["cost/loss_tokens"] == gen


@pytest.mark.parametrize("loss", ["ce", "soft"])
def test_offline_counts_by_hand(loss, teacher_bank, monkeypatch):
    """RFT and soft labels: the step-0 row is the teachers' sampling (each distinct prompt
    prefilled once per sampling batch, every completion generated); each step trains on its
    batch's prompts and kept completions; soft labels also prefill that batch through the teachers."""
    from mopd_mini import offline
    seen = capture(monkeypatch, offline)
    cfg = OfflineConfig(loss=loss, prompts_per_domain=3, samples_per_prompt=2, steps=3, batch_size=4, keep="all",
                        collect_batch=4, eval_every=0, experiment=None, progress=False)
    data = collect(teacher_bank, cfg)
    tok = teacher_bank.tokenizer
    stop = set(eos_ids(teacher_bank.model, tok))
    prefill = sum(prompt_tokens(tok, ex) for r in seen for ex in {e.prompt: e for e in r.examples}.values())
    sampled = sum(sum(generated(r, stop)) for r in seen)
    assert len(seen) > 2                                   # several batches: a prompt's K samples share one
    assert data.cost == {"cost/sample_prefill_tokens": prefill, "cost/generated_tokens": sampled}
    run = train_offline(teacher_bank, cfg, data)
    assert run.metrics[0]["cost/sample_prefill_tokens"] == prefill
    assert run.metrics[0]["cost/generated_tokens"] == sampled
    kept = data.kept("all")
    trained = 0
    for row in run.metrics[1:]:
        batch = [kept[i] for i in batch_indices(len(kept), cfg.batch_size, row["step"], cfg.seed)]
        tokens = sum(prompt_tokens(tok, data.examples[i]) + len(data.completions[i]) for i in batch)
        assert row["cost/trained_tokens"] == tokens
        assert row["cost/loss_tokens"] == sum(len(data.completions[i]) for i in batch)
        assert row.get("cost/teacher_prefill_tokens", 0) == (tokens if loss == "soft" else 0)
        trained += tokens
    hand = {"sample_prefill": prefill, "generated": sampled, "trained": trained,
            "teacher_prefill": trained if loss == "soft" else 0}
    check_totals(run, hand)
    assert cost.flops(cost.totals(run.metrics), *cost.param_counts(teacher_bank, cfg.adapter)) == by_hand_flops(
        teacher_bank, cfg.adapter, prefill + sampled + hand["teacher_prefill"], trained)


def test_a_reloaded_teacher_reports_the_counters_that_wrote_it(tiny, monkeypatch, tmp_path):
    """A teacher trained into runs/, then reloaded by a second train_grpo call on a fresh bank:
    the reload trains nothing and reports the same metrics, totals and seconds, which equal the
    hand count of the run that wrote them."""
    from mopd_mini import grpo
    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path)
    model, tok = tiny
    cfg = dict(domain="binding", steps=3, prompts_per_step=2, group_size=3, eval_every=0, experiment="ledger",
               checkpoint_every=2, progress=False)
    first_bank = AdapterBank(copy.deepcopy(model), tok)
    seen = capture(monkeypatch, grpo)
    first = train_grpo(first_bank, GRPOConfig(**cfg))
    hand = grpo_hand_count(tok, set(eos_ids(first_bank.model, tok)), seen, first.metrics)
    seen.clear()
    again = train_grpo(AdapterBank(copy.deepcopy(model), tok), GRPOConfig(**cfg))
    assert not seen and not again.trained                  # reloaded: nothing sampled, nothing trained
    assert again.metrics == first.metrics and again.seconds == first.seconds
    assert again.count_version == first.count_version == cost.COUNT_VERSION
    check_totals(again, hand)
    ckpt = tmp_path / "ledger" / "teacher_binding" / "checkpoint.pt"    # as a checkpoint from before the
    state = torch.load(ckpt, weights_only=True)                          # rename: its version under "ledger"
    state["ledger"] = state.pop("count_version") - 1
    torch.save(state, ckpt)
    old = train_grpo(AdapterBank(copy.deepcopy(model), tok), GRPOConfig(**cfg))
    assert not old.trained and old.count_version == cost.COUNT_VERSION - 1


def test_the_count_version_reads_records_of_either_name_and_its_old_names_warn():
    """cost.LEDGER was renamed COUNT_VERSION (a version number, not the counting), Run.ledger
    Run.count_version, a record's key "ledger" "count_version": records keep the key they were written
    with (`count_version_of` reads either); the old names work for one release, with a warning."""
    assert cost.count_version_of({"count_version": 2}) == 2 and cost.count_version_of({"ledger": 1}) == 1
    assert cost.count_version_of({"ledger": None}) is None and cost.count_version_of({}, 0) == 0
    with pytest.warns(DeprecationWarning, match=r"importing LEDGER from mopd_mini.cost is deprecated.*"
                                                r"use mopd_mini.cost.COUNT_VERSION"):
        assert cost.LEDGER == cost.COUNT_VERSION
    with pytest.warns(DeprecationWarning, match=r"Run.ledger is deprecated.*Run.count_version"):
        assert runs.Run(None, {}, count_version=1).ledger == 1


# the formula and the counters' parts, on hand-made inputs


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


def test_method_costs_are_the_stage_and_the_pipeline_with_their_flops():
    """A method's stage is its own totals; its pipeline adds what it needs (each as given); both get
    their FLOPs at the method's N and n; other keys (seconds) are summed and left out of the FLOPs."""
    total = {"cost/sample_prefill_tokens": 10, "cost/generated_tokens": 5, "cost/teacher_prefill_tokens": 7,
             "cost/trained_tokens": 3}
    teacher = {"cost/generated_tokens": 4, "cost/trained_tokens": 1, "seconds": 2.0}
    stage, pipe = cost.method_costs({**total, "seconds": 1.0}, [teacher, teacher], N=100, n=4)
    assert stage == {**total, "seconds": 1.0, "flops": (200 + 8) * 22 + (400 + 24) * 3}
    assert pipe == {**cost.add(total, teacher, teacher), "seconds": 5.0, "flops": (200 + 8) * 30 + (400 + 24) * 5}
    alone = {**total, "flops": stage["flops"]}
    assert cost.method_costs(total, [], N=100, n=4) == (alone, alone)           # nothing needed: pipeline = stage


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


@pytest.mark.parametrize("prefix", ["teacher", "gold"])
def test_mopd_off_policy_steps_count_the_teachers_generation_by_hand(prefix, teacher_bank, monkeypatch):
    """GKD's lmbda < 1: on an off-policy step each domain's teacher samples its own prompts (a
    sampler prefill of its distinct prompts, its generated tokens), the teachers score and the
    student trains prompt + completion of every row (no prefill once: the student sampled
    nothing); gold prefixes sample nothing. On-policy steps count as in every MOPD run."""
    from mopd_mini import distill
    seen = capture(monkeypatch, distill)
    cfg = MOPDConfig(loss="kl", lmbda=0.5, lmbda_prefix=prefix, steps=5, prompts_per_domain=2, topk=4,
                     eval_every=0, track_steps=(), experiment=None, progress=False)
    draws = [distill.on_policy(cfg, step) for step in range(1, 6)]
    assert True in draws and False in draws                   # both kinds of step in this run
    run = train_student(teacher_bank, cfg)
    tok = teacher_bank.tokenizer
    stop = set(eos_ids(teacher_bank.model, tok))
    hand = {"sample_prefill": 0, "generated": 0, "teacher_prefill": 0, "trained": 0}
    for row, on in zip(run.metrics, draws):
        assert row["on_policy"] == float(on)
        if on:
            rollout = seen.pop(0)
            assert rollout.prefill is not None
            prompts, gen, sampler = sum(prompt_tokens(tok, ex) for ex in rollout.examples), sum(generated(rollout, stop)), 0
            trained = prompts + gen
        elif prefix == "teacher":
            parts = [seen.pop(0), seen.pop(0)]                 # one sampling per domain, by its teacher
            assert [{ex.task for ex in r.examples} for r in parts] == [{"binding"}, {"recall"}]
            assert all(r.prefill is None for r in parts)
            prompts = sum(prompt_tokens(tok, ex) for r in parts for ex in r.examples)
            gen = sum(sum(generated(r, stop)) for r in parts)
            sampler, trained = prompts, prompts + gen           # each prompt distinct: prefilled once
        else:
            examples = run_examples(row["step"])
            prompts = sum(prompt_tokens(tok, ex) for ex in examples)
            gen = sum(len(tok(ex.answer, add_special_tokens=False)["input_ids"]) + 1 for ex in examples)
            sampler, trained = 0, prompts + gen
        n_gen = gen if (on or prefix == "teacher") else 0
        assert row["cost/sample_prefill_tokens"] == sampler and row["cost/generated_tokens"] == n_gen
        assert row["cost/teacher_prefill_tokens"] == prompts + gen
        assert row["cost/trained_tokens"] == trained and row["cost/loss_tokens"] == gen
        hand["sample_prefill"] += sampler
        hand["generated"] += n_gen
        hand["teacher_prefill"] += prompts + gen
        hand["trained"] += trained
    assert not seen
    check_totals(run, hand)


def run_examples(step: int) -> list:
    """The prompts train_student draws at `step` (seed 0, 2 per domain), domain by domain."""
    from mopd_mini.domains import get_domains
    return [ex for d in get_domains(("binding", "recall")).values() for ex in d.train_examples(step, 2, 0)]
