"""Tests for mopd_mini.rollout: masks and EOS, on-policy log-probs, padding invariance, seeding,
input checks, greedy answers and rewards."""

import pytest
import torch

import factworld
from mopd_mini.rollout import (Prompt, completion_logits, eos_ids, generate_answers, sample, token_logprobs)


def gen(seed):
    """A seeded CPU generator for sampling."""
    return torch.Generator().manual_seed(seed)


@pytest.fixture
def noisy(bank, perturb):
    """A bank whose active adapter `noisy` is far enough from the base that completion lengths vary."""
    bank.create("noisy", seed=3)
    perturb(bank, "noisy", seed=7, scale=0.05)  # measured: lengths 2-5, some never end
    return bank


def first_eos(row, stop):
    """Index of the first EOS in a 1-D id row, or None."""
    hits = torch.isin(row, stop).nonzero()
    return int(hits[0]) if len(hits) else None


def test_mask_ends_at_the_first_eos(noisy, mixed_examples):
    """completion_mask is 1 up to and including the first EOS and 0 after; after EOS a row is only
    padding; rows that never hit EOS run the whole budget. The attention mask agrees; `ended` marks
    exactly the rows that emitted EOS."""
    tok = noisy.tokenizer
    with noisy.use("noisy") as model:  # a perturbed adapter: completions of many lengths
        rollout = sample(model, tok, mixed_examples * 8, temperature=2.0, max_new_tokens=5, generator=gen(0))
    stop = torch.tensor(eos_ids(model, tok))
    ids, mask = rollout.completion_ids, rollout.completion_mask
    lengths = set()
    for b, (row, m) in enumerate(zip(ids, mask)):
        end = first_eos(row, stop)
        n = len(row) if end is None else end + 1
        lengths.add((n, end is None))
        assert bool(rollout.ended[b]) == (end is not None)
        assert m[:n].eq(1).all() and m[n:].eq(0).all()
        assert row[n:].eq(tok.pad_token_id).all()
    assert len(lengths) > 2  # the test saw rows ending at different places, with and without EOS
    assert torch.equal(rollout.attention_mask[:, rollout.prompt_len:].float(), mask)
    assert rollout.sample_logprobs[mask == 0].eq(0).all()


def test_greedy_rows_all_stop_at_eos(tiny, mixed_examples):
    """The trained base answers and stops: every greedy row holds exactly one EOS, as its last real token."""
    model, tok = tiny
    rollout = sample(model, tok, mixed_examples, greedy=True, max_new_tokens=8)
    stop = torch.tensor(eos_ids(model, tok))
    for row, m in zip(rollout.completion_ids, rollout.completion_mask):
        n = int(m.sum())
        assert torch.isin(row[:n], stop).sum() == 1 and torch.isin(row[n - 1], stop)


@pytest.mark.parametrize("temperature", [1.0, 3.0])
def test_sample_logprobs_match_the_recomputed_ones(noisy, mixed_examples, temperature):
    """sample_logprobs equal token_logprobs(completion_logits / T) on the masked tokens (1e-5): the
    scoring forward sees exactly what the sampler saw (to fp32 rounding, 5e-5)."""
    with noisy.use("noisy") as model:
        rollout = sample(model, noisy.tokenizer, mixed_examples * 3, temperature=temperature,
                         max_new_tokens=6, generator=gen(1))
        logits = completion_logits(model, rollout)
    assert rollout.completion_mask.sum(1).unique().numel() > 1  # rows of different lengths
    recomputed = token_logprobs(logits / temperature, rollout.completion_ids) * rollout.completion_mask
    # 5e-5: the cached decode and the full forward round differently in fp32; 1e-5 held on an Intel
    # Xeon, an AMD EPYC's kernels gave 1.2e-5 (measured); a wrong mask or offset is off by >0.1
    torch.testing.assert_close(rollout.sample_logprobs, recomputed, rtol=0, atol=5e-5)


