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


def _trace():
    """Two recorded steps of a tracked binding and recall prompt, KL per sampled token."""
    rows = []
    for step, kls in ((1, {"binding": [0.5, 0.2, 3.0], "recall": [9.0, 0.1, 0.4]}),
                      (300, {"binding": [0.05, 0.6, 0.01], "recall": [0.3, 0.02, 0.2]})):
        for d, kl in kls.items():
            rows.append({"step": step, "domain": d, "answer": {"binding": "g3", "recall": "v92"}[d],
                         "tokens": ["▁x", "▁y", f"▁{d[0]}9"], "kl": kl, "prompt": "p", "advantage": [0.0] * 3})
    rows.append({**rows[0], "step": 150})                     # a middle step: not drawn
    return rows


def test_the_token_kl_figure_writes_the_data_its_caption_is_rendered_from(tmp_path, monkeypatch):
    """The README's caption of token_kl.png comes from the figure's own data (token_kl.json beside it):
    the first and last steps drawn, the largest cell at each and the next largest at the last; a changed
    value changes the caption."""
    monkeypatch.setattr(results_page, "page_machine", lambda: "a CPU")
    data = results_page.write_token_kl(_trace(), "student_pg_s0", "python -m studies.results --figure-only",
                                       folder=tmp_path)
    assert (tmp_path / "token_kl.png").stat().st_size > 0
    assert data == __import__("json").loads((tmp_path / "token_kl.json").read_text())
    assert data["steps"] == [1, 300] and {r["step"] for r in data["rows"]} == {1, 300} and len(data["rows"]) == 4
    caption = results_page.token_kl_caption(data)
    assert "At step 1 the largest cell is 9.00, the token `x` of a recall sample whose gold answer is `v92`" in caption
    assert "at step 300 the largest is 0.60 (`y`, a binding sample, gold `g3`), every other cell at most 0.30" in caption
    assert "(2 at each step drawn)" in caption and "`python -m studies.results --figure-only` on a CPU" in caption
    data["rows"][2]["kl"][1] = 0.7
    assert "at step 300 the largest is 0.70" in results_page.token_kl_caption(data)
