"""The benchmark scripts still run: each bench/ module at its smallest configuration (a few
seconds each), printing only (docs/benchmarks.md is left alone). The figures themselves come
from `make bench`, not from tests."""

import importlib

import pytest

SCRIPTS = {  # module: arguments of its smallest run
    "step_vs_sft": ["--quick"],
    "routing": ["--quick"],
    "loss_memory": ["--quick"],
    "loss_step": ["--quick"],
    "stuck_gradient": ["--quick"],
    "course_stages": ["--quick"],
    "gpu_h200": ["--dry-run", "--no-write"],
    "real_size_cpu": ["--quick"],
    "bf16_floor": ["--quick", "--no-cost"],
    "peers": ["--quick"],  # needs trl (the bench extra): skipped without it
    "scaling": ["--quick"],  # its TRL column only where trl is installed
}


@pytest.mark.parametrize("name", SCRIPTS)
def test_bench_script_runs(name, monkeypatch, tmp_path):
    if name == "peers":
        pytest.importorskip("trl", reason="bench.peers compares against TRL: pip install -e '.[bench]'")
    monkeypatch.delenv("MOPD_FAST", raising=False)      # course_stages refuses the CI mode in full runs only
    module = importlib.import_module(f"bench.{name}")
    common = importlib.import_module("bench.common")
    doc = tmp_path / "benchmarks.md"
    monkeypatch.setattr(common, "DOC", doc)             # even a write would land in tmp_path
    module.main(SCRIPTS[name] + ["--no-write"] if "--no-write" not in SCRIPTS[name] else SCRIPTS[name])
    assert not doc.exists()


def test_run_all_lists_every_script():
    run_all = importlib.import_module("tools.run_all")
    assert {m.__name__.split(".")[-1] for m, _ in run_all.BENCHMARKS.values()} == set(SCRIPTS)


def test_sections_are_rewritten_in_place(tmp_path):
    """write_section replaces a section and rebuilds the summary from the figures it stores."""
    common = importlib.import_module("bench.common")
    doc = tmp_path / "benchmarks.md"
    common.write_section("step", "## step\n\nold", {"a figure": {"goal": "<= 2x", "measured": "3x", "ok": False}}, doc)
    common.write_section("routing", "## routing", {"b figure": {"goal": "<= 1.1x", "measured": "1.0x", "ok": True}}, doc)
    common.write_section("step", "## step\n\nnew", {"a figure": {"goal": "<= 2x", "measured": "1.9x", "ok": True}}, doc)
    text = doc.read_text()
    assert "new" in text and "old" not in text and text.count("<!-- begin:step -->") == 1
    assert "| a figure | <= 2x | 1.9x | met |" in text and "| b figure | <= 1.1x | 1.0x | met |" in text
    assert text.index("begin:summary") < text.index("begin:step") < text.index("begin:routing")


def test_compare_commits_runs_a_command_on_both_trees(capsys):
    """The helper checks out a commit in a worktree, runs the command there and here, pulls the figure
    out of each output and removes the worktree afterwards."""
    import subprocess
    import sys

    compare_commits = importlib.import_module("bench.compare_commits")
    root = compare_commits.ROOT
    code = "import mopd_mini, pathlib; print('root=', pathlib.Path(mopd_mini.__file__).parents[1]); print('x=2.5')"
    res = compare_commits.main(["--base", "HEAD", "--repeats", "1", "--metric", "x=x=([0-9.]+)", "--",
                                sys.executable, "-c", code])
    assert res["base"]["x"] == res["head"]["x"] == [2.5]
    assert "| x | 2.5 | 2.5 | 1.000x |" in capsys.readouterr().out
    worktrees = subprocess.run(["git", "worktree", "list"], cwd=root, capture_output=True, text=True).stdout
    assert "mopd-compare-" not in worktrees
    with pytest.raises(ValueError, match="matched nothing"):
        compare_commits.main(["--base", "HEAD", "--repeats", "1", "--metric", "y=y=([0-9.]+)", "--",
                              sys.executable, "-c", "print('x=1')"])


def test_the_stuck_detector_cost_bench_runs():
    """bench.stuck_cost (prints only; not in `make bench`): one on/off pair per asked loss form, each
    timed on steps that ran."""
    out = importlib.import_module("bench.stuck_cost").main(["--quick"])
    assert set(out) == {"kl"} and out["kl"]["on_ms"] > 0 and out["kl"]["off_ms"] > 0
