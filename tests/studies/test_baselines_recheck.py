"""docs/baselines.md's re-check of its three edge choices (`python -m studies.baselines --recheck edges`, the
page's amendment of 2026-12-06): the jobs its slices plan (the page's grid, bracketed past an edge up to the
ladder's end, then the seeds at each choice), a slice stopped by SIGTERM and continued ending with the same
records as the whole command, the page's section (partial, then the decision, and a moved choice's rows in the
table only on the same teachers), and `--status` without torch."""

import argparse
import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.studies.status_check import status_without_torch

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
ARGS = ["--recheck", "edges", "--quick", "--quiet", "--seeds", "0", "--out", "docs"]
LENGTHS = {"binding": ("16", "24", "32"), "recall": ("16", "24")}


def baselines(cwd: Path, *args: str, **kw):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MOPD_FAST": ""}
    return subprocess.run([sys.executable, "-m", "studies.baselines", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900, **kw)


def registered() -> dict:
    """docs/baselines.json as its own run wrote it: the recorded re-check (`recheck_edges`) taken out, so a
    test can run or render a re-check beside it."""
    rep = json.loads((DOCS / "baselines.json").read_text())
    rep.pop("recheck_edges", None)
    return rep


def same(a, b) -> bool:
    """Equal as JSON, every "seconds" field dropped (NaN equal to NaN: a smoke run's scores may be undefined)."""
    def drop(x):
        if isinstance(x, dict):
            return {k: drop(v) for k, v in x.items() if k not in ("seconds",)}
        return [drop(v) for v in x] if isinstance(x, list) else x
    return json.dumps(drop(a), sort_keys=True, default=str) == json.dumps(drop(b), sort_keys=True, default=str)


# ---------------------------------------------------------------------------------------------
# the jobs it plans
# ---------------------------------------------------------------------------------------------


def accs(score: float) -> dict:
    """{domain: {L: acc}} of a run whose normalised score is `score` on both domains (base 0.5, teachers 0.9)."""
    return {d: {L: 0.5 + 0.4 * score for L in Ls} for d, Ls in LENGTHS.items()}


def test_the_recheck_plans_the_pages_grid_bracketed_to_the_ladders_end_then_the_seeds(tmp_path, monkeypatch):
    from mopd_mini import runs
    from studies import baselines

    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path / "runs")
    (tmp_path / "runs").mkdir()
    args = argparse.Namespace(out=str(tmp_path / "docs"), seeds=[0, 1, 2], quick=False, n=500, recheck="edges")
    job = baselines.sliced_study(args, baselines.FULL)
    assert job.key == "recheck-edges" and list(job.s.methods) == list(baselines.RECHECK_METHODS)
    assert job.s.tie_break is None and job.s.max_extend == 2      # the page's protocol: seed 0 decides
    argv = job.job_argv({"kind": "setup"})
    assert argv[argv.index("--recheck") + 1] == "edges" and "--quick" not in argv

    def plan():
        phase, jobs, _ = job.plan(job.store.read())
        return phase, sorted((j["kind"], j.get("method"), j.get("setting", {}).get("lr"), j.get("seed"), j.get("split"))
                             for j in jobs)

    def record(m, lr, seed, score, split="val"):
        with job.store.edit() as data:
            data["jobs"][job.run_key(m, {"lr": lr}, seed)] = {
                "method": m, "setting": {"lr": lr}, "seed": seed, "name": f"{m}_{lr}_s{seed}", "seconds": 1.0,
                "val": accs(score) if split == "val" else None, "test": accs(score) if split == "test" else None}

    assert plan() == ("set-up", [("setup", None, None, None, None)])
    with job.store.edit() as data:
        data["jobs"][job.k("setup")] = {"teachers": {}, "refs": {"val": {"base": accs(0.0), "teacher_binding": accs(1.0),
                                                                          "teacher_recall": accs(1.0)}}}
    phase, jobs = plan()       # the page's grid, seed 0, on val
    assert phase == "val choice" and jobs == sorted(("run", m, lr, 0, "val") for m in baselines.RECHECK_METHODS
                                                    for lr in (3e-4, 1e-3, 3e-3))
    for m in baselines.RECHECK_METHODS:                     # each best on the top edge, as on the page
        for lr, score in ((3e-4, 0.80), (1e-3, 0.90), (3e-3, 0.95)):
            record(m, lr, 0, score)
    assert plan() == ("val choice", sorted(("run", m, 1e-2, 0, "val") for m in baselines.RECHECK_METHODS))
    record("mopd_topk", 1e-2, 0, 0.99)                      # still on the edge: one more step
    record("mopd_kl", 1e-2, 0, 0.99)
    record("soft", 1e-2, 0, 0.50)                           # 3e-3 is bracketed: nothing more
    assert plan() == ("val choice", [("run", "mopd_kl", 3e-2, 0, "val"), ("run", "mopd_topk", 3e-2, 0, "val")])
    record("mopd_topk", 3e-2, 0, 0.60)                      # 1e-2 bracketed
    record("mopd_kl", 3e-2, 0, 1.05)                        # the ladder's end: no step past it
    phase, jobs = plan()
    chosen = {"mopd_topk": 1e-2, "mopd_kl": 3e-2, "soft": 3e-3}
    assert phase == "seeds" and jobs == sorted(
        [("test", m, lr, 0, None) for m, lr in chosen.items()]           # seed 0: the grid's run, scored on test
        + [("run", m, lr, s, "test") for m, lr in chosen.items() for s in (1, 2)])

    _, grid, picked, _ = job.choice(job.store.read())
    rep = {"chosen": {m: 3e-3 for m in chosen}, baselines.RECHECK_KEY: {"chosen": {m: s["lr"] for m, s in picked.items()},
                                                                        "grid": grid}}
    dec = baselines.edge_decisions(rep)
    assert {m: (d["chosen"], d["moved"], d["bracketing"]) for m, d in dec.items()} == {
        "mopd_topk": (1e-2, True, "bracketed"), "mopd_kl": (3e-2, True, "hard limit"), "soft": (3e-3, False, "bracketed")}
    assert [g["lr"] for g in grid["mopd_kl"] if g.get("extended")] == [1e-2, 3e-2]


