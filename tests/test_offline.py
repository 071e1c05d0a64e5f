"""Tests for the offline baselines (mopd_mini.offline): the teachers' samples, rejection sampling,
the packed layout, and that RFT and soft-label distillation learn what they are trained on."""

import copy
import json
from dataclasses import replace

import pytest
import torch

import factworld
from mopd_mini import AdapterBank, runs
from mopd_mini.losses import cross_entropy, forward_kl
from mopd_mini.config import OfflineConfig
from mopd_mini.offline import batch_indices, collect, train_offline
from mopd_mini.rollout import completion_logits, pack, sample
from mopd_mini import routing


def config(**overrides):
    """A small offline run: 6 prompts per domain, K = 4, in memory."""
    return OfflineConfig(**{**dict(prompts_per_domain=6, samples_per_prompt=4, steps=3, batch_size=8,
                                   eval_every=0, experiment=None, progress=False), **overrides})


@pytest.fixture(scope="module")
def offline_bank(tiny, add_teachers):
    """A bank with two distinct perturbed teachers, and what they sampled (module-scoped: reused)."""
    bank = add_teachers(AdapterBank(copy.deepcopy(tiny[0]), tiny[1]))
    return bank, collect(bank, config())


def test_collect_samples_k_per_prompt_from_each_domains_teacher(offline_bank):
    """Every domain's first P training prompts, K samples each, in domain order; graded."""
    bank, data = offline_bank
    assert len(data.completions) == 2 * 6 * 4
    assert data.counts().keys() == {"binding", "recall"}
    for d in ("binding", "recall"):
        exs = [e for e in data.examples if e.task == d]
        assert [e.index for e in exs[::4]] == list(range(6)) and all(e.split == "train" for e in exs)
        assert data.counts()[d]["sampled"] == 24
    assert data.cost["cost/generated_tokens"] == sum(map(len, data.completions))


def test_rejection_sampling_keeps_only_correct_completions(offline_bank):
    """RFT's training set: every kept completion decodes to the gold answer and ends with EOS;
    every dropped one does not. keep="all" keeps every sample."""
    bank, data = offline_bank
    tok = bank.tokenizer
    kept = set(data.kept("correct"))
    assert 0 < len(kept) < len(data.completions), "the perturbed teachers should be right only sometimes"
    for i, (ex, ids) in enumerate(zip(data.examples, data.completions)):
        right = factworld.score(tok.decode(ids, skip_special_tokens=True), ex.answer) == 1 and ids[-1] == tok.eos_token_id
        assert (i in kept) == right
    assert data.kept("all") == list(range(len(data.completions)))
    counts = data.counts()
    assert sum(c["correct"] for c in counts.values()) == len(kept)


def test_pack_lays_out_completions_as_sample_does(offline_bank):
    """The packed (teacher-forced) rollout gives the same logits at the completion positions as
    the sampled rollout it came from: same prompt format, padding and positions."""
    bank, _ = offline_bank
    exs = factworld.generate("binding", "train", n=3, length=8) + factworld.generate("recall", "train", n=3, length=12)
    with bank.use("teacher_binding") as model:
        rollout = sample(model, bank.tokenizer, exs, max_new_tokens=4, generator=torch.Generator().manual_seed(0))
        comps = [rollout.completion_ids[b, :int(rollout.completion_mask[b].sum())].tolist() for b in range(len(exs))]
        packed = pack(model, bank.tokenizer, exs, comps)
        a, b = completion_logits(model, rollout), completion_logits(model, packed)
    C = packed.completion_mask.shape[1]
    assert torch.equal(packed.completion_mask, rollout.completion_mask[:, :C])
    m = packed.completion_mask.bool()
    torch.testing.assert_close(b[m], a[:, :C][m], atol=1e-5, rtol=1e-5)
    assert torch.equal(packed.ended, rollout.ended)
    with pytest.raises(ValueError, match="completions"):
        pack(bank.model, bank.tokenizer, exs, comps[:2])


def test_batches_walk_seeded_epochs():
    """Each epoch visits every kept sample once, in a seeded order that differs between epochs."""
    n, bs = 10, 4
    seq = [i for step in range(1, 6) for i in batch_indices(n, bs, step, seed=3)]   # 20 = 2 epochs
    assert sorted(seq[:10]) == list(range(10)) and sorted(seq[10:]) == list(range(10))
    assert seq[:10] != seq[10:]
    assert batch_indices(n, bs, 4, seed=3) == seq[12:16]            # a pure function of the step


