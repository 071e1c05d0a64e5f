"""Notebook 08's fallback: when the live seed-1 run does not get stuck (or MOPD_STUCK_FALLBACK=1 forces
it), 08 continues on the recorded copy of the stuck run shipped as package data (lab.recorded_stuck).
These tests force the fallback and check that what 08 continues on is the stuck run: its adapters load
into the bank under 08's names, its metrics, warnings and trace are there, and the student it loads
is the stuck one (depth 2 unanswered, the teacher answers it)."""

import fnmatch
import json
import tomllib
from pathlib import Path

import pytest

import mopd_mini
from mopd_mini import lab
from mopd_mini.domains import get_domains
from mopd_mini.starting_points import starting_points
from mopd_mini.runs import Run

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "08_stuck.ipynb"


def notebook_configs():
    """08's two configs, from bench.stuck_copy (the recorder) at seed 1, as 08 names them."""
    from bench.stuck_copy import configs

    return configs(1, "stuck-fast")


def fake_run(share, warned=True, n=150):
    metrics = [{"step": i + 1, "stuck_share/chain": share} for i in range(n)]
    warnings = [{"kind": "stuck", "domain": "chain", "step": 91, "share": 0.1}] if warned else []
    return Run(None, {"stuck_warn_share": 0.02}, metrics=metrics, warnings=warnings)


def test_the_fallback_is_taken_when_the_run_did_not_stick_or_when_forced(monkeypatch):
    monkeypatch.delenv(lab.FALLBACK_ENV, raising=False)
    assert lab.fallback_reason(fake_run(0.07), depth2_acc=0.0) is None            # stuck: the live run goes on
    assert "did not warn" in lab.fallback_reason(fake_run(0.07, warned=False), 0.0)
    assert "stuck share fell" in lab.fallback_reason(fake_run(0.0), 0.0)
    assert "learned to stop" in lab.fallback_reason(fake_run(0.07), 0.9)
    monkeypatch.setenv(lab.FALLBACK_ENV, "1")
    assert lab.FALLBACK_ENV in lab.fallback_reason(fake_run(0.07), 0.0)          # forced, though stuck
    assert lab.fallback_reason(fake_run(0.07), 0.0, force=False) is None


def test_the_copy_ships_as_package_data_with_its_provenance():
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["mopd_mini"]
    files = [f for f in lab.STUCK_COPY.rglob("*") if f.is_file()]
    assert {f.name for f in files} >= {"run.json", "adapter_model.safetensors", "adapter_config.json", "config.json"}
    for f in files:
        rel = f.relative_to(Path(lab.__file__).parent).as_posix()
        assert any(fnmatch.fnmatch(rel, p) for p in patterns), f"{rel} is not in pyproject's package-data"
    assert sum(f.stat().st_size for f in files) < 700 * 1024, "the copy stays small"
    made = json.loads((lab.STUCK_COPY / "run.json").read_text())["provenance"]
    assert {"command", "commit", "machine", "date"} <= set(made) and all(made[k] for k in made)


def test_the_notebook_takes_the_copy_when_the_run_does_not_stick():
    """08's cell calls the helper for seed 1 and re-measures the adapters it then holds."""
    cells = [c["source"] for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]
    cell = next(s for s in cells if "lab.fallback_reason(" in s)
    assert "lab.recorded_stuck(bank, cfg_teacher, cfg_stuck)" in cell
    assert 'by_depth("mopd_kl")' in cell.split("lab.recorded_stuck")[1]


@pytest.mark.slow
def test_forced_fallback_continues_on_the_recorded_stuck_run(monkeypatch):
    monkeypatch.setenv(lab.FALLBACK_ENV, "1")
    cfg_teacher, cfg_stuck = notebook_configs()
    base, tokenizer = mopd_mini.load_base("tiny")
    bank = mopd_mini.AdapterBank(base, tokenizer)
    live = fake_run(0.0, warned=False)          # a live run that learned
    assert lab.fallback_reason(live, 0.9)
    stuck = lab.recorded_stuck(bank, cfg_teacher, cfg_stuck)
    assert {"sft_teacher", "mopd_kl"} <= set(bank.names)
    assert [w["step"] for w in stuck.warnings] == [91]
    assert len(stuck.metrics) == cfg_stuck.steps and min(r["stuck_share/chain"] for r in stuck.metrics[-50:]) > 0.02
    assert any(r["step"] == cfg_stuck.steps and any(r["stuck"]) for r in stuck.trace)
    assert lab.fallback_reason(stuck, 0.0, force=False) is None, "the copy is what the lesson needs"

    def depth2(adapter):
        with bank.use(adapter) as model:
            rows = starting_points(model, tokenizer, n=12, seed=0, split="test", domains=get_domains(("chain",)))
        return next(r["acc"] for r in rows if r["length"] == 2)

    assert depth2("sft_teacher") > 0.9 and depth2("mopd_kl") < 0.2


def test_the_copy_refuses_other_settings():
    from dataclasses import replace

    cfg_teacher, cfg_stuck = notebook_configs()
    with pytest.raises(ValueError, match="seed"):
        lab.recorded_stuck(None, cfg_teacher, replace(cfg_stuck, seed=0))


# --- what tells the stuck run from one that learns (08's cell 14) ---------------------------------

def seed_rows():
    """The last 50 rows of 08's stuck run (seed 1, the shipped copy) and of the seed that learns (seed 0,
    the same settings; tests/data/stuck_seed0_rows.json, python -m bench.stuck_copy --seed 0)."""
    stuck = json.loads((lab.STUCK_COPY / "run.json").read_text())["metrics"][-50:]
    learns = json.loads((ROOT / "tests" / "data" / "stuck_seed0_rows.json").read_text())["rows"]
    return stuck, learns


def test_the_stuck_runs_assert_fails_on_the_seed_that_learns():
    stuck, learns = seed_rows()
    ev_stuck, ev_learns = lab.stuck_evidence(stuck), lab.stuck_evidence(learns)
    assert ev_stuck["kl_share"] > lab.STUCK_KL_SHARE                      # 08's assert holds on the stuck run
    with pytest.raises(AssertionError):                                    # ... and fails where the point is false
        assert ev_learns["kl_share"] > lab.STUCK_KL_SHARE
    assert ev_learns["stuck_steps"] < ev_learns["steps"] == ev_stuck["stuck_steps"] == 50


def test_the_gradient_per_nat_does_not_tell_them_apart():
    """The assert 08 had ("the stuck tokens get 10x less gradient per nat") passes on both seeds."""
    for rows in seed_rows():
        ev = lab.stuck_evidence(rows)
        assert ev["per_nat_stuck"] < ev["per_nat_rest"] / 10
