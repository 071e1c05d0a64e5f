"""Nothing is overwritten that the user did not name as the output:
a trainer never trains over an adapter of another role, on disk or in the bank; a finished run
re-run with other settings is refused with the difference named and its record is not rewritten;
merge weights are finite; run folders cannot be empty or escape runs/; a foreign teacher's name
and an adapter's cannot collide; and every file is group-readable as the umask says."""

import copy
import json
import os
import stat

import pytest
import torch

from mopd_mini import AdapterBank, GRPOConfig, MOPDConfig, load_base, runs, train_grpo, train_student
from mopd_mini.adapters import atomic_write, check_adapter_name
from mopd_mini.merge import merge
from mopd_mini.config import OfflineConfig
from mopd_mini.offline import collect, train_offline


@pytest.fixture
def runs_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path / "runs")
    return tmp_path / "runs"


def teacher(**kw):
    return GRPOConfig(**{**dict(steps=1, prompts_per_step=2, group_size=2, eval_every=0, experiment="x",
                                progress=False), **kw})


def student(**kw):
    return MOPDConfig(**{**dict(steps=1, prompts_per_domain=2, topk=8, eval_every=0, track_steps=(),
                                experiment="x", progress=False), **kw})


def files(folder):
    """{file name: bytes} of a folder."""
    return {f.name: f.read_bytes() for f in sorted(folder.iterdir()) if f.is_file()}


def trained_teachers(bank):
    for d in ("binding", "recall"):
        train_grpo(bank, teacher(domain=d))


# ------------------------------------------------------------------------------ item 1: roles

@pytest.mark.parametrize("keep", ["adapter files and config.json", "adapter files only", "a checkpoint too"])
def test_a_student_never_overwrites_a_teacher_on_disk(bank, tiny, runs_dir, keep):
    """The issue's case: `--student teacher_binding` in a run whose teachers are on disk. Refused
    before any work, the teacher's files byte for byte unchanged, and no advice to delete it: by the
    folder's role (a fresh process's bank, which has not loaded that teacher) and by the bank's."""
    trained_teachers(bank)
    folder = runs_dir / "x" / "teacher_binding"
    if keep != "a checkpoint too":
        (folder / "checkpoint.pt").unlink()
    if keep == "adapter files only":
        for f in ("config.json", "metrics.jsonl"):
            (folder / f).unlink()
    before = files(folder)
    fresh = AdapterBank(copy.deepcopy(tiny[0]), tiny[1])
    fresh.load("teacher_recall", runs_dir / "x" / "teacher_recall")
    cfg = student(student="teacher_binding", teachers={"binding": "teacher_recall"})
    with pytest.raises(ValueError, match=r"holds .*never overwrites it\. Give this run another name \(student=") as err:
        train_student(fresh, cfg)
    assert "delete" not in str(err.value) and fresh.names == ["teacher_recall"]
    fresh.load("teacher_binding", folder)
    with pytest.raises(ValueError, match=r"never (trains over|overwrites) it") as err:
        train_student(fresh, cfg)
    assert "delete" not in str(err.value)
    assert files(folder) == before


def test_a_student_named_as_its_own_teacher_is_refused_in_memory(teacher_bank):
    """experiment=None: no folder to guard, but the student would distil from itself (KL 0)."""
    before = teacher_bank.state("teacher_binding")
    with pytest.raises(ValueError, match=r"student='teacher_binding' is the teacher of \['binding'\]"):
        train_student(teacher_bank, student(student="teacher_binding", experiment=None))
    assert all(torch.equal(p, before[n]) for n, p in teacher_bank.state("teacher_binding").items())


def test_no_trainer_trains_over_another_roles_adapter(bank, runs_dir):
    """A teacher over a student's folder, an offline student over a teacher's, a student over a
    merged adapter in the bank: each refused, naming what the adapter is."""
    trained_teachers(bank)
    train_student(bank, student())
    with pytest.raises(ValueError, match=r"is an MOPD student \(train_student\); a GRPO adapter"):
        train_grpo(bank, teacher(name="student"))
    with pytest.raises(ValueError, match=r"is a teacher's name; give the student another name"):
        train_offline(bank, OfflineConfig(name="teacher_binding", experiment="x", steps=1, prompts_per_domain=2,
                                          samples_per_prompt=2, progress=False, eval_every=0))
    merge(bank, "merged", {"teacher_binding": 1.0, "teacher_recall": 1.0})
    with pytest.raises(ValueError, match=r"'merged' in the bank is a merged adapter .* never trains over it"):
        train_student(bank, student(student="merged", experiment=None))
    with pytest.raises(ValueError, match=r"'teacher_binding' in the bank is a GRPO adapter .*; a merged adapter"):
        merge(bank, "teacher_binding", {"student": 1.0, "teacher_recall": 1.0})


