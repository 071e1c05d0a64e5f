"""Tests for the data of mopd_mini.pretrain (the stage-1 training of the tiny base, which the course
never re-runs: the training itself is not run here): the induction pairs, the FactWorld pairs in the
chat format, the padding, and a batch that is a pure function of (step, seed)."""

import random

import factworld
import torch

from mopd_mini.pretrain import IGNORE, PretrainConfig, batch, collate, factworld_pair, induction_pair


def test_an_induction_pair_grades_only_the_predictable_part_of_the_repeat():
    cfg = PretrainConfig(induction_span=(3, 5), induction_gap=(0, 2))
    for seed in range(20):
        ids, labels = induction_pair(random.Random(seed), list(range(100, 140)), cfg)
        n = next(k for k in range(3, 6) for g in range(0, 3) if len(ids) == 2 * k + g and ids[:k] == ids[-k:])
        assert len(labels) == len(ids) and all(100 <= i < 140 for i in ids)
        graded = [i for i, y in enumerate(labels) if y != IGNORE]
        assert graded == list(range(len(ids) - n + 1, len(ids)))            # the repeat, but its first token
        assert [labels[i] for i in graded] == ids[-n + 1:]


def test_a_factworld_pair_grades_the_answer_and_its_end(tok):
    ex = factworld.generate("recall", "train", n=1, length=4)[0]
    ids, labels = factworld_pair(tok, ex)
    answer = tok(ex.answer, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    assert ids[-len(answer):] == answer and labels[-len(answer):] == answer
    assert set(labels[:-len(answer)]) == {IGNORE}
    prompt = tok.apply_chat_template([{"role": "user", "content": ex.prompt}], add_generation_prompt=True,
                                     tokenize=False)
    assert tok.decode(ids[:-len(answer)]).replace(" ", "") == prompt.replace(" ", "")


def test_collate_right_pads_with_the_pad_id_and_ignored_labels():
    ids, labels, mask = collate([([1, 2, 3], [IGNORE, 2, 3]), ([4], [4])], pad_id=0)
    assert ids.tolist() == [[1, 2, 3], [4, 0, 0]]
    assert labels.tolist() == [[IGNORE, 2, 3], [4, IGNORE, IGNORE]]
    assert mask.tolist() == [[1, 1, 1], [1, 0, 0]]


def test_a_batch_is_a_pure_function_of_step_and_seed(tok):
    cfg = PretrainConfig(batch_size=8)
    entity = list(range(10, 40))
    first, again = batch(3, tok, entity, cfg), batch(3, tok, entity, cfg)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not torch.equal(first[0], batch(4, tok, entity, cfg)[0])
    other = PretrainConfig(batch_size=8, seed=cfg.seed + 1)
    assert not torch.equal(first[0], batch(3, tok, entity, other)[0])
    assert first[0].shape[0] == 8 and (first[2].sum(1) > 0).all()
