"""studies.matched --recheck rft, docs/matched.md's re-check of "MOPD exact KL minus RFT" at one T (its
amendment of 2026-12-06): in its smoke-test size, in slices, a slice that fits only the set-up and then
the same command continuing record fresh teachers (their sha256), both methods on their grids by the
runner and both seeds, and write the block beside the sweep's rows and its section in matched.md's
Results, the registered text above kept; on made-up rows, a complete re-check takes the sweep's place
in the registered comparison (the T's paired table, Holm over the family of 15, the decisions) and an
incomplete one does not."""

import json
import shutil

import pytest

from tests.studies.status_check import status_without_torch
from tests.studies.test_matched_sliced import ROOT, matched

ARGS = ["--quick", "--quiet", "--recheck", "rft", "--T", "2", "--seeds", "0", "1", "--out", "docs"]
METHODS = ("mopd_pg", "mopd_topk", "mopd_kl", "mixrl", "cascade_br", "cascade_rb", "rft", "soft",
           "merge_linear", "merge_cat", "merge_ties", "merge_dare_ties", "merge_best")


def row(v: float) -> dict:
    return {"name": "x", "lift": {"binding": v, "recall": v, "mean": v}, "all": {"mean": 2 * v},
            "stage": {"flops": 1e9}, "pipeline": {"flops": 2e9}, "reach": None, "count_version": 99,
            "acc": {d: {"16": 0.5} for d in ("binding", "recall")}}   # what the store's check asks of a row


def sweep(seeds: int, shift: dict) -> dict:
    """A sweep's T: every method at 0.30 + seed / 100 + its shift, its choice, grid and references."""
    refs = {a: {d: {"16": acc} for d in ("binding", "recall")} for a, acc in
            (("base", 0.2), ("teacher_binding", 0.6), ("teacher_recall", 0.6))}
    return {"rows": {m: {str(s): row(0.30 + s / 100 + (shift[m][s] if m in shift else 0.0)) for s in range(seeds)}
                     for m in METHODS},
            "chosen": {m: {"lr": 1e-3} for m in METHODS}, "grid": {m: [{"lr": 1e-3, "name": "x", "mean": 0.5}] for m in METHODS},
            "refs": {"val": refs, "test": refs}, "seeds_done": list(range(seeds)),
            "teacher_cost": {d: {"flops": 1e9, "seconds": 1.0} for d in ("binding", "recall")}, "command": f"the sweep --seeds "
            + " ".join(map(str, range(seeds))), "date": "2026-12-03 07:04 UTC", "machine": MACHINE}


MACHINE = {"cpu": "Some CPU", "cores": 2, "memory_gb": 8, "gpu": None, "torch": "t", "transformers": "x", "peft": "p",
           "python": "3", "threads": 1}


def report(Ts: dict) -> dict:
    return {"by_T": Ts, "command": "the sweep", "machine": MACHINE, "date": "2026-12-03 07:04 UTC",
            "plan": {"target": 0.95, "Ts": [int(T) for T in Ts]}, "flops_formula": "f"}


def clone_dir(tmp, T: int):
    """docs/ like a clone's: the registered matched.md and a made-up sweep at T in matched.json."""
    (tmp / "docs").mkdir(parents=True)
    (tmp / "docs" / "matched.json").write_text(json.dumps(report({str(T): sweep(2, {})})))
    shutil.copy(ROOT / "docs" / "matched.md", tmp / "docs" / "matched.md")
    (tmp / ".gitignore").write_text("runs/\n")
    return tmp


def test_the_quick_recheck_in_slices_resumes_and_writes_its_block_and_section(tmp_path):
    from tools.provenance import above_header

    out = clone_dir(tmp_path, 2)
    registered = above_header((out / "docs" / "matched.md").read_text(), "## Results")
    first = matched(out, *ARGS, "--workers", "2", "--hours", str((600 + 130) / 3600))   # fits the set-up only
    assert first.returncode == 0, first.stderr[-3000:]
    assert "1 jobs finished" in first.stdout and "continue with:\n  python -m studies.matched --quick" in first.stdout
    status, torch_loaded = status_without_torch("studies.matched", out)
    assert "T2-recheck-rft-quick" in status and "set-up: 1 jobs recorded" in status and not torch_loaded
    assert "recheck_rft" not in json.loads((out / "docs" / "matched.json").read_text())["by_T"]["2"]   # nothing partial
    setup = json.loads((out / "docs" / "matched_jobs.json").read_text())["jobs"]["T2-recheck-rft-quick|setup"]
    assert set(setup["teachers"]) == {"teacher_binding", "teacher_recall"}

    again = matched(out, *ARGS, "--workers", "2", "--hours", "1")                          # the same command continues
    assert again.returncode == 0, again.stderr[-3000:]
    assert "nothing left: the study is recorded in full" in again.stdout
    disk = json.loads((out / "docs" / "matched.json").read_text())
    block = disk["by_T"]["2"]["recheck_rft"]
    assert set(block["rows"]) == {"mopd_kl", "rft"} and all(list(p) == ["0", "1"] for p in block["rows"].values())
    assert block["teacher_sha256"] == {d[len("teacher_"):]: t["sha256"] for d, t in setup["teachers"].items()}
    grid = block["grid"]["rft"]                                                            # RFT's grid, bracketed
    assert {(g["steps"], g["k"], g["lr"]) for g in grid} >= {(n, k, lr) for n, k in ((2, 2), (3, 1)) for lr in (1e-3, 3e-3)}
    assert any(g.get("extended") for g in grid) and block["chosen"]["rft"] in [
        {k: g[k] for k in ("steps", "k", "lr")} for g in grid]
    assert block["rows"]["rft"]["0"]["name"].startswith("rft_lr") and "(in slices: matched_jobs.json" in block["command"]
    assert disk["by_T"]["2"]["rows"] == sweep(2, {})["rows"]                               # the sweep's rows kept
    page = (out / "docs" / "matched.md").read_text()
    assert page.startswith(registered)                                                     # the registered text kept
    section = page[page.index("### Re-check at T = 2: MOPD exact KL and RFT"):]
    assert "by_T.2.recheck_rft" in section and "kept no hash of its teachers" in section
    assert "| MOPD exact KL minus RFT (rejection-sampled SFT), this re-check |" in section
    assert "| MOPD exact KL minus RFT (rejection-sampled SFT), the sweep's recorded run |" in section
    assert "**Not in use**: 2 seeds recorded" in section                                  # 2 seeds: not the page's 5
    assert "(the re-check's, below" not in page