def test_an_adapter_without_a_checkpoint_is_never_retrained(bank, runs_dir):
    """Same role, but nothing to resume from: training from step 1 would replace the weights."""
    train_grpo(bank, teacher())
    folder = runs_dir / "x" / "teacher_binding"
    (folder / "checkpoint.pt").unlink()
    before = files(folder)
    with pytest.raises(ValueError, match=r"holds a trained adapter but no checkpoint.pt to resume from"):
        train_grpo(bank, teacher())
    assert files(folder) == before


# ------------------------------------------------------------------------------ item 4: the record

def test_a_finished_run_re_run_with_fewer_steps_is_refused_and_keeps_its_record(bank, runs_dir):
    trained_teachers(bank)
    train_student(bank, student(steps=3))
    folder = runs_dir / "x" / "student"
    before = files(folder)
    with pytest.raises(ValueError, match=r"holds a run of 3 steps; steps=1 would not train.*ask for steps=3"):
        train_student(bank, student(steps=1))
    with pytest.raises(ValueError, match=r"another config \(teachers: saved None, now \{'recall': 'base'\}\)"):
        train_student(bank, student(steps=3, teachers={"recall": "base"}))
    assert files(folder) == before
    mtimes = {f.name: f.stat().st_mtime_ns for f in folder.iterdir()}
    run = train_student(bank, student(steps=3, eval_every=7, progress=True))  # reloaded: nothing trains
    assert run.config["eval_every"] == 0 and len(run.metrics) == 3
    assert files(folder) == before
    assert {f.name: f.stat().st_mtime_ns for f in folder.iterdir()} == mtimes  # not even rewritten
    train_student(bank, student(steps=4))  # more steps: a run with this config trains, and says so
    assert json.loads((folder / "config.json").read_text())["steps"] == 4


# ------------------------------------------------------------------------------ item 5: merge weights

GUARD = r"merge.merge: weights=\{{'teacher_binding': {}, 'teacher_recall': 1.0\}} is not a dict of a str to a finite float"


@pytest.mark.parametrize("w, pattern", [(float("nan"), GUARD.format("nan")), (float("inf"), GUARD.format("inf")),
                                        ("1", GUARD.format("'1'")), (None, GUARD.format("None")),
                                        (True, GUARD.format("True")), (0.0, "every merge weight is 0")])
def test_merge_weights_must_be_finite_numbers(teacher_bank, w, pattern):
    """From outside the package the entry-point guard names the argument (mopd_mini.validate); merge's own
    check (finite numbers, not all 0) answers the package's callers, the command line's merge."""
    with pytest.raises(ValueError, match=pattern):
        merge(teacher_bank, "m", {"teacher_binding": w, "teacher_recall": 0.0 if w == 0.0 else 1.0})
    assert "m" not in teacher_bank.names


@pytest.mark.parametrize("w, pattern", [(float("nan"), "finite number, got nan"), (float("inf"), "got inf"),
                                        ("1", "got '1'"), (None, "got None"), (True, "got True")])
def test_merges_own_check_answers_the_packages_callers(teacher_bank, w, pattern):
    inside = {"__name__": "mopd_mini.cli.commands", "merge": merge, "bank": teacher_bank, "w": w}
    with pytest.raises(ValueError, match=pattern):
        exec("merge(bank, 'm', {'teacher_binding': w, 'teacher_recall': 1.0})", inside)
    assert "m" not in teacher_bank.names


# ------------------------------------------------------------------------------ item 6: names

@pytest.mark.parametrize("experiment", ["", " ", "../escaped", "a/../../b", "/tmp/abs", "a//b", ".", "x "])
def test_run_folders_cannot_be_empty_or_escape_runs(bank, runs_dir, experiment):
    with pytest.raises(ValueError, match=r"is not a folder name inside"):
        train_grpo(bank, teacher(experiment=experiment))
    assert not runs_dir.exists() and bank.names == []


@pytest.mark.parametrize("name", ["../t", "a/b", "a.b", " t", ".."])
def test_adapter_names_cannot_escape_their_folder(bank, runs_dir, name):
    with pytest.raises(ValueError, match=r"the adapter name .* must be a non-empty name"):
        train_grpo(bank, teacher(name=name))
    assert not runs_dir.exists() and bank.names == []


def test_nested_experiments_stay_allowed(bank, runs_dir):
    assert runs.check_experiment("ablations/other_strong") == "ablations/other_strong"
    assert check_adapter_name("teacher_binding_r2") == "teacher_binding_r2"