def test_padding_does_not_change_a_row(tiny, mixed_examples):
    """A batch mixing prompt lengths (binding L8, recall L16) gives each row the same greedy completion
    and the same recomputed logits as that prompt alone (1e-5)."""
    model, tok = tiny
    batch = sample(model, tok, mixed_examples, greedy=True, max_new_tokens=6)
    assert batch.attention_mask[:, :batch.prompt_len].sum(1).unique().numel() > 1  # padding happened
    batch_logits = completion_logits(model, batch)
    for b, ex in enumerate(mixed_examples):
        alone = sample(model, tok, [ex], greedy=True, max_new_tokens=6)
        n = int(alone.completion_mask[0].sum())
        assert int(batch.completion_mask[b].sum()) == n
        assert torch.equal(batch.completion_ids[b, :n], alone.completion_ids[0, :n])
        # 5e-5, as above: padded and unpadded rows are different matmul shapes (1.05e-5 seen on an EPYC)
        torch.testing.assert_close(batch_logits[b, :n], completion_logits(model, alone)[0, :n], rtol=0, atol=5e-5)
        torch.testing.assert_close(batch.sample_logprobs[b, :n], alone.sample_logprobs[0, :n], rtol=0, atol=5e-5)


def test_padding_invariance_with_an_adapter(noisy, mixed_examples):
    """The same invariance through a peft model with an active adapter (row 0 alone vs in the batch)."""
    with noisy.use("noisy") as model:
        batch = sample(model, noisy.tokenizer, mixed_examples, greedy=True, max_new_tokens=6)
        logits = completion_logits(model, batch)
        for b in (0, 1):
            alone = sample(model, noisy.tokenizer, [mixed_examples[b]], greedy=True, max_new_tokens=6)
            n = int(alone.completion_mask[0].sum())
            assert torch.equal(batch.completion_ids[b, :n], alone.completion_ids[0, :n])
            torch.testing.assert_close(logits[b, :n], completion_logits(model, alone)[0, :n], rtol=0, atol=1e-5)


def test_greedy_is_deterministic(tiny, mixed_examples):
    """Two greedy runs give identical rollouts, whatever the global RNG does in between."""
    model, tok = tiny
    a = sample(model, tok, mixed_examples, greedy=True)
    torch.manual_seed(1234)
    b = sample(model, tok, mixed_examples, greedy=True)
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.completion_mask, b.completion_mask)


def test_seeded_sampling(tiny):
    """The same generator seed gives the same samples; different seeds differ on a batch of 64."""
    model, tok = tiny
    examples = (factworld.generate("binding", "test", n=32, length=8)
                + factworld.generate("recall", "test", n=32, length=12))
    a = sample(model, tok, examples, temperature=2.0, generator=gen(0))
    torch.manual_seed(99)  # the global RNG plays no part
    b = sample(model, tok, examples, temperature=2.0, generator=gen(0))
    c = sample(model, tok, examples, temperature=2.0, generator=gen(1))
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.sample_logprobs, b.sample_logprobs)
    assert a.input_ids.shape != c.input_ids.shape or not torch.equal(a.input_ids, c.input_ids)


@pytest.mark.parametrize("temperature", [0.0, -1.0])
def test_non_positive_temperature_is_refused(tiny, mixed_examples, temperature):
    """temperature <= 0 raises ValueError (greedy=True is the argmax); greedy ignores it."""
    model, tok = tiny
    with pytest.raises(ValueError, match="temperature"):
        sample(model, tok, mixed_examples, temperature=temperature)
    assert sample(model, tok, mixed_examples[:1], temperature=temperature, greedy=True).input_ids.shape[0] == 1


def test_empty_example_list_is_refused(tiny):
    """No examples raises ValueError in sample; generate_answers of no prompts is no answers."""
    with pytest.raises(ValueError, match="at least one"):
        sample(*tiny, [])
    assert generate_answers(*tiny, []) == []


def test_words_outside_the_vocabulary_are_named(tiny):
    """A prompt with words the tiny vocabulary lacks raises ValueError naming them."""
    model, tok = tiny
    with pytest.raises(ValueError, match="g500"):
        sample(model, tok, [Prompt("who is the final holder of g500?")], greedy=True)
    wide = factworld.generate("recall", "test", n=1, length=100, agent_pool=200, value_vocab=200)
    with pytest.raises(ValueError, match="vocabulary"):
        sample(model, tok, wide, greedy=True)


def test_prompt_longer_than_the_context_is_refused(tiny):
    """A prompt (or prompt + budget) beyond max_position_embeddings raises ValueError."""
    model, tok = tiny
    limit = model.config.max_position_embeddings
    with pytest.raises(ValueError, match="context"):
        sample(model, tok, [Prompt(" ".join(["g1"] * (limit + 10)))], greedy=True)
    with pytest.raises(ValueError, match="context"):
        sample(model, tok, [Prompt("g1")], greedy=True, max_new_tokens=limit)


