"""Tests for mopd_mini.routing: routed scoring equals each teacher scoring its own rows, the two
execution modes agree, and the summaries are what their names say."""

import copy

import pytest
import torch

import factworld
from mopd_mini import BASE, AdapterBank, routing
from mopd_mini.rollout import completion_logits, sample

from tests.conftest import TEACHERS


@pytest.fixture
def rollout(tiny, mixed_examples):
    """Base-model samples on interleaved binding/recall prompts, rows of different lengths."""
    model, tok = tiny
    return sample(model, tok, mixed_examples * 2, temperature=3.0, max_new_tokens=5,
                  generator=torch.Generator().manual_seed(0))


# On the tiny base the routed pass multiplies by each teacher's folded weight W + s B A
# (routing.FOLDED_LIMIT), peft by W and then by B A: the same numbers up to fp32 rounding, which
# reaches 1e-5 relative on the larger logits. The low-rank routed pass matches peft to 1e-5 absolute.
FOLDED = dict(rtol=1e-5, atol=1e-5)


def assert_scores_close(a, b, rtol=0.0):
    """Two TeacherOutputs agree to 1e-5 (+ rtol relative; ids exactly)."""
    torch.testing.assert_close(a.logprobs, b.logprobs, rtol=rtol, atol=1e-5)
    assert torch.equal(a.topk_ids, b.topk_ids)
    torch.testing.assert_close(a.topk_logprobs, b.topk_logprobs, rtol=rtol, atol=1e-5)
    torch.testing.assert_close(a.logits, b.logits, rtol=rtol, atol=1e-5)


def test_teachers_differ(teacher_bank, rollout):
    """Precondition for the routing tests: the two teachers give different distributions."""
    binding = routing.teacher_outputs(teacher_bank, rollout, {"binding": "teacher_binding", "recall": "teacher_binding"})
    recall = routing.teacher_outputs(teacher_bank, rollout, {"binding": "teacher_recall", "recall": "teacher_recall"})
    assert (binding.logits - recall.logits).abs().max() > 1e-2


def test_mixed_and_swap_agree(teacher_bank, rollout):
    """One mixed-adapter forward and one forward per teacher give the same scores (fp32, 1e-5)."""
    mixed = routing.teacher_outputs(teacher_bank, rollout, TEACHERS, mode="mixed", k=8)
    swap = routing.teacher_outputs(teacher_bank, rollout, TEACHERS, mode="swap", k=8)
    assert mixed.logits.shape == rollout.completion_ids.shape + (teacher_bank.base.config.vocab_size,)
    assert mixed.topk_ids.shape == rollout.completion_ids.shape + (8,)
    assert_scores_close(mixed, swap, rtol=FOLDED["rtol"])


def test_the_low_rank_routed_pass_agrees_to_1e5(teacher_bank, rollout, monkeypatch):
    """Without folded weights (a base over FOLDED_LIMIT, e.g. Qwen3-1.7B's) the routed pass adds each
    teacher's low-rank update to the shared base matmul, and agrees with swap to 1e-5 absolute."""
    monkeypatch.setattr(routing, "FOLDED_LIMIT", -1)
    assert routing.folded_weights(teacher_bank, routing.lora_layers(teacher_bank), sorted(TEACHERS.values())) is None
    mixed = routing.teacher_outputs(teacher_bank, rollout, TEACHERS, mode="mixed", k=8)
    swap = routing.teacher_outputs(teacher_bank, rollout, TEACHERS, mode="swap", k=8)
    assert_scores_close(mixed, swap)


def test_folded_weights_follow_a_changed_teacher(teacher_bank, rollout, perturb):
    """The folded weights are a cache: after a teacher's adapter changes (here its weights are
    perturbed in place, as a load or an optimizer step would), routed scores follow the new adapter."""
    before = routing.teacher_outputs(teacher_bank, rollout, TEACHERS, mode="mixed", k=8)
    perturb(teacher_bank, "teacher_recall", seed=99)
    after = routing.teacher_outputs(teacher_bank, rollout, TEACHERS, mode="mixed", k=8)
    swap = routing.teacher_outputs(teacher_bank, rollout, TEACHERS, mode="swap", k=8)
    assert (after.logits - before.logits).abs().max() > 1e-3
    assert_scores_close(after, swap, rtol=FOLDED["rtol"])


@pytest.mark.parametrize("mode", ["mixed", "swap"])
def test_each_row_is_scored_by_its_own_teacher(teacher_bank, rollout, mode):
    """Routed scores equal, per domain, that domain's teacher scoring its rows alone."""
    routed = routing.teacher_outputs(teacher_bank, rollout, TEACHERS, mode=mode, k=8)
    for domain, teacher in TEACHERS.items():
        rows = [i for i, d in enumerate(rollout.domains) if d == domain]
        assert rows
        with teacher_bank.use(teacher) as model, torch.no_grad():
            alone = completion_logits(model, rollout.rows(rows))
        torch.testing.assert_close(routed.logits[rows], alone, **FOLDED)


