"""mopd_mini.results_page, the learning-results page that `mopd-mini results` writes: its runs are
named from the flags, a missing run is refused before the base loads (with the study that trains
it), and its --help needs no torch."""

from pathlib import Path

import pytest

from mopd_mini import results_page, runs
from tests.test_cli_methods import help_in_a_fresh_process

ROOT = Path(__file__).resolve().parents[1]


def test_the_page_runs_are_named_from_the_flags():
    teachers, students = results_page.page_configs(results_page.results_parser().parse_args(
        ["--seeds", "0", "2", "--losses", "pg", "kl"]))
    assert [c.adapter for c in teachers] == ["teacher_binding", "teacher_recall"]
    assert {loss: [c.student for c in cs] for loss, cs in students.items()} == {
        "pg": ["student_pg_s0", "student_pg_s2"], "kl": ["student_kl_s0", "student_kl_s2"]}
    assert {c.experiment for c in teachers} == {results_page.EXPERIMENT}   # the page's own folder, in either mode
    assert [c.seed for c in students["kl"]] == [0, 2] and {c.loss for c in students["kl"]} == {"kl"}


def test_a_missing_run_is_refused_before_the_base_loads(tmp_path, monkeypatch, capsys):
    from mopd_mini import models

    monkeypatch.chdir(tmp_path)   # the page would be written to docs/ here
    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path)
    monkeypatch.setattr(models, "load_base", lambda *a, **k: pytest.fail("the base was loaded"))
    args = ["--seeds", "0", "--losses", "pg"]
    folder = tmp_path / results_page.EXPERIMENT
    (folder / "teacher_binding").mkdir(parents=True)
    (folder / "teacher_binding" / "adapter_config.json").write_text("{}")   # one finished run
    assert results_page.missing_runs(results_page.results_parser().parse_args(args)) == [
        folder / "teacher_recall", folder / "student_pg_s0"]
    assert results_page.main(args) == 2
    err = capsys.readouterr().err
    assert "mopd-mini results: error" in err and "python -m studies.results" in err
    assert str(folder / "student_pg_s0") in err and str(folder / "teacher_binding") not in err
    assert not (tmp_path / "docs").exists()


def test_the_results_command_help_imports_no_torch():
    out = help_in_a_fresh_process(["results", "--help"])
    assert "--seeds" in out and "torch imported: False" in out
