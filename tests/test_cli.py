"""Tests for the `mopd-mini` command line (mopd_mini/cli.py): flags built from the config
dataclasses (types, help from the field docstrings), each subcommand running a few steps into a
run folder, and bad values reported with the config's own message."""

import dataclasses
import os
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from mopd_mini import GRPOConfig, MOPDConfig, cli, runs

ROOT = Path(__file__).resolve().parents[1]
TINY_TEACHERS = ["--steps", "2", "--prompts-per-step", "2", "--group-size", "2", "--eval-every", "2",
                 "--eval-n", "2", "--checkpoint-every", "2"]
TINY_STUDENT = ["--steps", "2", "--prompts-per-domain", "2", "--eval-every", "2", "--eval-n", "2",
                "--checkpoint-every", "2", "--track-steps", "1", "--track-prompts", "1"]


def squash(text: str) -> str:
    """Text without whitespace: argparse re-wraps help lines."""
    return "".join(text.split())


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run folder made by the command line: `teachers` (both domains) then `distill`, a few steps each."""
    root = tmp_path_factory.mktemp("cli")
    common = ["--runs-dir", str(root), "--experiment", "cli", "--device", "cpu"]
    assert cli.main(["teachers", *TINY_TEACHERS, *common]) == 0
    assert cli.main(["distill", *TINY_STUDENT, "--loss", "kl", *common]) == 0
    return root


# -------------------------------------------------------------------------- flags from dataclasses

@pytest.mark.parametrize("command, config", [("teachers", GRPOConfig), ("distill", MOPDConfig)])
def test_help_lists_every_config_field_with_its_docstring(command, config, capsys):
    """--help names a flag for every field of the config, with the field's docstring as its help."""
    with pytest.raises(SystemExit) as done:
        cli.main([command, "--help"])
    assert done.value.code == 0
    out = squash(capsys.readouterr().out)
    docs = cli.field_docs(config)
    for f in dataclasses.fields(config):
        assert f"--{f.name.replace('_', '-')}" in out, f.name
        assert docs.get(f.name), f"{config.__name__}.{f.name} has no docstring under it"
        assert squash(docs[f.name]) in out, f.name