def test_a_runs_folder_that_cannot_be_made_fails_before_any_compute(bank, runs_dir, monkeypatch):
    runs_dir.parent.mkdir(parents=True, exist_ok=True)
    runs_dir.write_text("a file where the runs folder should be")
    calls = []
    monkeypatch.setattr("mopd_mini.grpo.sample", lambda *a, **k: calls.append(1))
    with pytest.raises(ValueError, match=r"cannot create the run folder .*is a file, not a folder"):
        train_grpo(bank, teacher())
    assert calls == []


def test_a_read_only_runs_folder_fails_before_any_compute(bank, runs_dir, monkeypatch):
    """os.access is patched for runs/: the tests run as root, who writes anywhere."""
    runs_dir.mkdir(parents=True)
    real, calls = os.access, []
    monkeypatch.setattr("mopd_mini.runs.os.access", lambda p, mode: p != runs_dir and real(p, mode))
    monkeypatch.setattr("mopd_mini.grpo.sample", lambda *a, **k: calls.append(1))
    with pytest.raises(ValueError, match=r"cannot write the run folder .*runs/x/teacher_binding: .*runs is not "
                                         r"writable by this user.*experiment=None"):
        train_grpo(bank, teacher())
    assert calls == [] and list(runs_dir.iterdir()) == []


# ------------------------------------------------------------------------------ item 7: foreign names

def test_a_foreign_teachers_name_and_an_adapters_cannot_collide(bank, tok):
    other = AdapterBank(load_base("tiny", device="cpu")[0], tok)
    other.create("teacher_binding")
    bank.add_foreign("t_other", other, "teacher_binding")
    with pytest.raises(ValueError, match=r"'t_other' is already a foreign teacher of this bank"):
        bank.create("t_other")
    assert "t_other" not in bank.names
    with pytest.raises(ValueError, match=r"is a foreign teacher of this bank .* never trains over it"):
        train_grpo(bank, teacher(name="t_other", experiment=None))
    bank.create("mine")
    with pytest.raises(ValueError, match=r"'mine' is already an adapter of this bank"):
        bank.add_foreign("mine", other, "teacher_binding")
    assert "mine" not in bank.foreign


# ------------------------------------------------------------------------------ item 8: file modes

@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_files_are_as_readable_as_the_umask_says(bank, runs_dir, umask):
    old = os.umask(umask)
    try:
        atomic_write(runs_dir / "f.txt", b"x")
        train_grpo(bank, teacher())
    finally:
        os.umask(old)
    folder = runs_dir / "x" / "teacher_binding"
    want = 0o666 & ~umask
    assert stat.S_IMODE((runs_dir / "f.txt").stat().st_mode) == want
    modes = {f.name: stat.S_IMODE(f.stat().st_mode) for f in folder.iterdir()}
    assert {"adapter_model.safetensors", "adapter_config.json", "checkpoint.pt", "mopd_mini.json"} <= set(modes)
    assert modes == {name: want for name in modes}
    assert stat.S_IMODE(folder.stat().st_mode) == 0o777 & ~umask


def test_collect_cache_and_offline_student_respect_roles(bank, runs_dir):
    """The offline trainer claims its folder before collecting (no teacher sampling is wasted)."""
    trained_teachers(bank)
    cfg = OfflineConfig(name="student", experiment="x", steps=1, prompts_per_domain=2, samples_per_prompt=2,
                        progress=False, eval_every=0, keep="all")
    train_student(bank, student())
    with pytest.raises(ValueError, match=r"'student' in the bank is an MOPD student"):
        train_offline(bank, cfg)
    assert not (runs_dir / "x" / "collect").exists()
    train_offline(bank, cfg.__class__(**{**cfg.__dict__, "name": "rft"}), collect(bank, cfg))


def test_an_unreadable_adapter_says_so_and_never_advises_deleting_it(bank, tmp_path, monkeypatch):
    """Another user's adapter that this one cannot read: the cause, and a fix that keeps the data
    (os.access is patched: the tests run as root, who reads anything)."""
    bank.create("t")
    bank.save("t", tmp_path / "t")
    real = os.access
    monkeypatch.setattr("mopd_mini.adapters.os.access",
                        lambda p, mode: not str(p).endswith(".safetensors") and real(p, mode))
    with pytest.raises(PermissionError, match=r"this user cannot read \['adapter_model.safetensors'\]; ask its "
                                              r"owner to make it readable \(chmod -R g\+rX") as err:
        bank.load("u", tmp_path / "t")
    assert "Delete" not in str(err.value) and "u" not in bank.names
