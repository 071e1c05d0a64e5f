"""studies.baselines' Bench and the cost ledger: it reloads its teachers with the counters of the
run that trained them, and warns when a teacher was counted by older code (the hand counts are
tests/test_cost.py's)."""

import pytest
import torch

from mopd_mini import cost, runs
from mopd_mini.rollout import eos_ids
from tests.test_cost import capture, check_totals, grpo_hand_count


def test_a_run_counted_by_older_code_says_so(tiny, monkeypatch, tmp_path):
    """A checkpoint written before the cost counting was versioned (no "count_version", nor its old
    name "ledger", in it) reloads as count version 0, and the baselines' Bench warns when its teachers
    are such runs: a study cannot mix their counters with today's without knowing."""
    from studies import baselines
    monkeypatch.delenv("MOPD_FAST", raising=False)
    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path)
    baselines.Bench(baselines.QUICK, "old", progress=False)
    for ckpt in tmp_path.glob("old/*/teacher_*/checkpoint.pt"):
        state = torch.load(ckpt, weights_only=True)
        del state["count_version"]
        torch.save(state, ckpt)
    with pytest.warns(UserWarning, match="older than today's"):
        bench = baselines.Bench(baselines.QUICK, "old", progress=False)
    assert {t.count_version for t in bench.teachers.values()} == {0}


def test_the_baselines_bench_reloads_its_teachers_counters(monkeypatch, tmp_path):
    """studies.baselines' Bench trains its teachers once and every later Bench (another seed's run,
    a worker process, a re-run) reloads them: the reloaded teachers' counters equal the hand count
    of the training run, so every pipeline's teacher share is counted by the code that trained them."""
    from studies import baselines, study
    from mopd_mini import grpo
    monkeypatch.delenv("MOPD_FAST", raising=False)
    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path)
    seen = capture(monkeypatch, grpo)
    first = baselines.Bench(baselines.QUICK, "ledger", progress=False)
    tok = first.bank.tokenizer
    stop = set(eos_ids(first.bank.model, tok))
    per_domain = {}
    for d in baselines.DOMAINS:
        steps = len(first.teachers[d].metrics)
        per_domain[d] = grpo_hand_count(tok, stop, seen[:steps], first.teachers[d].metrics)
        del seen[:steps]
    seen.clear()
    again = baselines.Bench(baselines.QUICK, "ledger", progress=False)
    assert not seen
    for d in baselines.DOMAINS:
        assert not again.teachers[d].trained
        assert again.teachers[d].metrics == first.teachers[d].metrics
        check_totals(again.teachers[d], per_domain[d])
    stage, pipe = study.stage_and_pipeline(again, baselines.needs("mopd_pg"), study.Result("x", None, {}, 0.0))
    both = cost.add(*(cost.totals(again.teachers[d].metrics) for d in baselines.DOMAINS))
    assert {k: pipe[k] for k in both} == both               # MOPD's pipeline: both teachers, counted once each