def test_a_complete_recheck_takes_the_sweeps_place_in_the_registered_comparison(tmp_path, monkeypatch):
    monkeypatch.delenv("MOPD_FAST", raising=False)
    from studies import matched as study

    Ts = {"200": sweep(5, {}), "400": sweep(5, {"rft": [0.05, 0.04, 0.06, 0.05, 0.03]})}
    fresh = sweep(5, {"rft": [-0.02, 0.01, -0.01, 0.00, 0.02]})
    block = {**{k: fresh[k] for k in ("refs", "seeds_done")}, "rows": {m: fresh["rows"][m] for m in ("mopd_kl", "rft")},
             "chosen": {"mopd_kl": {"lr": 1e-3}, "rft": {"steps": 600, "k": 4, "lr": 3e-3}},
             "grid": {"mopd_kl": [{"lr": lr, "name": "x", "mean": 0.5} for lr in (3e-4, 1e-3, 3e-3, 1e-2)],
                      "rft": [{"steps": 600, "k": 4, "lr": lr, "name": "x", "mean": m} for lr, m in
                              ((3e-4, 0.4), (1e-3, 0.5), (3e-3, 0.6), (1e-2, 0.55))]},
             "teacher_sha256": {"binding": "a" * 64, "recall": "b" * 64}, "plan": {"val_n": 300, "target": 0.95},
             "command": "python -m studies.matched --T 400 --recheck rft --seeds 0 1 2 3 4 --workers 2 --hours 1.5",
             "date": "2026-12-07 00:00 UTC", "machine": MACHINE}
    before = study.family(report(Ts))
    rep = report({**Ts, "400": {**Ts["400"], "recheck_rft": block}})
    assert study.compared_rows(rep["by_T"]["400"], "mopd_kl", "rft") == (block["rows"], "recheck_rft")
    assert study.compared_rows(rep["by_T"]["400"], "mopd_kl", "mixrl")[1] is None        # only its own comparison
    after = study.family(rep)
    assert after[(400, "mopd_kl", "rft")]["diff"] == pytest.approx(0.0) != before[(400, "mopd_kl", "rft")]["diff"]
    assert before[(400, "mopd_kl", "rft")]["diff"] == pytest.approx(-0.046)
    assert {v["m"] for v in after.values()} == {v["m"] for v in before.values()} == {10}   # in place, not added
    # the other comparisons' own numbers stay; their level in Holm's step-down (alpha_holm, the interval at it
    # and the reading that prints it) may move, since where the step-down stops depends on every p of the family
    holm_level = {"alpha_holm", "lo_holm", "hi_holm", "reading"}
    same = lambda v: {k: x for k, x in v.items() if k not in holm_level}  # noqa: E731
    assert same(after[(400, "mopd_kl", "mixrl")]) == same(before[(400, "mopd_kl", "mixrl")])

    saved, out = tmp_path / "rendered.json", tmp_path / "docs"
    out.mkdir()
    (out / "matched.json").write_text(json.dumps(report(Ts)))
    registered = (ROOT / "docs" / "matched.md").read_text().split(study.RESULTS)[0]  # the page without results:
    (out / "matched.md").write_text(registered)        # the made-up sweep has fewer rows than the real one
    saved.write_text(json.dumps(rep))
    study.main(["--render", str(saved), "--recheck", "rft", "--out", str(out)])
    page = (out / "matched.md").read_text()
    assert json.loads((out / "matched.json").read_text())["by_T"]["400"]["recheck_rft"] == block
    assert page.count("| MOPD exact KL minus RFT (rejection-sampled SFT) (the re-check's, below: fresh teachers) |") == 1
    assert "**The registered comparison at T = 400 now reads from this re-check**" in page
    assert "sha256 binding aaaaaaaaaaaaaaaa, recall bbbbbbbbbbbbbbbb; the sweep's recorded run at T = 400 kept no hash" in page
    assert '{"steps": 600, "k": 4, "lr": 0.003} |' in page and "not bracketed" not in page.split("### Re-check")[1]
    study.main(["--render", str(saved), "--recheck", "rft", "--out", str(out)])
    assert (out / "matched.md").read_text() == page                                      # a function of the JSON

    short = {**block, "seeds_done": [0, 1, 2], "rows": {m: {s: r for s, r in p.items() if s in "012"}
                                                        for m, p in block["rows"].items()}}
    part = report({**Ts, "400": {**Ts["400"], "recheck_rft": short}})
    assert study.family(part)[(400, "mopd_kl", "rft")] == before[(400, "mopd_kl", "rft")]
    assert "**Not in use**: 3 seeds recorded" in study.results_markdown(part)
    with pytest.raises(SystemExit, match="one at a time"):
        study.main(["--quick", "--cures", "--recheck", "rft", "--no-write"])