@pytest.mark.parametrize("loss", ["ce", "soft"])
def test_offline_student_learns_its_own_objective(offline_bank, loss):
    """30 steps on a tiny kept set lower the objective on that set (CE for RFT, forward KL to the
    routed teacher for soft labels); teachers never move; the student starts at the base."""
    bank, data = offline_bank
    before = {t: bank.state(t) for t in ("teacher_binding", "teacher_recall")}
    cfg = config(loss=loss, steps=30, lr=1e-3)
    kept = data.kept()
    exs, comps = [data.examples[i] for i in kept], [data.completions[i] for i in kept]

    def objective(name):
        with bank.use(name) as model:
            packed = pack(model, bank.tokenizer, exs, comps)
            logits = completion_logits(model, packed)
            if loss == "ce":
                return cross_entropy(logits, packed.completion_ids, packed.completion_mask)[0].item()
            teacher = routing.teacher_outputs(bank, packed, cfg.route, k=1).logits
            return forward_kl(logits, teacher, packed.completion_mask)[0].item()

    at_base = objective("base")
    run = train_offline(bank, cfg, data)
    assert run.metrics[0]["step"] == 0 and run.metrics[0]["kept"] == len(kept)
    assert [r["step"] for r in run.metrics[1:]] == list(range(1, 31))
    assert objective(cfg.adapter) < 0.5 * at_base
    for t, state in before.items():
        assert all(torch.equal(v, bank.state(t)[k]) for k, v in state.items())
    if loss == "soft":
        assert all(r["cost/teacher_prefill_tokens"] == r["cost/trained_tokens"] for r in run.metrics[1:])
    else:
        assert all("cost/teacher_prefill_tokens" not in r for r in run.metrics[1:])


def test_collect_is_cached_by_teacher_weights(offline_bank, tmp_path, monkeypatch, perturb):
    """With an experiment, the samples are stored once and reloaded (RFT and soft share them);
    other teacher weights make another set."""
    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path)
    from mopd_mini import offline
    bank, data = offline_bank
    cfg = config(experiment="x")
    first = collect(bank, cfg)
    assert first.completions == data.completions                   # same seed, same samples
    files = list((tmp_path / "x" / "collect").iterdir())
    assert len(files) == 1
    calls = []
    monkeypatch.setattr(offline, "sample", lambda *a, **k: calls.append(1))
    assert collect(bank, cfg).completions == first.completions and not calls   # reloaded, not resampled
    saved = bank.state("teacher_recall")
    perturb(bank, "teacher_recall", seed=7)
    monkeypatch.undo()
    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path)
    collect(bank, cfg)
    assert len(list((tmp_path / "x" / "collect").iterdir())) == 2
    bank.load_state("teacher_recall", saved)


@pytest.mark.parametrize("bad, words", [(dict(loss="dpo"), "loss"), (dict(keep="some"), "keep"),
                                        (dict(samples_per_prompt=0), "samples_per_prompt"),
                                        (dict(name="teacher_recall"), "teacher")])
def test_offline_refuses_bad_configs(offline_bank, bad, words):
    bank, data = offline_bank
    with pytest.raises(ValueError, match=words):
        train_offline(bank, config(**bad), data)


def test_the_old_loss_name_sft_warns_and_reads_ce():
    """OfflineConfig's loss "sft" was renamed "ce" (cross-entropy on whatever data it is given: RFT's
    kept samples, or gold): the old value works for one release, with a DeprecationWarning."""
    with pytest.warns(DeprecationWarning, match=r"loss='sft'.*write loss='ce'"):
        cfg = config(loss="sft")
    assert cfg.loss == "ce" and cfg.adapter == "rft"
    with pytest.warns(DeprecationWarning):
        assert replace(config(), loss="sft").loss == "ce"


def test_a_run_saved_with_the_old_loss_name_is_the_same_run(offline_bank, tmp_path, monkeypatch):
    """A run saved before loss "sft" was renamed "ce" (its checkpoint and config.json say "sft"): the
    same settings today reload it when it is finished (its record as it was written) and resume it
    when they ask for more steps; another loss is still another run."""
    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path)
    bank, data = offline_bank
    cfg = config(experiment="old", steps=2, name="rft_old")
    first = train_offline(bank, cfg, data)
    folder = tmp_path / "old" / "rft_old"
    state = torch.load(folder / "checkpoint.pt", weights_only=True)
    state["config"]["loss"] = "sft"
    torch.save(state, folder / "checkpoint.pt")
    (folder / "config.json").write_text(json.dumps({**json.loads((folder / "config.json").read_text()), "loss": "sft"},
                                                   indent=1))
    again = train_offline(bank, cfg, data)
    assert not again.trained and again.metrics == first.metrics and again.config["loss"] == "sft"
    longer = train_offline(bank, replace(cfg, steps=3), data)
    assert longer.trained and longer.metrics[:len(first.metrics)] == first.metrics and len(longer.metrics) == 4
    with pytest.raises(ValueError, match=r"another config \(loss: saved 'ce', now 'soft'\)"):
        train_offline(bank, replace(cfg, steps=3, loss="soft"), data)
    bank._drop("rft_old")                                           # the module's bank as it was


