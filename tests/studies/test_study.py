"""studies.study's decisions, on a fake study whose runs are numbers (no model, no training): the
val grid picks the best mean normalised score; a best setting on the grid's edge is extended
past it; a choice within one val SE is decided by a second seed; a Pick takes the better method;
the test split is read once per method and seed, after every choice, and a run the choice
trained is reused, not trained again. (Reloading from disk is tests/test_bench_smoke.py's.)"""

import json
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from studies import study

VAL = {"a": {1: 0.50, 2: 0.60, 3: 0.70, 4: 0.65},        # best on the upper edge, then interior at 3
       "b": {1: 0.62, 2: 0.615}}                            # within one SE: seed 1 decides
VAL_SEED1 = {"b": {1: 0.55, 2: 0.66}}


@dataclass
class FakeRun:
    metrics: list = field(default_factory=list)
    seconds: float = 1.0
    count_version: int = study.cost.COUNT_VERSION


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
    assert row["stage"]["flops"] == (4 * 100 + 6 * 10) * 10 and row["count_version"] == study.cost.COUNT_VERSION


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


# a method whose seed-0 optimum is interior (2) but within one SE of the edge (3); the second seed
# moves the two-seed choice onto the edge, and the true two-seed optimum lies past it, at 4
VAL_EDGE = {0: {1: 0.50, 2: 0.700, 3: 0.695, 4: 0.73, 5: 0.70}, 1: {1: 0.50, 2: 0.60, 3: 0.72, 4: 0.74, 5: 0.70}}


def edge_study(tmp_path, trained, rebracket):
    def train(ctx, setting, seed):
        lr = setting["lr"]
        trained.append((lr, seed))
        x = VAL_EDGE[seed][lr]
        row = {"step": 1, "cost/trained_tokens": 10, **{f"acc/{d}/L16": x for d in ("binding", "recall")}}
        return study.Result.of(f"c_{lr}_s{seed}", FakeRun([row]))

    def extend(best, tried):      # the next setting past the edge the best sits on, up to 5 (the hard limit)
        lrs = sorted(t["lr"] for t in tried)
        if best["lr"] == lrs[-1] and best["lr"] < 5:
            return {"lr": best["lr"] + 1}
        if best["lr"] == lrs[0] and best["lr"] > 1:
            return {"lr": best["lr"] - 1}
        return None

    cache = {f"{a}|{s}|100": {d: {"16": v} for d, v in {"binding": b, "recall": b}.items()}
             for a, b in (("base", 0.0), ("teacher_binding", 1.0), ("teacher_recall", 1.0)) for s in ("val", "test")}
    cache.update({f"c_{lr}_s{seed}|test|100": {"binding": {"16": 0.5}, "recall": {"16": 0.5}}
                  for lr in range(1, 6) for seed in range(2)})
    (tmp_path / "evals.json").write_text(json.dumps(cache))
    ctx = SimpleNamespace(bank=None, teachers={}, N=100, n_lora=10, folder=tmp_path)
    return study.Study(module="unused", methods={"c": study.Method(train, grid=[{"lr": 1}, {"lr": 2}, {"lr": 3}],
                                                                    scalar="lr", extend=extend)},
                       setup=lambda progress: ctx, tie_break=1, rebracket=rebracket)


def test_the_tie_breaks_choice_on_an_edge_is_bracketed_again(tmp_path):
    """Without the second bracketing (rebracket=0, the old runner) the tie-break's choice stays on the
    grid's upper edge (3); with it the grid grows around the choice on the same two seeds (4, then
    5) and the two-seed choice (4) is interior."""
    def chosen(rebracket, folder):
        folder.mkdir()
        trained = []
        rep = study.run(edge_study(folder, trained, rebracket), seeds=[0], n=100, val_n=100, quiet=True,
                        summarise=lambda ctx, state: {"chosen": dict(state.chosen), "grid": state.grid})
        return rep, trained

    old, _ = chosen(0, tmp_path / "old")
    assert old["chosen"]["c"] == 3                                   # on the edge: never bracketed
    assert [g["lr"] for g in old["grid"]["c"]] == [1, 2, 3]
    new, trained = chosen(4, tmp_path / "new")
    assert new["chosen"]["c"] == 4                                   # interior: 5 was worse on the two seeds
    after = [g for g in new["grid"]["c"] if g.get("after_tie_break")]
    assert [g["lr"] for g in after] == [4, 5] and all("mean2" in g for g in after)
    assert {(4, 0), (4, 1), (5, 0), (5, 1)} <= set(trained)          # each new setting on the same two seeds
    assert max(new["grid"]["c"], key=lambda g: g.get("mean2", -1))["lr"] == 4
    limited, _ = chosen(1, tmp_path / "limited")                     # the hard limit stops it, and says where
    assert limited["chosen"]["c"] == 4 and [g["lr"] for g in limited["grid"]["c"]] == [1, 2, 3, 4]
