"""bench.study's decisions, on a fake study whose runs are numbers (no model, no training): the
val grid picks the best mean normalised score; a best setting on the grid's edge is extended
past it; a choice within one val SE is decided by a second seed; a Pick takes the better method;
the test split is read once per method and seed, after every choice, and a run the choice
trained is reused, not trained again. (Reloading from disk is tests/test_bench_smoke.py's.)"""

import json
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from bench import study

VAL = {"a": {1: 0.50, 2: 0.60, 3: 0.70, 4: 0.65},        # best on the upper edge, then interior at 3
       "b": {1: 0.62, 2: 0.615}}                            # within one SE: seed 1 decides
VAL_SEED1 = {"b": {1: 0.55, 2: 0.66}}


@dataclass
class FakeRun:
    metrics: list = field(default_factory=list)
    seconds: float = 1.0
    ledger: int = study.cost.LEDGER


def accs(x):
    return {"binding": {16: x}, "recall": {16: x}}


def make(tmp_path, trained, read):
    """A study of methods a and b over settings {"lr": 1..}; every run's val accuracy is its last
    metrics row (val_from_run); the test accuracies come from the evals cache."""
    def train(m):
        def run(ctx, setting, seed):
            lr = setting["lr"]
            trained.append((m, lr, seed))
            x = (VAL_SEED1 if seed == 1 and m in VAL_SEED1 else VAL)[m][lr]
            row = {"step": 1, "cost/trained_tokens": 10, **{f"acc/{d}/L16": x for d in ("binding", "recall")}}
            return study.Result.of(f"{m}_{lr}_s{seed}", FakeRun([row]))
        return run

    def extend(best, tried):
        lrs = sorted(t["lr"] for t in tried)
        return {"lr": best["lr"] + 1} if best["lr"] == lrs[-1] and best["lr"] + 1 in VAL["a"] else None

    cache = {f"{a}|{s}|100": {d: {"16": v} for d, v in {"binding": b, "recall": b}.items()}
             for a, b in (("base", 0.0), ("teacher_binding", 1.0), ("teacher_recall", 1.0)) for s in ("val", "test")}
    cache.update({f"{m}_{lr}_s{seed}|test|100": {"binding": {"16": 0.1 * seed + lr / 10}, "recall": {"16": 0.5}}
                  for m in VAL for lr in VAL[m] for seed in range(3)})
    (tmp_path / "evals.json").write_text(json.dumps(cache))
    real_get = study.Evals.get

    def get(self, bank, name, split, n):
        read.append((name, split))
        return real_get(self, bank, name, split, n)

    ctx = SimpleNamespace(bank=None, teachers={}, N=100, n_lora=10, folder=tmp_path)
    methods = {"a": study.Method(train("a"), grid=[{"lr": 1}, {"lr": 2}, {"lr": 3}], scalar="lr", extend=extend),
               "b": study.Method(train("b"), grid=[{"lr": 1}, {"lr": 2}], scalar="lr")}
    return study.Study(module="unused", methods=methods, setup=lambda progress: ctx,
                       picks={"best": study.Pick({"a": "A", "b": "B"})}, tie_break=1), get


def test_the_runner_chooses_brackets_breaks_ties_and_tests_once(tmp_path, monkeypatch):
    trained, read = [], []
    declared, get = make(tmp_path, trained, read)
    monkeypatch.setattr(study.Evals, "get", get)
    rep = study.run(declared, seeds=[0, 1], n=100, val_n=100, quiet=True,
                    summarise=lambda ctx, state: {"chosen": dict(state.chosen), "grid": state.grid,
                                                  "rows": study.rows(declared, ctx, state)})
    assert [g["lr"] for g in rep["grid"]["a"]] == [1, 2, 3, 4] and rep["grid"]["a"][-1]["extended"]
    assert rep["chosen"]["a"] == 3                                   # bracketed: 4 was worse
    b = {g["lr"]: g for g in rep["grid"]["b"]}
    assert b[1]["mean"] > b[2]["mean"] and b[2]["mean2"] > b[1]["mean2"]
    assert rep["chosen"]["b"] == 2                                   # the second seed decided
    assert rep["chosen"]["best"] == {"how": "A", "lr": 3}            # a's val score (0.70) beats b's
    assert rep["rows"]["best"][1]["name"] == "a_3_s1"
    # each method's chosen run at seed 0 is reused, not retrained; seed 1's b run is the tie-break's
    assert trained.count(("a", 3, 0)) == 1 and trained.count(("b", 2, 1)) == 1
    tests = [name for name, split in read if split == "test" and not name.startswith(("base", "teacher"))]
    assert sorted(tests) == ["a_3_s0", "a_3_s1", "b_2_s0", "b_2_s1"]   # test read once, chosen runs only
    row = rep["rows"]["a"][1]
    assert row["lift"]["binding"] == pytest.approx(0.1 + 0.3) and row["lift"]["recall"] == pytest.approx(0.5)
    assert row["stage"]["cost/trained_tokens"] == 10 and row["pipeline"]["flops"] == row["stage"]["flops"]
    assert row["stage"]["flops"] == (4 * 100 + 6 * 10) * 10 and row["ledger"] == study.cost.LEDGER


def test_a_method_needs_a_setting_and_a_pick_known_methods():
    with pytest.raises(ValueError, match="at least one setting"):
        study.Method(lambda *a: None, grid=[])
    with pytest.raises(ValueError, match="one key"):
        study.Method(lambda *a: None, grid=[{"lr": 1, "w": 2}], scalar="lr")
    with pytest.raises(ValueError, match="unknown methods"):
        study.Study(module="m", methods={}, setup=lambda p: None, picks={"x": study.Pick({"nope": "N"})})
    with pytest.raises(SystemExit, match="include 0"):
        study.run(study.Study(module="m", methods={}, setup=lambda p: None), seeds=[1], n=1, val_n=1,
                  summarise=lambda c, s: {})