def test_generate_answers_on_base_and_adapter(tiny, noisy, mixed_examples):
    """One answer string per prompt, the same in any chunking; on the peft model they follow the
    active adapter (a zero adapter answers like the base; a perturbed one like its own greedy sample)."""
    model, tok = tiny
    prompts = [ex.prompt for ex in mixed_examples]
    answers = generate_answers(model, tok, prompts)
    assert len(answers) == len(prompts) and all(isinstance(a, str) for a in answers)
    assert generate_answers(model, tok, prompts, batch_size=4) == answers
    assert answers == sample(model, tok, mixed_examples, greedy=True).texts(tok)

    noisy.create("zero", seed=0)
    with noisy.use("zero") as peft_model:
        assert generate_answers(peft_model, tok, prompts) == answers
    with noisy.use("noisy") as peft_model:
        adapted = generate_answers(peft_model, tok, prompts, batch_size=4)
        assert len(adapted) == len(prompts)
        assert adapted == sample(peft_model, tok, mixed_examples, greedy=True).texts(tok)


def test_rewards_are_factworld_scores_of_the_decoded_texts(tiny, mixed_examples):
    """Rollout.rewards equals factworld.score of each completion decoded up to its EOS."""
    model, tok = tiny
    examples = mixed_examples * 4
    rollout = sample(model, tok, examples, temperature=1.5, max_new_tokens=5, generator=gen(3))
    stop = torch.tensor(eos_ids(model, tok))
    expected = []
    for row, ex in zip(rollout.completion_ids, examples):
        end = first_eos(row, stop)
        text = tok.decode(row[:end] if end is not None else row, skip_special_tokens=True)
        expected.append(float(factworld.score(text, ex.answer)))
    rewards = rollout.rewards(tok)
    assert rewards.shape == (len(examples),)
    assert rewards.tolist() == expected
    assert rollout.texts(tok)[0] == tok.decode(rollout.completion_ids[0][rollout.completion_mask[0].bool()],
                                               skip_special_tokens=True)


def test_rows_sub_batch_scores_identically(noisy, mixed_examples):
    """rollout.rows(idx) keeps the columns, so its logits equal the full batch's rows exactly."""
    with noisy.use("noisy") as model:
        rollout = sample(model, noisy.tokenizer, mixed_examples, temperature=1.0, generator=gen(5))
        full = completion_logits(model, rollout)
        sub = rollout.rows([1, 4])
        assert sub.domains == [mixed_examples[1].task, mixed_examples[4].task]
        torch.testing.assert_close(completion_logits(model, sub), full[[1, 4]], rtol=0, atol=1e-5)


def test_min_new_tokens_forces_the_length_and_keeps_logprobs_on_policy(noisy, mixed_examples):
    """With min_new_tokens = C no row emits an end of turn before token C (the perturbed adapter
    otherwise stops after 2-5 tokens), so every completion is at least C long; the sample_logprobs
    are those of the distribution drawn from: the model's, renormalised without the stop tokens
    before C, and the model's own after."""
    tok, C = noisy.tokenizer, 6
    with noisy.use("noisy") as model:
        free = sample(model, tok, mixed_examples * 4, temperature=2.0, max_new_tokens=8, generator=gen(0))
        forced = sample(model, tok, mixed_examples * 4, temperature=2.0, max_new_tokens=8, min_new_tokens=C,
                        generator=gen(0))
        stop = torch.tensor(eos_ids(model, tok))
        assert free.completion_mask.sum(1).min() < C            # the option has something to change
        assert forced.completion_mask.sum(1).min() >= C
        assert not torch.isin(forced.completion_ids[:, :C], stop).any()
        logp = torch.log_softmax(completion_logits(model, forced).float() / 2.0, -1)
        early = logp[:, :C].index_fill(2, stop, -torch.inf)
        logp = torch.cat([early - early.logsumexp(-1, keepdim=True), logp[:, C:]], 1)
        expect = token_logprobs(logp, forced.completion_ids) * forced.completion_mask
    assert torch.allclose(forced.sample_logprobs, expect, atol=5e-5)


def test_min_new_tokens_outside_the_budget_is_refused(tiny, tok, mixed_examples):
    with pytest.raises(ValueError, match="min_new_tokens"):
        sample(tiny, tok, mixed_examples, max_new_tokens=4, min_new_tokens=5)