def test_offline_needs_the_teachers(bank):
    with pytest.raises(ValueError, match="teacher_binding"):
        collect(bank, config())


def test_gold_is_the_generators_answers_one_per_prompt(tiny):
    """gold: each domain's first P training prompts (those collect samples), once each, with the
    answer's tokens and the end of turn (chain: the whole worked trace), all correct; a budget too
    small for a trace is refused."""
    from mopd_mini.domains import get_domains
    from mopd_mini.offline import gold

    tok = tiny[1]
    cfg = config(domains=("chain", "memory"), prompts_per_domain=5, max_new_tokens=8)
    data = gold(tok, cfg)
    assert len(data.completions) == 10 and data.correct == [1.0] * 10 and data.cost == {}
    for d in ("chain", "memory"):
        exs = [e for e in data.examples if e.task == d]
        assert [e.prompt for e in exs] == [e.prompt for e in get_domains(d)[d].train_examples(0, 5, 0)]
    for ex, ids in zip(data.examples, data.completions):
        assert ids[-1] == tok.eos_token_id
        assert tok.decode(ids, skip_special_tokens=True).strip() == ex.answer
        assert factworld.grade(tok.decode(ids, skip_special_tokens=True), ex) == 1
    chain = [c for e, c in zip(data.examples, data.completions) if e.task == "chain"]
    assert max(map(len, chain)) > 4                                 # a trace, not one word
    assert data.kept("correct") == list(range(10))
    with pytest.raises(ValueError, match="max_new_tokens"):
        gold(tok, config(domains=("chain",), prompts_per_domain=5, max_new_tokens=4))


def test_sft_on_gold_learns_the_gold_traces(tiny):
    """The offline trainer on gold (the regime study's SFT teacher): 30 steps raise the gold
    trace's likelihood well above the base's."""
    from mopd_mini.offline import gold

    bank = AdapterBank(copy.deepcopy(tiny[0]), tiny[1])
    cfg = config(domains=("chain",), prompts_per_domain=8, max_new_tokens=8, steps=30, name="sft_gold")
    data = gold(bank.tokenizer, cfg)

    def nll(name):
        with bank.use(name) as model:
            packed = pack(model, bank.tokenizer, data.examples, data.completions)
            return cross_entropy(completion_logits(model, packed), packed.completion_ids, packed.completion_mask)[0].item()

    at_base = nll("base")
    run = train_offline(bank, cfg, data)
    assert run.metrics[0]["kept"] == 8 and run.metrics[0].get("cost/generated_tokens", 0) == 0
    assert nll("sft_gold") < 0.5 * at_base


def test_offline_routes_a_domain_to_a_named_teacher(offline_bank):
    """teachers={"recall": X}: collect samples recall from X (the samples of X's weights, as the
    teacher_recall run gives when X holds them), binding from teacher_binding; an unknown domain
    in teachers and a missing routed teacher are refused."""
    bank, data = offline_bank
    bank.copy("teacher_recall", "other_recall")
    routed = collect(bank, config(teachers={"recall": "other_recall"}))
    assert config(teachers={"recall": "other_recall"}).route == {"binding": "teacher_binding", "recall": "other_recall"}
    assert routed.completions == data.completions                   # the same weights, the same samples
    bank.copy("teacher_binding", "other_recall")                    # other weights: other recall samples
    other = collect(bank, config(teachers={"recall": "other_recall"}))
    rec = [i for i, e in enumerate(data.examples) if e.task == "recall"]
    assert [other.completions[i] for i in rec] != [data.completions[i] for i in rec]
    with pytest.raises(ValueError, match="not in domains"):
        collect(bank, config(teachers={"chain": "other_recall"}))
    with pytest.raises(ValueError, match="no 'nobody'"):
        collect(bank, config(teachers={"recall": "nobody"}))
    bank._drop("other_recall")                                      # the module's bank as it was
