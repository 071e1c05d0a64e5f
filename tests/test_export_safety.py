"""The verl export is all or nothing and faithful to the run, and says clearly why it refuses: it builds in a staging folder and renames it into place, so an export
that fails or is killed before, during or after the teachers are written leaves `--out` as it was;
a non-empty `--out` is refused unless --force, which replaces a previous export whole; every setting of the run is
carried into verl's config or refused by name; and every user mistake is one line, before any write."""

import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from mopd_mini.export import tiny_run
from mopd_mini import MOPDConfig, get_domains
from mopd_mini import export
from mopd_mini.export import folder as export_folder, write as export_write  # where the export looks its steps up
from mopd_mini.adapters import BASE
from mopd_mini.export import CARRIED, NO_EFFECT, REFUSED, main, read_run

pytest.importorskip("pyarrow")
yaml = pytest.importorskip("yaml")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return tiny_run(tmp_path_factory.mktemp("safety") / "work")


@pytest.fixture(scope="module")
def exported_a(run, tmp_path_factory):
    """Run A's export, kept pristine: each test copies it."""
    out = tmp_path_factory.mktemp("a") / "out"
    main(["verl", "--run", str(run), "--out", str(out)])
    return out


def digest(folder: Path) -> dict:
    """{relative path: sha256} of every file under `folder`."""
    return {str(f.relative_to(folder)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(folder.rglob("*")) if f.is_file()}


def leftovers(parent: Path, name: str) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(f".{name}."))


def overrides(out: Path) -> dict:
    return dict(o.split("=", 1) for o in yaml.safe_load((out / "verl_config.yaml").read_text())["overrides"])


def variant(run: Path, tmp_path: Path, **config) -> Path:
    """A copy of the run whose student config.json has `config` on top."""
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    path = copy / "student" / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **config}))
    return copy


def swapped(run: Path) -> list[str]:
    """Run B: the same run with its two teachers swapped (binding's teacher is recall's adapter)."""
    return ["--teacher", f"binding={run / 'teacher_recall'}", "--teacher", f"recall={run / 'teacher_binding'}",
            "--allow-domain-mismatch"]


# ------------------------------------------------------------------------------ item 2: all or nothing