# ---------------------------------------------------------------------------------------------
# a slice stopped by SIGTERM, continued: the same records as the whole command
# ---------------------------------------------------------------------------------------------


def test_a_sigtermd_slice_continues_to_the_records_of_the_whole_command(tmp_path, monkeypatch):
    monkeypatch.delenv("MOPD_FAST", raising=False)
    from mopd_mini import runs
    from studies import baselines as study

    out = tmp_path / "sliced"
    (out / "docs").mkdir(parents=True)
    from studies import baselines as page_of
    (out / "docs" / "baselines.json").write_text(json.dumps(registered(), indent=1))   # the page it is written beside
    (out / "docs" / "baselines.md").write_text(page_of.markdown(registered()))
    store = out / "docs" / "baselines_jobs.json"
    sliced = [*ARGS, "--workers", "2", "--hours", "1"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MOPD_FAST": ""}
    proc = subprocess.Popen([sys.executable, "-m", "studies.baselines", *sliced], cwd=out, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    until = time.time() + 600
    while time.time() < until and proc.poll() is None:     # stopped once the set-up and a run are recorded
        recs = json.loads(store.read_text()).get("jobs", {}) if store.exists() else {}
        if any("|run|" in k for k in recs):
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "stopped by signal" in err, err[-2000:]
    before = json.loads(store.read_text())["jobs"]
    assert "recheck-edges-quick|setup" in before and not any(p.name.startswith(".") for p in
                                                               (out / "docs" / "baselines_inputs").rglob("*"))
    assert "recheck_edges" not in json.loads((out / "docs" / "baselines.json").read_text())   # nothing written yet

    r = baselines(out, *sliced)                               # the same command continues
    assert r.returncode == 0, r.stderr[-3000:]
    assert "every job recorded; the re-check's section is written" in r.stdout
    after = json.loads(store.read_text())["jobs"]
    assert all(after[k] == rec for k, rec in before.items())  # kept as recorded, none run again

    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path / "whole" / "runs")
    whole = study.main([*ARGS[:-2], "--no-write"])           # study.run in one process, never stopped
    rep = json.loads((out / "docs" / "baselines.json").read_text())
    block = rep["recheck_edges"]
    for key in ("rows", "chosen", "grid", "refs", "seeds_done", "teacher_sha256"):
        assert same(block[key], whole[key]), key
    assert "(in slices: baselines_jobs.json, machines: " in block["command"]
    assert {k: v for k, v in rep.items() if k != "recheck_edges"} == registered()
    page = (out / "docs" / "baselines.md").read_text()
    assert "## Re-check of the three edge choices (amendment of 2026-12-06): partial" in page   # seed 0 of 0, 1, 2


# ---------------------------------------------------------------------------------------------
# the page's section, from the JSON (no run)
# ---------------------------------------------------------------------------------------------


def block_of(rep: dict, seeds=(0, 1, 2), moved: float = 1e-2, teachers_same: bool = True) -> dict:
    """A re-check's block beside the committed page: MOPD exact KL's choice moves to `moved` (its rows: the
    page's MOPD-PG rows, so the move shows), Top-k stays at 3e-3 (bracketed), soft labels at 3e-2 (the ladder's end)."""
    def grid(best):
        lrs = [3e-4, 1e-3, 3e-3, 1e-2] + ([3e-2] if best >= 1e-2 else [])
        return [{"lr": lr, "mean": 0.9 - abs(lr - best), "extended": lr > 3e-3, "binding": 0.9, "recall": 0.9}
                for lr in lrs]
    chosen = {"mopd_topk": 3e-3, "mopd_kl": moved, "soft": 3e-2}
    refs = copy.deepcopy(rep["refs"])
    if not teachers_same:
        refs["test"]["teacher_recall"]["recall"]["24"] += 0.002
    return {"command": "python -m studies.baselines --recheck edges --seeds 0 1 2 --workers 2 --hours 1 (in slices: "
                       "baselines_jobs.json, machines: m)", "date": "2026-12-07 10:00 UTC", "machine": rep["machine"],
            "elapsed_s": 3000.0, "seeds_done": list(seeds),
            "protocol": {"lrs": [3e-4, 1e-3, 3e-3], "val_n": 100, "test_n": 500, "max_extend": 2},
            "teacher": rep["protocol"]["teacher"], "teacher_sha256": {"binding": "ab" * 32, "recall": "cd" * 32},
            "refs": refs, "chosen": chosen, "grid": {m: grid(lr) for m, lr in chosen.items()},
            "rows": {"mopd_topk": rep["rows"]["mopd_topk"], "mopd_kl": {s: r for s, r in rep["rows"]["mopd_pg"].items()
                                                                        if int(s) in seeds},
                     "soft": rep["rows"]["soft"]}, "curves": {}}


def table(page: str) -> str:
    return page[page.index("## The table"):page.index("### What this setting")]


def test_the_section_is_partial_then_decides_and_a_moved_choice_takes_the_table_on_the_same_teachers():
    from studies import baselines

    assert baselines.markdown(json.loads((DOCS / "baselines.json").read_text())) == (DOCS / "baselines.md").read_text()
    rep = registered()
    page = baselines.markdown(rep)                           # no block: the page before its re-check

    partial = baselines.markdown({**rep, "recheck_edges": block_of(rep, seeds=(0,))})
    assert "## Re-check of the three edge choices (amendment of 2026-12-06): partial" in partial
    assert "**Partial**: seeds [0] recorded of the registered [0, 1, 2]" in partial
    assert "partial, not decided (so far: moves from 0.003 to 0.01, bracketed (0.003 and 0.03 tried beside it))" in partial
    assert table(partial) == table(page) and "**Decision**" not in partial
    assert "so their optimum is not bracketed (the re-check of the amendment of 2026-12-06 is partial" in partial

    done = baselines.markdown({**rep, "recheck_edges": block_of(rep)})
    assert "## Re-check of the three edge choices (amendment of 2026-12-06)\n" in done and "**Partial**" not in done
    assert "**The same teachers** by the amendment's test" in done
    assert "| MOPD exact KL (re-check, lr 0.01) | 0.92 ± 0.05 (0.03) |" in table(done)   # MOPD-PG's numbers, moved
    assert "| MOPD-Top-k | " in table(done) and "| soft-label KD (offline) (re-check, lr 0.03) | " in table(done)
    assert table(done).count("(re-check, lr") == 2
    assert "* **MOPD exact KL**: the choice moves (0.003 to 0.01), bracketed; its rows on this page" in done
    assert "* **MOPD-Top-k**: the choice does not move (0.003), bracketed; this page's rows stay" in done
    assert "* **soft-label KD (offline)**: the choice moves (0.003 to 0.03), on its hard limit; its rows" in done
    assert ("length; the re-check of the amendment of 2026-12-06 (its section below) bracketed the choice of MOPD-Top-k, "
            "MOPD exact KL; left soft-label KD (offline) (lr 0.03) on the hard limit") in done
    assert "the chosen rate sits on the grid's edge for" not in done
    assert "* MOPD exact KL (re-check, lr 0.01): lr 0.0003: " in done and "lr 0.01 [extended]" in done

    from studies import findings                             # the findings' sentences read the rows the page shows
    moved = baselines.in_use({**rep, "recheck_edges": block_of(rep)})
    assert moved["recheck_in_use"] == ["mopd_kl", "soft"] and moved["rows"]["mopd_kl"] == rep["rows"]["mopd_pg"]
    assert "in_use(_read(data_dir, \"baselines\"))" in Path(findings.__file__).read_text()

    other = baselines.markdown({**rep, "recheck_edges": block_of(rep, teachers_same=False)})
    assert "**Other teachers** by the amendment's test" in other and table(other) == table(page)
    assert "on other teachers, so this page's rows stay" in other


# ---------------------------------------------------------------------------------------------
# --status, from the JSON alone
# ---------------------------------------------------------------------------------------------


def test_status_reports_the_recheck_without_torch(tmp_path):
    (tmp_path / "docs").mkdir()
    recs = {"recheck-edges|setup": {"teachers": {}, "wall_seconds": 180.0, "machine": "Intel Xeon; torch"},
            "recheck-edges|run|mopd_kl|{\"lr\": 0.003}|0": {"val": {"binding": {}}, "test": None, "wall_seconds": 110.0,
                                                           "machine": "Intel Xeon; torch"}}
    plans = {"recheck-edges": {"done": False, "phase": "val choice", "total_left": 8, "seconds": 900.0, "more": True,
                               "command": "python -m studies.baselines --recheck edges --seeds 0 1 2 --workers 2 "
                                          "--hours 1", "date": "2026-12-07 10:00 UTC"}}
    (tmp_path / "docs" / "baselines_jobs.json").write_text(json.dumps({"jobs": recs, "plans": plans}))
    status, torch_loaded = status_without_torch("studies.baselines", tmp_path)
    assert "recheck-edges (" in status and "set-up: 1 jobs recorded" in status and "val choice: 1 jobs recorded" in status
    assert "left (as of the slice of 2026-12-07 10:00 UTC): 8 jobs" in status
    assert "continue: python -m studies.baselines --recheck edges --seeds 0 1 2 --workers 2 --hours 1" in status
    assert not torch_loaded
