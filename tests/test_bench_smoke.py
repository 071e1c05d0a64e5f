"""The benchmark scripts still run: each bench/ module at its smallest configuration (a few
seconds each), printing only (docs/benchmarks.md is left alone). The figures themselves come
from `make bench`, not from tests."""

import importlib

import pytest

SCRIPTS = {  # module: arguments of its smallest run
    "step_vs_sft": ["--quick"],
    "routing": ["--quick"],
    "loss_memory": ["--quick"],
    "speedups": ["--quick"],
    "course_stages": ["--quick"],
    "gpu_h200": ["--dry-run", "--no-write"],
    "real_size_cpu": ["--quick"],
}


@pytest.mark.parametrize("name", SCRIPTS)
def test_bench_script_runs(name, monkeypatch, tmp_path):
    monkeypatch.delenv("MOPD_FAST", raising=False)      # course_stages refuses the CI mode in full runs only
    module = importlib.import_module(f"bench.{name}")
    common = importlib.import_module("bench.common")
    doc = tmp_path / "benchmarks.md"
    monkeypatch.setattr(common, "DOC", doc)             # even a write would land in tmp_path
    module.main(SCRIPTS[name] + ["--no-write"] if "--no-write" not in SCRIPTS[name] else SCRIPTS[name])
    assert not doc.exists()


def test_run_all_lists_every_script():
    run_all = importlib.import_module("bench.run_all")
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


def test_ablations_quick(monkeypatch, tmp_path):
    """bench.ablations --quick runs every study's code path (3 steps per run, in memory) and
    writes nothing; its summary has every study."""
    monkeypatch.delenv("MOPD_FAST", raising=False)
    ablations = importlib.import_module("bench.ablations")
    monkeypatch.setattr(ablations, "DOCS", tmp_path)
    results, summary = ablations.main(["--quick", "--no-write"])
    assert not any(tmp_path.iterdir())
    assert {"origin", "rounds", "ucmopd"} <= set(summary)
    assert summary["origin"]["initial_kl"]["ratio"][0] > 0
    assert set(summary["ucmopd"]["settings"]) == {"two", "preserve"}