def test_a_non_empty_out_is_refused_and_force_replaces_it_whole(run, exported_a, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(exported_a, out)
    (out / "teachers" / "math").mkdir()  # a file the export's marker does not list: refused, named
    (out / "teachers" / "math" / "model.safetensors").write_bytes(b"old")
    before = digest(out)
    with pytest.raises(SystemExit, match=r"export refused: --out .* exists and is not empty .*pass --force"):
        main(["verl", "--run", str(run), "--out", str(out)] + swapped(run))
    with pytest.raises(SystemExit, match=r"its export did not write: teachers/math/model.safetensors"):
        main(["verl", "--run", str(run), "--out", str(out), "--force"] + swapped(run))
    assert digest(out) == before
    (out / "teachers" / "math" / "model.safetensors").unlink()
    before = digest(out)
    main(["verl", "--run", str(run), "--out", str(out), "--force"] + swapped(run))
    assert not (out / "teachers" / "math").exists()  # replaced whole: nothing stale is kept
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~umask  # not mkdtemp's 0o700
    assert stat.S_IMODE((out / "teachers" / "binding" / "model.safetensors").stat().st_mode) == 0o666 & ~umask
    after = digest(out)
    assert after["teachers/binding/model.safetensors"] == before["teachers/recall/model.safetensors"]
    assert leftovers(tmp_path, "out") == []
    if sys.platform == "linux":  # the swap was one atomic step (renameat2), not two renames
        assert export_folder._exchange(tmp_path / "nothing", tmp_path / "nothing either") is False
        a, b = tmp_path / "a", tmp_path / "b"
        a.mkdir(), b.mkdir(), (a / "x").write_text("a")
        assert export_folder._exchange(a, b) and (b / "x").read_text() == "a" and not (a / "x").exists()


@pytest.mark.parametrize("where", ["before the teachers", "during the teachers", "after the teachers",
                                   "at the last file", "between the renames"])
def test_a_failed_re_export_leaves_the_old_export_whole(run, exported_a, tmp_path, monkeypatch, where):
    """Export B over A with --force, failing at each point: A's export stays byte for byte, and no
    staging folder is left behind."""
    out = tmp_path / "out"
    shutil.copytree(exported_a, out)
    before = digest(out)
    real_fold, real_replace, calls = export.fold_teacher, os.replace, []

    def fail(*a, **k):
        raise RuntimeError("killed")

    def fold_then_fail(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            real_fold(*a, **k)  # the second teacher is fully written, then the export dies
            raise RuntimeError("killed")
        return real_fold(*a, **k)

    def replace_once(src, dst):
        real_replace(src, dst)
        if Path(dst).name == "out" and Path(dst).parent.name.startswith(".out.old-"):
            raise RuntimeError("killed")  # the old export is aside, the new one not yet in place

    patch = {"before the teachers": ("save_base", fail), "during the teachers": ("fold_teacher", fold_then_fail),
             "after the teachers": ("write_parquet", fail), "at the last file": ("write_yaml", fail)}
    if where == "between the renames":  # where the system cannot swap two folders atomically
        monkeypatch.setattr(export_folder, "_exchange", lambda a, b: False)
        monkeypatch.setattr(export_folder.os, "replace", replace_once)
    else:
        monkeypatch.setattr(export_write, *patch[where])
    with pytest.raises(RuntimeError, match="killed"):
        main(["verl", "--run", str(run), "--out", str(out), "--force"] + swapped(run))
    if where == "between the renames":  # the one window: A is whole, aside, under its hidden name
        aside = [p for p in tmp_path.iterdir() if p.name.startswith(".out.old-")]
        assert len(aside) == 1 and digest(aside[0] / "out") == before
        return
    assert digest(out) == before
    assert leftovers(tmp_path, "out") == []


SIGKILL_SCRIPT = r"""
import os, signal, sys
from mopd_mini import export
from mopd_mini.export import write   # build() looks fold_teacher and write_yaml up there
point, argv = sys.argv[1], sys.argv[2:]
real_fold, calls = export.fold_teacher, []
def fold(*a, **k):
    calls.append(1)
    result = real_fold(*a, **k)
    if point == "teacher" and len(calls) == 1:   # binding's teacher rewritten: the issue's kill point
        os.kill(os.getpid(), signal.SIGKILL)
    return result
write.fold_teacher = fold
real_yaml = export.write_yaml
def write_yaml(*a, **k):
    if point == "yaml":
        os.kill(os.getpid(), signal.SIGKILL)
    return real_yaml(*a, **k)
write.write_yaml = write_yaml
export.main(argv)
"""


@pytest.mark.parametrize("point", ["teacher", "yaml"])
def test_a_sigkilled_re_export_leaves_the_old_export_whole(run, exported_a, tmp_path, point):
    """A real SIGKILL after B's binding teacher is written (and later, before its config): A's export
    is untouched; what B had written is in a hidden staging folder, never in --out."""
    out = tmp_path / "out"
    shutil.copytree(exported_a, out)
    before = digest(out)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", SIGKILL_SCRIPT, point, "verl", "--run", str(run), "--out", str(out),
                           "--force"] + swapped(run), env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    assert digest(out) == before
    staged = [p for p in tmp_path.iterdir() if p.name.startswith(".out.staging-")]
    assert len(staged) == 1 and (staged[0] / "teachers" / "binding" / "model.safetensors").exists()


# ------------------------------------------------------------------------------ item 3: faithful

def test_every_setting_is_carried_or_refused_or_has_no_effect():
    """A new MOPDConfig field must be classified here before the export runs it silently."""
    names = {f.name for f in fields(MOPDConfig)}
    groups = [set(CARRIED), set(NO_EFFECT), set(REFUSED)]
    assert set.union(*groups) == names
    assert sum(len(g) for g in groups) == len(names)  # each in exactly one


def test_the_runs_teachers_map_is_exported(run, tmp_path):
    """teachers={binding: a round-2 teacher, recall: base}: the export serves exactly those."""
    r = variant(run, tmp_path, teachers={"binding": "teacher_binding_r2", "recall": BASE})
    shutil.copytree(r / "teacher_recall", r / "teacher_binding_r2")  # a distinct adapter, under its own name
    cfg, teachers, _ = read_run(r)
    assert teachers == {"binding": r / "teacher_binding_r2", "recall": BASE}
    out = tmp_path / "out"
    with pytest.raises(SystemExit, match=r"binding is routed to .*teacher_binding_r2, whose record names \['recall'\]"
                                         r".*recall is routed to base, whose record names no domain"):
        main(["verl", "--run", str(r), "--out", str(out)])
    info = main(["verl", "--run", str(r), "--out", str(out), "--allow-domain-mismatch"])
    assert info["allow_domain_mismatch"] is True
    o = overrides(out)
    assert o["+distillation.teacher_models.recall.model_path"] == str(out / "student_base")
    assert o["+distillation.teacher_models.binding.model_path"] == str(out / "teachers" / "binding")
    assert not (out / "teachers" / "recall").exists() and info["fold_check"]["recall"] == {"base": True}
    assert info["teachers"]["binding"].endswith("teacher_binding_r2")
    assert info["mopd_config"]["teachers"] == {"binding": "teacher_binding_r2", "recall": BASE}
    r2 = digest(r / "teacher_binding_r2")
    assert r2 == digest(r / "teacher_recall")  # the exported binding teacher is the recall adapter folded in
    merged = out / "teachers" / "binding" / "model.safetensors"
    assert merged.exists()


def test_a_foreign_teacher_in_the_map_is_refused_by_name(run, tmp_path):
    r = variant(run, tmp_path, teachers={"binding": "teacher_binding_other"})
    with pytest.raises(SystemExit, match=r"routes binding to 'teacher_binding_other'.*--teacher binding=FOLDER"):
        main(["verl", "--run", str(r), "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("setting, value, pattern", [
    ("endorsement", {"seed": 0}, r"MOPDConfig.endorsement .*Teacher-Endorsement Filtering"),
    ("golden_gain", {"samples": 3, "temperature": 1.5, "top_p": 0.9, "importance_cap": None},
     r"MOPDConfig.golden_gain .*Golden-Gain"),
    ("init_from", "student_r1", r"MOPDConfig.init_from='student_r1'"),
    ("loss", "topk", r"MOPDConfig.loss='topk'"),
])
def test_settings_verl_cannot_carry_are_refused_by_name(run, tmp_path, setting, value, pattern):
    r = variant(run, tmp_path, **{setting: value})
    with pytest.raises(SystemExit, match=pattern):
        main(["verl", "--run", str(r), "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists() and leftovers(tmp_path, "out") == []


def test_a_student_lora_dropout_is_refused(run, tmp_path):
    r = variant(run, tmp_path)
    path = r / "student" / "adapter_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "lora_dropout": 0.1}))
    with pytest.raises(SystemExit, match=r"LoRA dropout is 0.1; verl 0.9.1's LoRA has no dropout"):
        main(["verl", "--run", str(r), "--out", str(tmp_path / "out")])


def test_the_runs_eval_split_and_steps_are_exported(run, tmp_path):
    import pyarrow.parquet as pq

    r = variant(run, tmp_path, eval_split="val", eval_n=2)
    out = tmp_path / "out"
    main(["verl", "--run", str(r), "--out", str(out)])
    cfg, _, _ = read_run(r)
    val = pq.read_table(out / "data" / "val.parquet").to_pylist()
    want = [ex for d in get_domains(cfg.domains).values() for L in d.eval_lengths for ex in d.examples("val", L, 2)]
    assert [v["reward_model"]["ground_truth"] for v in val] == [ex.answer for ex in want]
    assert [v["extra_info"]["raw_prompt"] for v in val] == [ex.prompt for ex in want]
    assert overrides(out)["trainer.total_training_steps"] == str(cfg.steps)


# ------------------------------------------------------------------------------ unclear errors

@pytest.mark.parametrize("args, pattern", [
    (["--teacher", "binding=/nonexistent"], r"no teacher adapter for binding at /nonexistent: adapter_config.json"),
    (["--teacher-tp", "0"], r"--teacher-tp must be a whole number >= 1, got 0"),
    (["--gpus", "0"], r"--gpus must be a whole number >= 1, got 0"),
    (["--teacher-gpus", "0"], r"--teacher-gpus must be a whole number >= 1"),
    (["--teacher", "binding"], r"--teacher takes DOMAIN=ADAPTER"),
    (["--base", "tiny-other"], r"the binding teacher does not fit --base tiny-other: .*On the command line: "
                               r"--allow-foreign"),
])
def test_export_mistakes_are_one_line_before_any_write(run, tmp_path, args, pattern):
    out = tmp_path / "out"
    with pytest.raises(SystemExit, match=pattern):
        main(["verl", "--run", str(run), "--out", str(out)] + args)
    assert list(tmp_path.iterdir()) == []


def test_a_run_missing_a_teacher_is_named(run, tmp_path):
    r = variant(run, tmp_path)
    shutil.rmtree(r / "teacher_recall")
    with pytest.raises(SystemExit, match=r"no teacher adapter for recall at .*teacher_recall: adapter_config.json "
                                         r"is missing. Train it, or give --teacher recall=FOLDER"):
        main(["verl", "--run", str(r), "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()
    with pytest.raises(SystemExit, match=r"no run folder at .*nowhere"):
        main(["verl", "--run", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out")])


def test_out_that_is_a_file_is_refused(run, tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(SystemExit, match=r"--out .*file is a file; give a folder"):
        main(["verl", "--run", str(run), "--out", str(tmp_path / "file")])

def test_a_read_only_parent_of_out_is_refused_before_any_write(run, tmp_path, monkeypatch):
    """os.access is patched for the folder: the tests run as root, who writes anywhere."""
    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.access
    monkeypatch.setattr(export_folder.os, "access", lambda p, mode: Path(p) != locked and real(p, mode))
    with pytest.raises(SystemExit, match=r"cannot write the export beside .*locked/out: .*locked is not a writable"):
        main(["verl", "--run", str(run), "--out", str(locked / "out")])
    assert list(locked.iterdir()) == []


def test_help_names_the_program_it_was_called_as(capsys):
    with pytest.raises(SystemExit):
        main(["verl", "--help"], prog="mopd-mini export")
    assert "usage: mopd-mini export verl" in capsys.readouterr().out
