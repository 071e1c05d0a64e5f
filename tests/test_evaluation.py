"""Tests for mopd_mini.evaluation: the tables (evaluate on the test and validation splits,
normalised_scores, format_table), and its names: `mopd_mini.evaluate` is the function whatever was
imported first, and the module's old path `mopd_mini.evaluate` still gives its names, with a warning."""

import math
import subprocess
import sys
from pathlib import Path

import pytest

import factworld
from mopd_mini import GRPOConfig, evaluate, format_table, normalised_scores, train_grpo
from mopd_mini.evaluation import accuracy

ROOT = Path(__file__).resolve().parents[1]

FIRST = {"the old module path": "import mopd_mini.evaluate",
         "a name from the old path": "from mopd_mini.evaluate import accuracy_by_length",
         "the module": "import mopd_mini.evaluation",
         "the function": "from mopd_mini import evaluate"}

CHECK = """
import types, warnings
import mopd_mini
assert isinstance(mopd_mini.evaluate, types.FunctionType), mopd_mini.evaluate
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from mopd_mini.evaluate import accuracy_by_length, TEACHER_OF
    import mopd_mini.evaluate
from mopd_mini import evaluation
assert accuracy_by_length is evaluation.accuracy_by_length and TEACHER_OF is evaluation.TEACHER_OF
assert [w.category for w in caught] == [DeprecationWarning] * 2, [str(w.message) for w in caught]
assert all("mopd_mini.evaluation" in str(w.message) for w in caught)
assert caught[0].filename == "<string>"  # the warning points at the import that used the old path
assert mopd_mini.evaluate is evaluation.evaluate and isinstance(mopd_mini.evaluate, types.FunctionType)
assert not hasattr(mopd_mini, "_Package") and type(mopd_mini) is types.ModuleType
print("ok")
"""


@pytest.mark.parametrize("first", list(FIRST))
def test_evaluate_is_the_function_and_the_old_path_warns(first):
    code = "import warnings\nwarnings.simplefilter('ignore')\n" + FIRST[first] + "\nwarnings.resetwarnings()\n" + CHECK
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


# ------------------------------------------------------------------- the tables: evaluate, scores

def table(student_recall=0.5, teacher_recall=0.5):
    """A hand-made evaluate() table: binding at L16/L24, recall at L16."""
    return {"acc": {
        "base": {"binding": {16: 0.2, 24: 0.4}, "recall": {16: 0.5}},
        "teacher_binding": {"binding": {16: 0.8, 24: 1.0}, "recall": {16: 0.4}},
        "teacher_recall": {"binding": {16: 0.1, 24: 0.1}, "recall": {16: teacher_recall}},
        "student": {"binding": {16: 0.5, 24: 0.7}, "recall": {16: student_recall}},
    }, "floor": {16: 0.25, 24: 0.125}, "n": 10}


def test_normalised_scores_are_the_papers_ratio():
    """s_d = (s - b) / (t - b) on each domain's mean accuracy, the mean over domains, denominators shown."""
    scores = normalised_scores(table(student_recall=0.7, teacher_recall=0.9))
    b = scores["binding"]
    assert (b["model"], b["base"], b["teacher"]) == pytest.approx((0.6, 0.3, 0.9))
    assert b["denominator"] == pytest.approx(0.6) and b["normalised"] == pytest.approx(0.5)
    assert scores["recall"]["normalised"] == pytest.approx((0.7 - 0.5) / (0.9 - 0.5))
    assert scores["mean"] == pytest.approx((0.5 + 0.5) / 2)
    swapped = normalised_scores(table(student_recall=0.7, teacher_recall=0.9),
                                teachers={"binding": "teacher_recall", "recall": "teacher_binding"})
    assert swapped["binding"]["normalised"] == pytest.approx((0.6 - 0.3) / (0.1 - 0.3))


def test_normalised_score_is_nan_without_teacher_headroom():
    """A domain whose teacher scores like the base has denominator 0 and a nan ratio (and mean)."""
    scores = normalised_scores(table(student_recall=0.7, teacher_recall=0.5))
    assert scores["recall"]["denominator"] == 0
    assert math.isnan(scores["recall"]["normalised"]) and math.isnan(scores["mean"])
    assert scores["binding"]["normalised"] == pytest.approx(0.5)


def test_format_table_has_every_model_and_the_binding_floor():
    """format_table prints one row per adapter, one column per (domain, length), and the floor row."""
    text = format_table(table())
    lines = text.splitlines()
    assert "binding L16" in lines[0] and "binding L24" in lines[0] and "recall L16" in lines[0]
    for name in ("base", "teacher_binding", "teacher_recall", "student"):
        assert any(line.startswith(f"| {name} |") for line in lines)
    floor = [line for line in lines if "binding floor" in line]
    assert len(floor) == 1 and "0.25" in floor[0] and "0.12" in floor[0]


def test_evaluate_builds_the_table(teacher_bank, tiny):
    """evaluate() measures each adapter on the same test examples; base is the plain base; the
    binding floor is factworld.floor of those examples."""
    lengths = {"binding": (8,), "recall": (12,)}
    result = evaluate(teacher_bank, ["base", "teacher_binding"], n=4, lengths=lengths)
    assert result["n"] == 4 and set(result["acc"]) == {"base", "teacher_binding"}
    assert result["acc"]["base"]["binding"].keys() == {8} and result["acc"]["base"]["recall"].keys() == {12}
    tests = {d: factworld.generate(d, "test", n=4, length=L[0], seed=0) for d, L in lengths.items()}
    for d, examples in tests.items():
        assert result["acc"]["base"][d][lengths[d][0]] == accuracy(tiny[0], tiny[1], examples)
        with teacher_bank.use("teacher_binding") as model:
            assert result["acc"]["teacher_binding"][d][lengths[d][0]] == accuracy(model, tiny[1], examples)
    assert result["floor"] == {8: factworld.floor(tests["binding"])}
    assert "binding floor" in format_table(result)


def test_evaluate_on_the_validation_split(teacher_bank, tiny):
    """split="val" evaluates on Domain.val_examples: prompts disjoint from train and test, so
    hyperparameters chosen on them never see the test set; an unknown split is refused."""
    from mopd_mini import DOMAINS
    lengths = {"binding": (8,), "recall": (12,)}
    result = evaluate(teacher_bank, ["teacher_binding"], n=4, lengths=lengths, split="val")
    assert result["split"] == "val"
    for d, (L,) in lengths.items():
        val = DOMAINS[d].val_examples(L, 4)
        assert all(ex.split == "val" for ex in val)
        test = {ex.prompt for ex in DOMAINS[d].test_examples(L, 200)}
        train = {ex.prompt for step in range(25) for ex in DOMAINS[d].train_examples(step, 8)}
        assert not {ex.prompt for ex in val} & (test | train)
        with teacher_bank.use("teacher_binding") as model:
            assert result["acc"]["teacher_binding"][d][L] == accuracy(model, tiny[1], val)
    with pytest.raises(ValueError, match="split"):
        evaluate(teacher_bank, ["base"], n=2, split="train")
    with pytest.raises(ValueError, match="eval_split"):
        train_grpo(teacher_bank, GRPOConfig(eval_split="dev", experiment=None, progress=False))
