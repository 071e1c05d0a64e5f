"""studies.matched in time-boxed slices (studies/sliced.py on studies/slices.py), on the cures' check
in its smoke-test size: a slice stopped with SIGTERM mid-phase and continued from a fresh `git clone`
holding only what it wrote to docs/ ends with the rows of the whole command (`study.run` in one
process); `--hours` ends a slice with exit 0 and the command that continues, writing nothing to the
pages; a tampered input, or a missing one that a recorded job read, stops the study naming it;
`--status` answers without torch."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.studies.status_check import status_without_torch

ROOT = Path(__file__).resolve().parents[2]
ARGS = ["--quick", "--quiet", "--cures", "--T", "2", "--seeds", "0", "1", "--out", "docs"]


def study_dir(tmp: Path) -> Path:
    """A folder like a clone's: docs/ with the sweep's (empty) rows at T = 2 and regimes.md."""
    (tmp / "docs").mkdir(parents=True)
    (tmp / "docs" / "matched.json").write_text(json.dumps({"by_T": {"2": {"rows": {}}}}))
    shutil.copy(ROOT / "docs" / "regimes.md", tmp / "docs" / "regimes.md")
    (tmp / ".gitignore").write_text("runs/\n")
    return tmp


def matched(cwd: Path, *args: str, popen: bool = False):
    cmd = [sys.executable, "-m", "studies.matched", *args]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MOPD_FAST": ""}
    if popen:
        return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True, capture_output=True)


def rows_of(block: dict) -> dict:
    """The block's rows without wall times (a run's seconds differ between any two runs)."""
    drop = lambda d: {k: v for k, v in d.items() if k != "seconds"}  # noqa: E731
    return {m: {s: {**r, "stage": drop(r["stage"]), "pipeline": drop(r["pipeline"])} for s, r in per.items()}
            for m, per in block["rows"].items()}


def test_a_slice_stopped_mid_phase_continues_from_a_fresh_clone_with_the_whole_commands_rows(tmp_path, monkeypatch):
    monkeypatch.delenv("MOPD_FAST", raising=False)
    from mopd_mini import runs
    from studies import matched as study

    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path / "whole" / "runs")
    whole = study.main([*ARGS[:-2], "--no-write"])["by_T"]["2"]["cures"]     # study.run, one process

    repo = study_dir(tmp_path / "repo")
    proc = matched(repo, *ARGS, "--workers", "2", "--hours", "1", popen=True)
    jobs = repo / "docs" / "matched_jobs.json"
    t0 = time.time()
    while time.time() - t0 < 300 and len(json.loads(jobs.read_text()).get("jobs", {}) if jobs.exists() else {}) < 3:
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)                     # mid-phase: the val choice's runs are running
    proc.communicate(timeout=120)
    recorded = json.loads(jobs.read_text())["jobs"]
    assert 3 <= len(recorded) < 18 and "T2-cures-quick|setup" in recorded
    assert not [p for p in (repo / "docs").rglob("*") if ".tmp-" in p.name]      # no half file
    assert "cures" not in json.loads((repo / "docs" / "matched.json").read_text())["by_T"]["2"]   # nothing partial
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the first slice")

    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    again = matched(clone, *ARGS, "--workers", "2", "--hours", "1")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "nothing left: the study is recorded in full" in again.stdout
    block = json.loads((clone / "docs" / "matched.json").read_text())["by_T"]["2"]["cures"]
    assert rows_of(block) == rows_of(whole) and block["chosen"] == whole["chosen"]
    assert block["teacher_sha256"] == whole["teacher_sha256"]
    assert all(len(r["stuck_series"]["step"]) == 2 for per in block["rows"].values() for r in per.values())
    assert "Course-setting check: the cures on binding + recall at T = 2" in (clone / "docs" / "regimes.md").read_text()


def test_hours_inputs_and_status(tmp_path):
    out = study_dir(tmp_path)
    # the set-up's estimate is 122 s before anything is recorded, a run's 900 s: only the set-up fits
    r = matched(out, *ARGS, "--hours", str((600 + 130) / 3600))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "1 jobs finished" in r.stdout and "left: 7 jobs" in r.stdout
    assert "continue with:\n  python -m studies.matched --quick" in r.stdout
    assert "cures" not in json.loads((out / "docs" / "matched.json").read_text())["by_T"]["2"]

    status, torch_loaded = status_without_torch("studies.matched", out)
    assert "set-up: 1 jobs recorded" in status and "left (as of the slice of" in status
    assert not torch_loaded

    teacher = out / "docs" / "matched_inputs" / "T2-cures-quick" / "teacher_binding" / "adapter_model.safetensors"
    good = teacher.read_bytes()
    teacher.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    r = matched(out, *ARGS, "--hours", "1")
    assert r.returncode != 0 and "teacher_binding is not the recorded one" in r.stderr
    teacher.write_bytes(good)

    jobs = out / "docs" / "matched_jobs.json"             # a recorded job that read the teacher, then it is lost
    data = json.loads(jobs.read_text())
    digest = data["jobs"]["T2-cures-quick|setup"]["teachers"]["teacher_binding"]["digest"]
    data["jobs"]["T2-cures-quick|run|mopd_kl|{}|0"] = {"reads": {"T2-cures-quick/teacher_binding": digest}}
    jobs.write_text(json.dumps(data))
    shutil.rmtree(teacher.parent)
    r = matched(out, *ARGS, "--hours", "1")
    assert r.returncode != 0
    assert "teacher_binding is missing; recorded jobs read it: T2-cures-quick|run|mopd_kl|{}|0" in r.stderr
