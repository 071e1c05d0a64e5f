"""studies/slices.py's contract, on a study in miniature (tests/studies/fake_sliced.py: a teacher
job per seed writes an input, a student job reads it, each sleeps a second): a slice stopped with
SIGTERM mid-phase and continued from a fresh `git clone` of a repository holding only what it
committed ends with the records of an uninterrupted run; `--hours` ends a slice with exit 0, the
jobs that fit, and the command that continues; a tampered input, or a missing one that a recorded
job read, stops the study naming it; one that no record read runs again."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TIMINGS = ("date", "machine", "wall_seconds")


def fake(out: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tests.studies.fake_sliced", "--out", str(out), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def records(out: Path) -> dict:
    data = json.loads((out / "fake.json").read_text())
    return {k: {f: v for f, v in r.items() if f not in TIMINGS} for k, r in data["runs"].items()}


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True, capture_output=True)


def test_a_slice_stopped_mid_phase_continues_from_a_fresh_clone(tmp_path):
    ref = fake(tmp_path / "ref", "--workers", "2")
    assert ref.returncode == 0, ref.stderr
    want = records(tmp_path / "ref")
    assert len(want) == 6 and "nothing left" in ref.stdout

    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / ".gitignore").write_text((ROOT / ".gitignore").read_text() + ".fake.lock\n")
    proc = subprocess.Popen([sys.executable, "-m", "tests.studies.fake_sliced", "--out", str(repo / "docs"),
                             "--workers", "2"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    store = repo / "docs" / "fake.json"
    t0 = time.time()
    while time.time() - t0 < 60 and not (store.exists() and json.loads(store.read_text()).get("runs")):
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)                     # mid-phase: the other teachers are still running
    proc.communicate(timeout=60)
    got = records(repo / "docs")
    assert 1 <= len(got) < 6
    assert not [p for p in (repo / "docs").rglob("*") if ".tmp-" in p.name]      # no half file
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the first slice")

    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    again = fake(clone / "docs", "--workers", "2")
    assert again.returncode == 0, again.stderr
    assert records(clone / "docs") == want               # every field but date, machine and timings


def test_hours_ends_a_slice_with_what_fits_and_the_command_that_continues(tmp_path):
    # 2 s jobs, each estimated at 2.5 s, 6 s in all: the first two start, the third would end too late
    out = tmp_path / "docs"
    r = fake(out, "--workers", "1", "--sleep", "2", "--estimate", "2.5", "--hours", str(6 / 3600))
    assert r.returncode == 0, r.stderr
    assert sorted(records(out)) == ["teacher|0", "teacher|1"]
    assert "2 jobs finished" in r.stdout and "left: 3 jobs" in r.stdout   # teacher 2, students 0 and 1 (student 2 waits on its teacher)
    assert "continue with:\n  python -m tests.studies.fake_sliced --out" in r.stdout
    done = fake(out, "--workers", "2")                   # the same study, continued: it finishes
    assert done.returncode == 0 and len(records(out)) == 6


def test_a_tampered_input_stops_the_study_naming_it(tmp_path):
    out = tmp_path / "docs"
    assert fake(out, "--workers", "2").returncode == 0
    (out / "fake_inputs" / "s1" / "teacher" / "weights.txt").write_text("999\n")
    r = fake(out)
    assert r.returncode != 0
    assert "fake_inputs/s1/teacher is not the recorded one" in r.stderr


def test_a_missing_input_a_record_read_stops_the_study_naming_it(tmp_path):
    out = tmp_path / "docs"
    assert fake(out, "--workers", "2").returncode == 0
    shutil.rmtree(out / "fake_inputs" / "s2" / "teacher")
    r = fake(out)
    assert r.returncode != 0
    assert "fake_inputs/s2/teacher is missing; recorded jobs read it: student|2" in r.stderr


def test_a_missing_input_no_record_read_is_made_again(tmp_path):
    out = tmp_path / "docs"
    assert fake(out, "--workers", "2").returncode == 0
    want = records(out)
    data = json.loads((out / "fake.json").read_text())
    del data["runs"]["student|0"]                         # its only reader: not recorded
    (out / "fake.json").write_text(json.dumps(data))
    shutil.rmtree(out / "fake_inputs" / "s0" / "teacher")
    r = fake(out, "--workers", "2")
    assert r.returncode == 0, r.stderr
    assert records(out) == want


def test_quiet_turns_off_transformers_bars_only_when_given():
    """A study's `--quiet` worker printed transformers' "Loading weights" bar at every load: the flag
    now turns transformers' progress bars off too (and only when it is given)."""
    import argparse

    from transformers.utils import logging as hf_logging

    from studies import slices

    p = argparse.ArgumentParser()
    slices.quiet_flag(p)
    hf_logging.enable_progress_bar()   # a study's main run in this process with --quiet before may have turned them off
    try:
        assert p.parse_args([]).quiet is False and hf_logging.is_progress_bar_enabled()
        assert p.parse_args(["--quiet"]).quiet is True
        assert not hf_logging.is_progress_bar_enabled()
    finally:
        hf_logging.enable_progress_bar()


def test_status_after_a_stopped_slice_says_the_list_is_missing_not_that_nothing_ran():
    from studies.slices import status_lines
    rec = {"wall_seconds": 36.0, "machine": "AMD EPYC, 2 cores; torch 2.13.0"}
    assert status_lines({"val choice": []}, None)[-1] == "  left: no slice has run yet (the first one lists the jobs)"
    lines = status_lines({"val choice": [rec, rec]}, None)
    assert lines[0] == "  val choice: 2 jobs recorded, 0.02 CPU-h spent; machines: AMD EPYC, 2 cores"
    assert lines[-1].startswith("  left: not listed (the last slice was stopped")
