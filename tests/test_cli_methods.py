"""The command line runs every method the course teaches (mix-rl, cascade, distill with any teacher
map, rft, soft-labels, merge, export) through the library's own functions, and checks names, the
device, the model and the run folder before any work (exit status + message, nothing written)."""

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from mopd_mini import cli, runs
from mopd_mini.config import GoldenGain

ROOT = Path(__file__).resolve().parents[1]
GRPO = ["--steps", "2", "--prompts-per-step", "2", "--group-size", "2", "--eval-every", "2", "--eval-n", "2",
        "--checkpoint-every", "2", "--no-progress"]
MOPD = ["--steps", "2", "--prompts-per-domain", "2", "--eval-every", "2", "--eval-n", "2", "--checkpoint-every", "2",
        "--track-steps", "1", "--track-prompts", "1", "--no-progress"]
OFFLINE = ["--steps", "2", "--prompts-per-domain", "4", "--samples-per-prompt", "2", "--batch-size", "4",
           "--eval-every", "2", "--eval-n", "2", "--checkpoint-every", "2", "--no-progress"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """<runs-dir> with experiment `m`: both teachers (2 GRPO steps each) and a 2-step MOPD student."""
    root = tmp_path_factory.mktemp("methods")
    assert cli.main(["teachers", *GRPO, *where(root)]) == 0
    assert cli.main(["distill", *MOPD, *where(root)]) == 0
    return root


def where(root, experiment="m"):
    return ["--runs-dir", str(root), "--experiment", experiment, "--device", "cpu"]


def config(root, adapter, experiment="m"):
    return json.loads((root / experiment / adapter / "config.json").read_text())


def exit_code(argv) -> int:
    """cli.main's status: returned, or argparse's SystemExit for a flag it cannot parse."""
    try:
        return cli.main(argv)
    except SystemExit as done:
        return done.code


def weights(path: Path) -> dict:
    return load_file(str(path / "adapter_model.safetensors"))


# --------------------------------------------------------------------------- each method runs

def test_mix_rl_trains_one_adapter_on_every_domain(folder):
    """The GRPO loop over both domains into ONE adapter (the fix of `teachers --domain a b --name mix`)."""
    assert cli.main(["mix-rl", *GRPO, *where(folder)]) == 0
    assert config(folder, "mixrl")["domain"] == ["binding", "recall"]
    rows = runs.read_metrics(folder / "m" / "mixrl")
    assert len(rows) == 2 and all("reward/binding" in r and "reward/recall" in r for r in rows)


def test_cascade_starts_from_the_named_adapter(folder):
    """--init-from is loaded: with a vanishing learning rate the cascade's weights are the teacher's
    (a fresh adapter would have B = 0); the first stage's domain is kept in the evaluation."""
    assert cli.main(["cascade", "--init-from", "teacher_binding", "--domain", "recall", *GRPO, "--lr", "1e-12",
                     *where(folder)]) == 0
    cfg = config(folder, "cascade_binding_recall")
    assert cfg["init_from"] == "teacher_binding" and cfg["eval_domains"] == ["binding"]
    teacher, cascade = weights(folder / "m" / "teacher_binding"), weights(folder / "m" / "cascade_binding_recall")
    b = [k for k in teacher if "lora_B" in k]
    assert b and max(teacher[k].abs().max().item() for k in b) > 1e-4          # the teacher learned something
    assert max((teacher[k] - cascade[k]).abs().max().item() for k in teacher) < 1e-6
    assert any(k.startswith("acc/binding/") for k in runs.read_metrics(folder / "m" / "cascade_binding_recall")[-1])


def test_distill_takes_the_base_as_a_teacher(folder):
    """`--teachers recall=base`, the documented setting the command used to refuse."""
    assert cli.main(["distill", *MOPD, "--teachers", "recall=base", "--student", "s_base", *where(folder)]) == 0
    assert config(folder, "s_base")["teachers"] == {"recall": "base"}
    assert len(runs.read_metrics(folder / "m" / "s_base")) == 2


@pytest.mark.parametrize("command, adapter, loss", [("rft", "rft", "ce"), ("soft-labels", "soft", "soft")])
def test_offline_baselines_train_on_the_teachers_samples(folder, command, adapter, loss, capsys):
    assert cli.main([command, *OFFLINE, *where(folder)]) == 0
    assert config(folder, adapter)["loss"] == loss
    first = runs.read_metrics(folder / "m" / adapter)[0]
    assert first["step"] == 0 and first["sampled"] == 16 and 0 < first["kept"] <= 16
    assert "correct/sampled" in capsys.readouterr().out
    assert any((folder / "m" / "collect").iterdir())   # the teachers' samples, cached for the other loss


def test_merge_saves_the_merged_adapter_and_evaluate_reads_it(folder, capsys):
    assert cli.main(["merge", "--weights", "teacher_binding=1", "teacher_recall=0.5", *where(folder)]) == 0
    out = folder / "m" / "merge_cat"
    assert json.loads((out / "merge.json").read_text())["weights"] == {"teacher_binding": 1.0, "teacher_recall": 0.5}
    a = weights(out)
    assert a and all(torch.isfinite(t).all() for t in a.values())
    # cat stacks the two rank-r factors: rank r_b + r_r
    rank = json.loads((folder / "m" / "teacher_binding" / "adapter_config.json").read_text())["r"]
    assert json.loads((out / "adapter_config.json").read_text())["r"] == 2 * rank
    capsys.readouterr()
    assert cli.main(["evaluate", "--runs-dir", str(folder), "--experiment", "m", "--n", "2",
                     "--adapters", "teacher_binding", "teacher_recall", "merge_cat"]) == 0
    assert "| merge_cat |" in capsys.readouterr().out
    # a second merge of that name is refused unless --force
    assert cli.main(["merge", "--weights", "teacher_binding=1", "teacher_recall=1", *where(folder)]) == 2
    assert cli.main(["merge", "--weights", "teacher_binding=1", "teacher_recall=1", "--force", *where(folder)]) == 0


def test_export_gets_its_prog_name_when_main_takes_one(monkeypatch):
    seen = []
    monkeypatch.setitem(sys.modules, "mopd_mini.export", types.SimpleNamespace(
        main=lambda argv, prog="python -m mopd_mini.export": seen.append((argv, prog))))
    assert cli.main(["export", "verl", "--out", "x"]) == 0
    assert seen == [(["verl", "--out", "x"], "mopd-mini export")]


# ------------------------------------------------------------------------ checks before any work

@pytest.fixture
def no_compute(monkeypatch):
    """Fail the test if a command gets as far as loading the base."""
    def fail(*args, **kwargs):
        raise AssertionError("the base was loaded: the check came after the work")
    monkeypatch.setattr(cli, "_bank", fail)


@pytest.mark.parametrize("argv, message", [
    # the config's own check (runs.check_experiment) names these first, as the library does
    (["teachers", "--experiment", ""], "experiment='' is not a folder name"),
    (["teachers", "--experiment", "../escaped"], "experiment='../escaped' is not a folder name"),
    (["distill", "--experiment", "a/b"], "--experiment 'a/b' is not a valid name"),
    (["evaluate", "--experiment", ".."], "--experiment '..' is not a valid name"),
    (["teachers", "--device", "gpu"], "--device 'gpu' is not a device name"),
    (["teachers", "--domain", "binding", "recall", "--name", "mix"], "mopd-mini mix-rl"),
    (["mix-rl", "--domain", "binding"], "Mix-RL trains one adapter on several domains"),
    (["merge", "--weights", "teacher_binding=nan", "teacher_recall=1"], "with a finite number"),
    (["merge", "--weights", "teacher_binding=1"], "at least two adapters"),
    (["distill", "--golden-gain", "samples=x"], "GoldenGain field samples='x': expected int"),
    (["distill", "--golden-gain", "cap=2"], "unknown field 'cap'"),
    (["distill", "--teachers", "binding"], "'binding' is not KEY=VALUE"),
])
def test_a_bad_setting_is_refused_before_any_work(argv, message, tmp_path, capsys, no_compute):
    code = exit_code([*argv, "--runs-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err, err
    assert not any(tmp_path.iterdir()) and not (tmp_path.parent / "escaped").exists()


def test_malformed_options_name_the_syntax(capsys):
    """The error repeats the option's syntax (every field with its type)."""
    assert exit_code(["distill", "--golden-gain", "nonsense=1"]) == 2
    err = capsys.readouterr().err
    assert "argument --golden-gain" in err and "samples=INT,temperature=FLOAT,top_p=FLOAT,importance_cap=FLOAT|none" in err


def test_help_shows_the_syntax_of_structured_options(capsys):
    with pytest.raises(SystemExit):
        cli.main(["distill", "--help"])
    out = "".join(capsys.readouterr().out.split())
    assert "Syntax:on|none|samples=INT,temperature=FLOAT" in out and "--teachers[DOMAIN=TEACHER...]" in out
    assert "Syntax:KEY=VALUEwords" in out


def test_importance_cap_parses():
    """GoldenGain.importance_cap is `float | None`: it used to reach a parser of NoneType and never parse."""
    import argparse

    from mopd_mini import MOPDConfig

    parser = argparse.ArgumentParser()
    cli.add_config_flags(parser, MOPDConfig)
    values = cli.config_values(MOPDConfig, parser.parse_args(["--golden-gain", "importance_cap=2,samples=4"]))
    assert values["golden_gain"] == GoldenGain(samples=4, importance_cap=2.0)
    values = cli.config_values(MOPDConfig, parser.parse_args(["--golden-gain", "importance_cap=none"]))
    assert values["golden_gain"] == GoldenGain(importance_cap=None)


def test_the_cures_flags_are_listed_and_parse(capsys):
    """The stuck-student cures are MOPDConfig fields, so distill gets their flags from the dataclass."""
    import argparse

    from mopd_mini import MOPDConfig

    with pytest.raises(SystemExit):
        cli.main(["distill", "--help"])
    out = capsys.readouterr().out
    assert all(flag in out for flag in ("--beta", "--lmbda", "--lmbda-prefix", "--top-p", "--topk-support"))
    parser = argparse.ArgumentParser()
    cli.add_config_flags(parser, MOPDConfig)
    values = cli.config_values(MOPDConfig, parser.parse_args(
        ["--loss", "jsd", "--beta", "0.3", "--lmbda", "0.5", "--top-p", "0.9", "--lmbda-prefix", "gold",
         "--topk-support"]))
    assert {k: values[k] for k in ("loss", "beta", "lmbda", "top_p", "lmbda_prefix", "topk_support")} == dict(
        loss="jsd", beta=0.3, lmbda=0.5, top_p=0.9, lmbda_prefix="gold", topk_support=True)
    with pytest.raises(ValueError, match="topk_support=True has no effect with loss='jsd'"):
        MOPDConfig(**values).check()                                   # jsd ignores topk_support: refused
    MOPDConfig(**{**values, "topk_support": False}).check()            # jsd reads beta
    MOPDConfig(**{**values, "loss": "topk", "beta": 0.5}).check()      # Top-k reads topk_support
    values = cli.config_values(MOPDConfig, parser.parse_args(["--loss", "jsd", "--beta", "1.5"]))
    with pytest.raises(ValueError, match="beta"):
        MOPDConfig(**values).check()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_a_missing_gpu_is_a_clear_error(tmp_path, capsys, no_compute):
    assert cli.main(["teachers", "--device", "cuda", "--runs-dir", str(tmp_path)]) == 2
    assert "no CUDA GPU is available here; use --device cpu" in capsys.readouterr().err


@pytest.mark.parametrize("offline", [True, False])
def test_an_unreachable_model_fails_fast(offline, tmp_path, capsys, monkeypatch, no_compute):
    """Not a folder, not cached, and offline (HF_HUB_OFFLINE) or the hub unreachable: refused before the
    hub client's retries and before any base loads."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", offline)
    monkeypatch.setattr(cli, "_hub_reachable", lambda timeout=3.0: "no answer (test)")
    assert cli.main(["teachers", "--model", "nope/not-a-model", "--runs-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "not in the hub cache" in err and ("HF_HUB_OFFLINE" if offline else "no answer (test)") in err


def test_a_local_model_folder_needs_no_hub(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "_hub_reachable", lambda timeout=3.0: pytest.fail("the hub was probed"))
    cli.check_model(str(tmp_path))
    cli.check_model("tiny")


def test_a_runs_folder_that_cannot_be_written_fails_before_compute(tmp_path, capsys, no_compute):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    assert cli.main(["teachers", "--runs-dir", str(blocker), "--experiment", "x"]) == 2
    assert f"the run folder {blocker / 'x'} cannot be written" in capsys.readouterr().err


def test_a_student_may_not_overwrite_a_teacher(folder, capsys):
    """A teacher's name as the output, or an adapter-only folder (a copied teacher): refused, files kept."""
    teacher = folder / "m" / "teacher_binding"
    before = (teacher / "adapter_model.safetensors").read_bytes()
    assert cli.main(["distill", *MOPD, "--student", "teacher_binding", *where(folder)]) == 2
    assert "both an input" in capsys.readouterr().err
    assert cli.main(["distill", *MOPD, "--domains", "binding", "--student", "teacher_recall", *where(folder)]) == 2
    assert "a teacher's name" in capsys.readouterr().err
    copied = folder / "m" / "copied"
    copied.mkdir()
    for f in ("adapter_config.json", "adapter_model.safetensors", "mopd_mini.json"):
        (copied / f).write_bytes((teacher / f).read_bytes())
    assert cli.main(["mix-rl", *GRPO, "--name", "copied", *where(folder)]) == 2
    assert "no checkpoint.pt" in capsys.readouterr().err
    assert cli.main(["rft", *OFFLINE, "--name", "student", *where(folder)]) == 2
    assert "holds a MOPD student" in capsys.readouterr().err
    assert (teacher / "adapter_model.safetensors").read_bytes() == before
    assert (copied / "adapter_model.safetensors").read_bytes() == before


def help_in_a_fresh_process(argv: list[str]) -> str:
    """What `mopd-mini <argv>` prints in a new interpreter, then whether torch was imported."""
    code = (f"import sys\nfrom mopd_mini import cli\ntry:\n    cli.main({argv!r})\nexcept SystemExit:\n    pass\n"
            "print('torch imported:', 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_top_level_help_imports_no_torch():
    out = help_in_a_fresh_process(["--help"])
    assert "mix-rl" in out and "torch imported: False" in out


def test_the_lazy_package_keeps_its_names():
    """mopd_mini imports its names on first use (for the fast --help); `mopd_mini.evaluate` stays the
    function even when the submodule is imported first, and `from mopd_mini import *` gives every name."""
    code = ("import types, mopd_mini.evaluate, mopd_mini\nassert isinstance(mopd_mini.evaluate, types.FunctionType)\n"
            "ns = {}\nexec('from mopd_mini import *', ns)\nassert set(mopd_mini.__all__) <= set(ns)\n"
            "assert ns['evaluate'] is mopd_mini.evaluate and isinstance(mopd_mini.cost, types.ModuleType)\nprint('ok')")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
