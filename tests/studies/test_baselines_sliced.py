"""studies.baselines in time-boxed slices (studies.sliced), in its smoke-test size: the sliced command
(every run one job in its own process, the teachers and the val choice's adapters kept as inputs, the
merges and the best-merge pick replayed from the records) ends with the page of the whole command
(`study.run` in one process): the same rows, choices, curves and references; a slice that cannot
finish writes no page; `--status` answers from the JSON without torch. The slices' own contract
(SIGTERM, a fresh clone, tampered and missing inputs) is tests/studies/test_matched_sliced.py's."""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.studies.status_check import status_without_torch

ROOT = Path(__file__).resolve().parents[2]
ARGS = ["--quick", "--quiet", "--seeds", "0", "--out", "docs"]


def baselines(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MOPD_FAST": ""}
    return subprocess.run([sys.executable, "-m", "studies.baselines", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)


def without_seconds(x):
    """Every "seconds" field dropped (a run's wall time differs between any two runs)."""
    if isinstance(x, dict):
        return {k: without_seconds(v) for k, v in x.items() if k != "seconds"}
    if isinstance(x, list):
        return [without_seconds(v) for v in x]
    return x


def test_the_sliced_study_writes_the_whole_commands_page(tmp_path, monkeypatch):
    monkeypatch.delenv("MOPD_FAST", raising=False)
    from mopd_mini import runs
    from studies import baselines as study

    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path / "whole" / "runs")
    whole = json.loads(json.dumps(study.main([*ARGS[:-2], "--no-write"]), default=str))   # study.run, one process

    out = tmp_path / "sliced"
    (out / "docs").mkdir(parents=True)
    # the set-up's estimate before anything is recorded is 60 s, a run's 900 s: only the set-up fits
    r = baselines(out, *ARGS, "--hours", str((600 + 70) / 3600))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "1 jobs finished" in r.stdout and "continue with:\n  python -m studies.baselines --quick" in r.stdout
    assert not (out / "docs" / "baselines.json").exists() and not (out / "docs" / "baselines.md").exists()

    status, torch_loaded = status_without_torch("studies.baselines", out)
    assert "baselines-quick" in status and "set-up: 1 jobs recorded" in status
    assert not torch_loaded

    r = baselines(out, *ARGS, "--workers", "2", "--hours", "1")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "nothing left: the study is recorded in full" in r.stdout and "the page is written" in r.stdout
    page = json.loads((out / "docs" / "baselines.json").read_text())
    for key in ("rows", "chosen", "grid", "curves", "refs", "denominators"):
        assert without_seconds(page[key]) == without_seconds(whole[key]), key
    assert "(in slices: baselines_jobs.json, machines: " in page["command"]
    kept = {p.parent.name for p in (out / "docs" / "baselines_inputs").rglob("adapter_model.safetensors")}
    assert {"teacher_binding", "teacher_recall"} <= kept and any(k.startswith("merge_") for k in kept)


def test_every_job_records_under_the_main_processs_lock(tmp_path, monkeypatch):
    """A job moves runs.RUNS_DIR to a fresh folder before it records: the store's lock must stay the one
    the other jobs take (a lock in the job's own folder let two jobs' records overwrite each other)."""
    import argparse

    from mopd_mini import runs
    from studies import baselines, matched

    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path / "runs")
    args = argparse.Namespace(out=str(tmp_path / "docs"), seeds=[0], quick=True, n=6, cures=True)
    for made in (baselines.sliced_study(args, baselines.QUICK), matched.sliced_study(args, matched.QUICK, 2)):
        before = made.store.lock()
        monkeypatch.setattr(runs, "RUNS_DIR", tmp_path / "a-job's-fresh-folder")
        assert made.store.lock() == before and before.parent == (tmp_path / "runs").resolve()
        monkeypatch.setattr(runs, "RUNS_DIR", tmp_path / "runs")