def test_top_level_help_lists_the_subcommands(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for command in ("teachers", "distill", "evaluate", "results", "course", "export"):
        assert command in out


@dataclass
class Example:
    """A config exercising every field type the builder supports."""

    name: str = "a"
    """a plain string (100% free text)"""
    count: int = 3
    """an int"""
    rate: float | None = 0.5
    """a float, or none"""
    flag: bool = True
    """a switch"""
    sizes: tuple[int, ...] = (1, 2)
    """several ints"""
    pair: tuple[float, float] = (0.0, 1.0)
    """exactly two floats"""
    domain: str | tuple[str, ...] = "binding"
    """one name or several"""
    mode: Literal["x", "y"] = "x"
    """one of two"""
    limit: int | None = None
    """an int, or none"""


def parse(argv):
    import argparse

    parser = argparse.ArgumentParser()
    cli.add_config_flags(parser, Example)
    return cli.config_values(Example, parser.parse_args(argv))


def test_the_builder_reads_every_supported_type():
    """str, int, float | None, bool (--flag / --no-flag), tuple[int, ...], tuple[float, float],
    str | tuple[str, ...] (one value stays a string), Literal, int | None; absent flags are absent."""
    assert parse([]) == {}
    got = parse(["--name", "b", "--count", "7", "--rate", "none", "--no-flag", "--sizes", "4", "5", "6",
                 "--pair", "0.5", "2", "--domain", "recall", "--mode", "y", "--limit", "9"])
    assert got == {"name": "b", "count": 7, "rate": None, "flag": False, "sizes": (4, 5, 6), "pair": (0.5, 2.0),
                   "domain": "recall", "mode": "y", "limit": 9}
    assert parse(["--domain", "binding", "recall", "--sizes", "--flag", "--rate", "1e-3"]) == {
        "domain": ("binding", "recall"), "sizes": (), "flag": True, "rate": 1e-3}
    assert Example(**got).sizes == (4, 5, 6)


@pytest.mark.parametrize("argv", [["--count", "x"], ["--rate", "fast"], ["--mode", "z"], ["--pair", "1"]])
def test_a_value_of_the_wrong_type_is_an_argparse_error(argv, capsys):
    with pytest.raises(SystemExit) as done:
        parse(argv)
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "invalid" in err or "expected" in err


def test_field_docs_are_the_string_under_each_field():
    docs = cli.field_docs(Example)
    assert docs["name"] == "a plain string (100% free text)" and docs["limit"] == "an int, or none"
    assert set(docs) == {f.name for f in dataclasses.fields(Example)}


def test_an_unsupported_field_type_is_refused():
    @dataclass
    class Bad:
        table: dict = dataclasses.field(default_factory=dict)

    import argparse

    with pytest.raises(TypeError, match="cannot make a flag"):
        cli.add_config_flags(argparse.ArgumentParser(), Bad)


# ---------------------------------------------------------------------------- bad values

@pytest.mark.parametrize("argv, config", [
    (["distill", "--loss", "nope"], MOPDConfig(loss="nope")),
    (["distill", "--clip", "-1"], MOPDConfig(clip=-1.0)),
    (["distill", "--domains", "binding", "maths"], MOPDConfig(domains=("binding", "maths"))),
    (["teachers", "--group-size", "1"], GRPOConfig(group_size=1)),
    (["teachers", "--domain", "maths"], GRPOConfig(domain="maths")),
    (["teachers", "--lr", "0"], GRPOConfig(lr=0.0)),
])
def test_a_bad_value_gets_the_configs_own_message(argv, config, capsys, tmp_path):
    """Exit status 2, the config's ValueError message on stderr, no traceback (and nothing trained)."""
    with pytest.raises(ValueError) as expected:
        config.check()
    assert cli.main([*argv, "--runs-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert str(expected.value) in err and "Traceback" not in err
    assert not any(tmp_path.iterdir())


def test_distill_without_teachers_says_how_to_train_them(tmp_path, capsys):
    assert cli.main(["distill", "--runs-dir", str(tmp_path), "--experiment", "none-yet"]) == 2
    assert "mopd-mini teachers --experiment none-yet" in capsys.readouterr().err


# --------------------------------------------------------------------------- the subcommands run

def test_teachers_and_distill_write_the_run_folders(trained, capsys):
    """`teachers` trained both domains and `distill` the student, into <runs-dir>/<experiment>/, with
    the given settings recorded; RUNS_DIR is restored afterwards."""
    folder = trained / "cli"
    for name in ("teacher_binding", "teacher_recall", "student"):
        assert (folder / name / "adapter_model.safetensors").exists(), name
        assert len(runs.read_metrics(folder / name)) == 2
    config = (folder / "student" / "config.json").read_text()
    assert '"loss": "kl"' in config and '"track_steps": [\n  1\n ]' in config
    assert (folder / "student" / "trace.json").exists()
    assert runs.RUNS_DIR == Path("runs")


def test_teachers_domain_trains_only_that_one(tmp_path):
    assert cli.main(["teachers", "--domain", "recall", *TINY_TEACHERS, "--runs-dir", str(tmp_path),
                     "--experiment", "one", "--no-progress"]) == 0
    assert [p.name for p in (tmp_path / "one").iterdir()] == ["teacher_recall"]


def test_evaluate_prints_the_table_and_normalised_scores(trained, capsys):
    assert cli.main(["evaluate", "--runs-dir", str(trained), "--experiment", "cli", "--n", "2"]) == 0
    out = capsys.readouterr().out
    rows = [line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| ")]
    assert rows[2:6] == ["base", "teacher_binding", "teacher_recall", "student"]
    assert "normalised score of student" in out and "denominator" in out


def test_evaluate_of_an_empty_folder_is_a_clear_error(tmp_path, capsys):
    assert cli.main(["evaluate", "--runs-dir", str(tmp_path), "--experiment", "nothing"]) == 2
    assert "no trained adapter" in capsys.readouterr().err


def test_results_runs_bench_results_with_its_flags(monkeypatch):
    seen = []
    monkeypatch.setattr(cli, "_bench_results", lambda: types.SimpleNamespace(main=seen.append))
    assert cli.main(["results", "--seeds", "0", "--losses", "pg"]) == 0
    assert seen == [["--seeds", "0", "--losses", "pg"]]


def test_results_without_bench_prints_the_table(trained, monkeypatch, capsys):
    monkeypatch.setattr(cli, "_bench_results", lambda: None)
    assert cli.main(["results", "--runs-dir", str(trained), "--experiment", "cli", "--n", "2"]) == 0
    captured = capsys.readouterr()
    assert "not importable" in captured.err and "| student |" in captured.out


def test_course_delegates_to_mopd_mini_course(monkeypatch):
    from mopd_mini import course

    seen = []
    monkeypatch.setattr(course, "main", seen.append)
    assert cli.main(["course", "--fast", "--only", "01"]) == 0
    assert seen == [["--fast", "--only", "01"]]


def test_ctrl_c_in_the_course_says_what_ran_and_how_to_run_the_rest(tmp_path, monkeypatch, capsys):
    """Before, Ctrl-C during `mopd-mini course` (or python -m mopd_mini.course) printed nbclient's
    traceback: the training commands' one line did not reach the delegated commands."""
    import shlex

    from mopd_mini import course

    books = tmp_path / "notebooks"
    books.mkdir()
    for name in ("01_a", "02_b", "03_c", "04_d"):
        (books / f"{name}.ipynb").write_text("{}")
    ran = []

    def execute(book, out_dir, stop_at=None):
        if book.stem == stop_at:
            raise KeyboardInterrupt
        ran.append(book.stem)
        return types.SimpleNamespace(nb=types.SimpleNamespace(cells=[]))

    monkeypatch.setattr(course, "execute", lambda book, out: execute(book, out, stop_at="02_b"))
    out = tmp_path / "built"
    argv = ["course", "--notebooks", str(books), "--out", str(out), "--only", "01", "02", "03"]
    assert cli.main(argv) == 130
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert "Traceback" not in err and last == (
        f"mopd-mini course: interrupted (Ctrl-C): 1 notebook(s) executed (01_a.ipynb; copies in {out}); 02_b.ipynb "
        "stopped (its training runs resume from their last checkpoints). Run the rest with: mopd-mini course "
        f"--notebooks {books} --out {out} --only 02_b 03_c"), err
    again = shlex.split(last.partition("Run the rest with: ")[2])
    monkeypatch.setattr(course, "execute", execute)
    ran.clear()
    assert cli.main(again[1:]) == 0 and ran == ["02_b", "03_c"]              # the line's command runs the rest


def test_ctrl_c_while_a_command_starts_or_a_library_cleans_up_is_one_line(tmp_path, monkeypatch, capsys):
    """Measured with a real SIGINT under load: before, Ctrl-C while `mopd-mini export` imported torch
    gave a traceback (the delegated module's import came before the handler), and Ctrl-C while the
    course's kernel started came out as nbclient's clean-up AssertionError (`assert self.km is not
    None`), raised while the interrupt unwound."""
    import importlib

    from mopd_mini import course
    from mopd_mini.cli import interrupt

    real_import = importlib.import_module

    def import_module(name, *a, **k):
        if name == "mopd_mini.export":
            raise KeyboardInterrupt
        return real_import(name, *a, **k)

    monkeypatch.setattr(importlib, "import_module", import_module)
    assert cli.main(["export", "verl", "--out", "x y"]) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines() == [
        "mopd-mini export: interrupted (Ctrl-C): it stopped while starting: nothing was written. Run the same "
        "command again: mopd-mini export verl --out 'x y'"]
    monkeypatch.undo()

    books = tmp_path / "notebooks"
    books.mkdir()
    (books / "01_a.ipynb").write_text("{}")

    def kernel_starts(book, out):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            assert None is not None   # what nbclient's _async_cleanup_kernel raises on the way out

    monkeypatch.setattr(course, "execute", kernel_starts)
    assert cli.main(["course", "--notebooks", str(books), "--out", str(tmp_path / "out")]) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and "mopd-mini course: interrupted (Ctrl-C): no notebook finished; 01_a.ipynb " \
        "stopped" in err.strip().splitlines()[-1]
    def kernel_dies():   # a real SIGINT (the terminal's, to the process group): nbclient swallows it, then fails
        import signal

        try:
            os.kill(os.getpid(), signal.SIGINT)
        except KeyboardInterrupt:
            pass
        raise RuntimeError("Kernel died while it ran")

    monkeypatch.setattr(course, "execute", lambda book, out: kernel_dies())
    assert cli.main(["course", "--notebooks", str(books), "--out", str(tmp_path / "out")]) == 130
    assert "mopd-mini course: interrupted (Ctrl-C): no notebook finished" in capsys.readouterr().err

    def nbclient_took_sigint():   # the course's kernel client notes Ctrl-C (nbclient's handler, not Python's, takes it)
        interrupt.note_ctrl_c()
        raise AssertionError   # nbclient: the kernel shut down, the cell failed, its clean-up asserts

    monkeypatch.setattr(course, "execute", lambda book, out: nbclient_took_sigint())
    assert cli.main(["course", "--notebooks", str(books), "--out", str(tmp_path / "out")]) == 130
    assert "mopd-mini course: interrupted (Ctrl-C): no notebook finished" in capsys.readouterr().err

    def bug():
        raise AssertionError("a real bug")

    with pytest.raises(AssertionError, match="a real bug"):   # without Ctrl-C behind it: not taken for one
        interrupt.interruptible("p", bug, lambda: "")


def test_export_delegates_or_says_it_is_missing(monkeypatch, capsys):
    seen = []
    monkeypatch.setitem(sys.modules, "mopd_mini.export", types.SimpleNamespace(main=seen.append))
    assert cli.main(["export", "verl", "--out", "x"]) == 0
    assert seen == [["verl", "--out", "x"]]
    monkeypatch.setitem(sys.modules, "mopd_mini.export", None)  # an import of it fails
    assert cli.main(["export", "verl"]) == 2
    assert "no mopd_mini.export" in capsys.readouterr().err


def test_python_dash_m_runs_the_same_command_line():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "mopd_mini.cli", "teachers", "--help"], cwd=ROOT,
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0 and "--group-size" in done.stdout


def test_the_console_script_entry_point_is_cli_main():
    """pyproject's [project.scripts] names mopd-mini -> mopd_mini.cli:main (what pip installs)."""
    tomllib = pytest.importorskip("tomllib")
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, name = scripts["mopd-mini"].partition(":")
    assert module == "mopd_mini.cli" and getattr(cli, name) is cli.main


def test_dict_and_option_fields_parse_from_words():
    """MOPDConfig.teachers takes domain=teacher words; UCMOPD's options take `on` or name=value pairs."""
    import argparse
    from mopd_mini import MOPDConfig
    from mopd_mini.cli import add_config_flags, config_values
    from mopd_mini.config import Endorsement, GoldenGain
    parser = argparse.ArgumentParser()
    add_config_flags(parser, MOPDConfig)
    values = config_values(MOPDConfig, parser.parse_args(
        ["--teachers", "binding=teacher_other", "recall=base", "--golden-gain", "samples=5,temperature=2.0",
         "--endorsement", "on"]))
    assert values["teachers"] == {"binding": "teacher_other", "recall": "base"}
    assert values["golden_gain"] == GoldenGain(samples=5, temperature=2.0)
    assert values["endorsement"] == Endorsement()
    assert config_values(MOPDConfig, parser.parse_args(["--golden-gain", "none"]))["golden_gain"] is None
    for bad in (["--teachers", "binding"], ["--golden-gain", "nonsense=1"]):
        with pytest.raises(SystemExit):
            parser.parse_args(bad)


def test_evaluate_over_the_regime_domains(tmp_path, capsys):
    """evaluate --domains: the regime study's domains by name (chain's four depths), the course's
    by default; an unknown name is a clear error."""
    common = ["--runs-dir", str(tmp_path), "--experiment", "reg", "--device", "cpu"]
    assert cli.main(["teachers", "--domain", "chain", "--max-new-tokens", "8", *TINY_TEACHERS, *common]) == 0
    capsys.readouterr()
    assert cli.main(["evaluate", *common, "--n", "2", "--domains", "chain"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("| model"))
    assert [c.strip() for c in header.split("|")[2:-1]] == ["chain L2", "chain L3", "chain L4", "chain L5"]
    assert [line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| ")][2:] == \
        ["base", "teacher_chain"]
    assert cli.main(["evaluate", *common, "--n", "2"]) == 0             # the course's domains
    assert "binding L16" in capsys.readouterr().out
    assert cli.main(["evaluate", *common, "--n", "2", "--domains", "chains"]) == 2
    assert "unknown domain" in capsys.readouterr().err