def test_sampled_logprob_and_topk_are_the_log_softmax(teacher_bank, rollout):
    """logprobs = log_softmax(logits) at the sampled token; topk = the k largest of log_softmax."""
    scores = routing.teacher_outputs(teacher_bank, rollout, TEACHERS, k=5)
    log_p = torch.log_softmax(scores.logits.double(), -1)                       # (B, C, V)
    at_token = log_p.gather(-1, rollout.completion_ids[..., None])[..., 0]
    torch.testing.assert_close(scores.logprobs.double(), at_token, rtol=0, atol=1e-5)
    top = log_p.topk(5, dim=-1)
    torch.testing.assert_close(scores.topk_logprobs.double(), top.values, rtol=0, atol=1e-5)
    assert torch.equal(scores.topk_ids, top.indices)
    assert (scores.topk_logprobs[..., :-1] >= scores.topk_logprobs[..., 1:]).all()  # sorted, largest first


def test_full_false_drops_the_logits(teacher_bank, rollout):
    """full=False returns no (B, C, V) tensor but the same log-probs and top-k."""
    full = routing.teacher_outputs(teacher_bank, rollout, TEACHERS, k=4)
    lean = routing.teacher_outputs(teacher_bank, rollout, TEACHERS, k=4, full=False)
    assert lean.logits is None
    assert torch.equal(lean.logprobs, full.logprobs) and torch.equal(lean.topk_ids, full.topk_ids)


def test_scoring_keeps_the_train_flag_and_the_active_adapter(teacher_bank, rollout, perturb):
    """teacher_outputs() runs in eval mode and leaves the model's train/eval flag and active adapter as they were."""
    teacher_bank.create("student", seed=0)
    perturb(teacher_bank, "student", seed=3)
    with teacher_bank.use("student", trainable=True) as model, torch.no_grad():
        before = completion_logits(model, rollout)
        model.train()
        for mode in ("mixed", "swap"):
            routing.teacher_outputs(teacher_bank, rollout, TEACHERS, mode=mode)
            assert model.training
        model.eval()
        torch.testing.assert_close(completion_logits(model, rollout), before, rtol=0, atol=0)
        assert all(p.requires_grad for p in teacher_bank.parameters("student").values())


def test_a_domain_without_a_teacher_is_named(teacher_bank, rollout):
    """A batch domain missing from the route raises ValueError naming it."""
    with pytest.raises(ValueError, match="recall"):
        routing.teacher_outputs(teacher_bank, rollout, {"binding": "teacher_binding"})


def test_a_route_to_an_unknown_adapter_is_refused(teacher_bank, rollout):
    """A route to an adapter the bank does not hold raises ValueError."""
    with pytest.raises(ValueError, match="teacher_math"):
        routing.teacher_outputs(teacher_bank, rollout, {"binding": "teacher_binding", "recall": "teacher_math"})


def test_unknown_mode_is_refused(teacher_bank, rollout):
    """mode must be mixed or swap."""
    with pytest.raises(ValueError, match="mixed"):
        routing.teacher_outputs(teacher_bank, rollout, TEACHERS, mode="average")


@pytest.mark.parametrize("k", [0, 10_000])
def test_k_outside_the_vocabulary_is_refused(teacher_bank, rollout, k):
    """k must be in 1..V."""
    with pytest.raises(ValueError, match="vocabulary"):
        routing.teacher_outputs(teacher_bank, rollout, TEACHERS, k=k)


def test_routing_a_domain_to_the_base_works_in_both_modes(teacher_bank, rollout):
    """BASE is a valid route (bank.check accepts it): mixed and swap both score those rows with the base."""
    route = {"binding": BASE, "recall": "teacher_recall"}
    swap = routing.teacher_outputs(teacher_bank, rollout, route, mode="swap", k=8)
    mixed = routing.teacher_outputs(teacher_bank, rollout, route, mode="mixed", k=8)
    assert_scores_close(mixed, swap)


def test_mixed_equals_swap_on_the_full_qwen3_vocabulary(qwen_random, perturb):
    """On the shrunken random Qwen3 (V = 151,936), mixed and swap scoring agree to 1e-5."""
    model, tok = qwen_random
    bank = AdapterBank(copy.deepcopy(model), tok)
    for i, name in enumerate(TEACHERS.values()):
        bank.create(name, seed=i + 1)
        perturb(bank, name, seed=20 + i)
    examples = [factworld.generate("binding", "test", n=1, length=4)[0],
                factworld.generate("recall", "test", n=1, length=4)[0]] * 2
    rollout = sample(model, tok, examples, max_new_tokens=3, generator=torch.Generator().manual_seed(0))
    mixed = routing.teacher_outputs(bank, rollout, TEACHERS, mode="mixed", k=16)
    swap = routing.teacher_outputs(bank, rollout, TEACHERS, mode="swap", k=16)
    assert mixed.logits.shape[-1] == 151_936
    assert_scores_close(mixed, swap)
    log_p = torch.log_softmax(mixed.logits, -1).gather(-1, rollout.completion_ids[..., None])[..., 0]
    torch.testing.assert_close(mixed.logprobs, log_p, rtol=0, atol=1e-5)
