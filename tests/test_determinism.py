"""Determinism: the same seed twice gives byte-identical metric files (metrics.jsonl, and MOPD's
trace.json), on fresh banks; another seed gives different ones. Both trainers, a few steps each,
with evaluation and tracking on so that every logged number is compared."""

import copy

import pytest

from mopd_mini import AdapterBank, GRPOConfig, MOPDConfig, runs, train_grpo, train_student

FILES = {"teacher": ("metrics.jsonl",), "student": ("metrics.jsonl", "trace.json")}


@pytest.fixture
def train(tiny, add_teachers, tmp_path, monkeypatch):
    """train(kind, seed, tag): a short run on a fresh bank under tmp/<tag>/; returns {file: bytes}."""

    def run(kind, seed, tag):
        monkeypatch.setattr(runs, "RUNS_DIR", tmp_path / tag)
        bank = AdapterBank(copy.deepcopy(tiny[0]), tiny[1])
        common = dict(steps=4, seed=seed, eval_every=2, eval_n=4, experiment="det", progress=False)
        if kind == "teacher":
            result = train_grpo(bank, GRPOConfig(domain="binding", prompts_per_step=4, group_size=4, **common))
        else:
            add_teachers(bank)  # fixed teachers: the seed under test is the student's
            result = train_student(bank, MOPDConfig(prompts_per_domain=2, topk=8, track_steps=(1, 4),
                                                    track_prompts=2, **common))
        return {name: (result.dir / name).read_bytes() for name in FILES[kind]}

    return run


@pytest.mark.parametrize("kind", ["teacher", "student"])
def test_same_seed_same_files_other_seed_other_files(train, kind):
    """Seed 0 twice: identical bytes in every metric file. Seed 1: every file differs."""
    first, again, other = train(kind, 0, "a"), train(kind, 0, "b"), train(kind, 1, "c")
    for name in FILES[kind]:
        assert first[name] == again[name], f"{name} differs between two runs with the same seed"
        assert first[name] != other[name], f"{name} is the same for seeds 0 and 1"
