"""Guarded: no code runs from a checkpoint someone else made; a non-finite update is never kept nor
checkpointed; `export --force` replaces only a previous export; the export says only what the run
did (its record, the teachers' own records, the student's teacher manifest); the collect cache heals.
Every export case runs in its own scratch folder."""

import hashlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from mopd_mini import GRPOConfig, MOPDConfig, cli, grpo, runs, train_grpo, train_student
from mopd_mini.export import MARKER, main
from mopd_mini.config import OfflineConfig
from mopd_mini.offline import collect
from mopd_mini.runs import guarded_step

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def runs_dir(tmp_path, monkeypatch):
    """RUNS_DIR pointed at an empty temporary folder."""
    monkeypatch.setattr(runs, "RUNS_DIR", tmp_path / "runs")
    return tmp_path / "runs"


def teacher_config(**overrides):
    return GRPOConfig(**{**dict(steps=2, prompts_per_step=2, group_size=4, eval_every=0, experiment="g",
                                progress=False), **overrides})


def student_config(**overrides):
    return MOPDConfig(**{**dict(steps=2, prompts_per_domain=2, topk=8, eval_every=0, track_steps=(),
                                experiment="g", progress=False), **overrides})


# ------------------------------------------------------------------------------ 0. crafted checkpoints

class Payload:
    """Unpickling this object writes `marker`: what a crafted checkpoint.pt can carry."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return exec, (f"open({str(self.marker)!r}, 'w').write('the payload ran')",)


def crafted(folder: Path, marker: Path) -> Path:
    folder.mkdir(parents=True)
    torch.save({"step": 1, "config": {}, "adapter": Payload(marker)}, folder / "checkpoint.pt")
    return folder / "checkpoint.pt"


def test_a_crafted_checkpoint_is_refused_and_its_payload_never_runs(bank, runs_dir, tmp_path):
    marker = tmp_path / "written_by_the_payload"
    path = crafted(runs_dir / "evil" / "teacher_binding", marker)
    with pytest.raises(ValueError, match=r"refused to load the checkpoint .*evil/teacher_binding/checkpoint.pt: .*"
                                         r"GLOBAL exec was not an allowed global by default\), .*nothing of it was run"):
        train_grpo(bank, teacher_config(experiment="evil"))
    assert not marker.exists()
    with pytest.raises(ValueError, match=r"refused to load the checkpoint"):
        runs.load_checkpoint(path)
    assert not marker.exists()
    torch.load(path, weights_only=False)  # the payload is real: the unsafe load runs it
    assert marker.read_text() == "the payload ran"


def test_the_command_line_refuses_a_crafted_checkpoint(tmp_path, capsys):
    marker = tmp_path / "written_by_the_payload"
    crafted(tmp_path / "runs" / "evil" / "teacher_binding", marker)
    code = cli.main(["teachers", "--domain", "binding", "--experiment", "evil", "--steps", "2", "--runs-dir",
                     str(tmp_path / "runs"), "--device", "cpu", "--no-progress"])
    err = capsys.readouterr().err
    assert code != 0 and "refused to load the checkpoint" in err and "Traceback" not in err, err
    assert not marker.exists()


def test_every_checkpoint_a_trainer_writes_loads_with_weights_only(teacher_bank, runs_dir):
    train_grpo(teacher_bank, teacher_config(name="t", steps=1))
    train_student(teacher_bank, student_config(steps=1))
    for folder in ("t", "student"):
        state = torch.load(runs_dir / "g" / folder / "checkpoint.pt", weights_only=True)
        assert state["step"] == 1 and state["adapter"]


# ------------------------------------------------------------------------------ non-finite updates

def test_a_non_finite_update_is_skipped_and_the_state_restored():
    """SGD with lr 3e38: the update overflows to inf. The weights and the optimizer state stay, the row says so."""
    w = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.SGD([w], lr=3e38, momentum=0.9)  # 1 - 3e38 x 2 is past fp32's largest, 3.4e38
    out = guarded_step((w * 2).sum(), [w], opt, grad_clip=1e9)  # no clip: the gradient is 2
    assert out["skipped_nonfinite"] is True and out["nonfinite"] == "update" and math.isfinite(out["grad_norm"])
    assert torch.equal(w.detach(), torch.ones(3)) and opt.state_dict()["state"] == {}
    fine = torch.optim.SGD([w], lr=0.1)
    assert guarded_step((w * 2).sum(), [w], fine, 1.0)["skipped_nonfinite"] is False
    assert not torch.equal(w.detach(), torch.ones(3))


def poisoned_adamw(call: int):
    """runs.adamw whose `call`-th step writes inf into the first weight (a forced non-finite update)."""
    def make(params, lr, weight_decay=0.0):
        opt = runs.adamw(params, lr, weight_decay)
        real, count = opt.step, [0]

        def step(*args, **kwargs):
            count[0] += 1
            result = real(*args, **kwargs)
            if count[0] == call:
                with torch.no_grad():
                    opt.param_groups[0]["params"][0].fill_(float("inf"))
            return result

        opt.step = step
        return opt
    return make


def test_a_forced_non_finite_update_is_never_checkpointed(bank, runs_dir, monkeypatch):
    """The second update yields inf weights: that step is skipped and logged truthfully, before the
    checkpoint; every checkpoint written holds finite weights, and the run goes on."""
    monkeypatch.setattr(grpo, "adamw", poisoned_adamw(call=2))
    saved, real_save = [], runs.Run.save

    def save(self, step, bank, name, optimizer, generator):
        real_save(self, step, bank, name, optimizer, generator)
        saved.append(torch.load(self.dir / "checkpoint.pt", weights_only=True))

    monkeypatch.setattr(runs.Run, "save", save)
    run = train_grpo(bank, teacher_config(steps=3, checkpoint_every=1, prompts_per_step=4))
    trained = [r for r in run.metrics if "skipped_nonfinite" in r]
    assert [r.get("nonfinite") for r in trained].count("update") == 1
    assert [s["step"] for s in saved] == [1, 2, 3]
    for state in saved:
        assert all(torch.isfinite(t).all() for t in state["adapter"].values())
    skipped = next(r["step"] for r in trained if r.get("nonfinite") == "update")
    before = saved[skipped - 2]["adapter"] if skipped > 1 else None
    if before is not None:  # the skipped step kept the previous step's weights exactly
        assert all(torch.equal(before[k], saved[skipped - 1]["adapter"][k]) for k in before)
    assert runs.read_metrics(run.dir) == run.metrics


def test_a_checkpoint_of_non_finite_weights_is_never_written(bank, runs_dir):
    bank.create("teacher_binding", seed=1)
    cfg = teacher_config()
    run = runs.Run.open(cfg.experiment, "teacher_binding", cfg)
    run.dir.mkdir(parents=True)
    with torch.no_grad():
        next(iter(bank.parameters("teacher_binding").values())).fill_(float("nan"))
    opt = runs.adamw(bank.parameters("teacher_binding").values(), 1e-3)
    with pytest.raises(ValueError, match=r"step 1: the adapter 'teacher_binding' holds non-finite weights .*nothing "
                                         r"was saved"):
        run.save(1, bank, "teacher_binding", opt, torch.Generator())
    assert not (run.dir / "checkpoint.pt").exists()


# ------------------------------------------------------------------------------ 1. export --force

@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from mopd_mini.export import tiny_run

    pytest.importorskip("pyarrow")
    pytest.importorskip("yaml")
    return tiny_run(tmp_path_factory.mktemp("guarded") / "work")


@pytest.fixture(scope="module")
def exported(run, tmp_path_factory):
    out = tmp_path_factory.mktemp("exported") / "out"
    main(["verl", "--run", str(run), "--out", str(out)])
    return out


def digest(folder: Path) -> dict:
    return {str(f.relative_to(folder)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(folder.rglob("*")) if f.is_file()}


def scratch(tmp_path: Path) -> Path:
    """A folder of someone's work: a file and a sub-folder that no export wrote."""
    folder = tmp_path / "work"
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.txt").write_text("mine")
    return folder


@pytest.mark.parametrize("force", [False, True])
def test_an_empty_out_is_an_error_with_or_without_force(run, tmp_path, monkeypatch, force):
    work = scratch(tmp_path)
    monkeypatch.chdir(work)
    before = digest(work)
    with pytest.raises(SystemExit, match=r"export refused: --out is empty \(an unset shell variable\?\)"):
        main(["verl", "--run", str(run), "--out", ""] + (["--force"] if force else []))
    assert digest(work) == before and sorted(p.name for p in work.iterdir()) == ["notes.txt", "sub"]


@pytest.mark.parametrize("case", ["cwd", "ancestor of cwd", "repository", "home", "root", "the run", "a teacher",
                                  "inside the run"])
def test_force_never_replaces_a_protected_folder(run, tmp_path, monkeypatch, case):
    work = scratch(tmp_path)
    monkeypatch.chdir(work / "sub")
    target = {"cwd": work / "sub", "ancestor of cwd": work, "root": Path("/"), "the run": run,
              "a teacher": run / "teacher_binding", "inside the run": run / "student"}.get(case)
    if case == "repository":
        target = tmp_path / "repo"
        (target / ".git").mkdir(parents=True)
        (target / "code.py").write_text("x = 1")
    if case == "home":
        target = tmp_path / "home"
        target.mkdir()
        (target / ".bashrc").write_text("# mine")
        monkeypatch.setenv("HOME", str(target))
    watched = target if case != "root" else work
    before = digest(watched)
    why = {"cwd": r"it is the working folder\)", "ancestor of cwd": r"it is the working folder .* or a folder above",
           "repository": r"it is a repository \(it holds .git\)", "home": r"it is a home or root folder",
           "root": r"it is the working folder .* or a folder above it", "the run": r"it is the run being exported",
           "a teacher": r"it is the binding teacher", "inside the run": r"it is inside the run being exported"}[case]
    given = (["--teacher", f"binding={run / 'teacher_binding'}", "--teacher", f"recall={run / 'teacher_recall'}"]
             if case == "a teacher" else ["--run", str(run)])  # a teacher outside a run: its own folder
    with pytest.raises(SystemExit, match=r"export refused: --out .*: the export never writes there \(" + why):
        main(["verl", *given, "--out", str(target), "--force"])
    assert digest(watched) == before
    assert not [p for p in target.parent.iterdir() if ".staging-" in p.name] if case != "root" else True


@pytest.mark.parametrize("case, pattern", [
    ("a folder no export wrote", r"is not a previous export \(it holds notes.txt, sub, which no export writes\)"),
    ("an export plus a file", r"is not a previous export \(it holds notes.txt, which no export writes\)"),
    ("an export without its marker", rf"is not a previous export \(it has no {MARKER}"),
])
def test_force_replaces_only_a_previous_export(run, exported, tmp_path, case, pattern):
    out = tmp_path / "out"
    if case == "a folder no export wrote":
        shutil.copytree(scratch(tmp_path), out)
    else:
        shutil.copytree(exported, out)
        if case == "an export plus a file":
            (out / "notes.txt").write_text("mine")
        else:
            (out / MARKER).unlink()
    before = digest(out)
    with pytest.raises(SystemExit, match=pattern):
        main(["verl", "--run", str(run), "--out", str(out), "--force"])
    assert digest(out) == before


def test_force_replaces_a_previous_export(run, exported, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(exported, out)
    (out / "teachers" / "stale").mkdir()
    main(["verl", "--run", str(run), "--out", str(out), "--force"])
    assert (out / MARKER).exists() and not (out / "teachers" / "stale").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_the_marker_lists_every_file_and_force_refuses_one_it_does_not_list_anywhere(run, exported, tmp_path):
    """Before its marker listed files, `--force` over an export holding a user's file in a subfolder (data/my_run.log) returned 0 and
    deleted it (only the top-level names were checked). The marker lists every file the export wrote, with its
    size and sha256; --force refuses, naming it, anything else anywhere in the tree, or a listed file changed."""
    out = tmp_path / "out"
    shutil.copytree(exported, out)
    listed = json.loads((out / MARKER).read_text())["files"]
    assert set(listed) == {f.relative_to(out).as_posix() for f in out.rglob("*") if f.is_file() and f.name != MARKER}
    assert listed["data/train.parquet"] == {"size": (out / "data" / "train.parquet").stat().st_size,
                                            "sha256": hashlib.sha256((out / "data" / "train.parquet").read_bytes()).hexdigest()}
    (out / "data" / "my_run.log").write_text("a user's log")
    before = digest(out)
    with pytest.raises(SystemExit, match=r"export refused: --out .* holds 1 file\(s\) its export did not write: "
                                         r"data/my_run.log; --force removes only the files the export's "
                                         rf"{MARKER} lists"):
        main(["verl", "--run", str(run), "--out", str(out), "--force"])
    assert digest(out) == before
    (out / "data" / "my_run.log").unlink()
    (out / "verl_config.yaml").write_text("# edited by hand\n")
    with pytest.raises(SystemExit, match=r"its export did not write: verl_config.yaml \(changed since the export wrote it\)"):
        main(["verl", "--run", str(run), "--out", str(out), "--force"])
    shutil.copy(exported / "verl_config.yaml", out / "verl_config.yaml")
    main(["verl", "--run", str(run), "--out", str(out), "--force"])
    assert set(digest(out)) == set(digest(exported)) and sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert digest(out)["data/train.parquet"] == digest(exported)["data/train.parquet"]


OLD_NAMES = sorted(["student_base", "teachers", "data", "reward", "export.json", "verl_config.yaml", "run_verl.sh",
                    MARKER])


@pytest.mark.parametrize("old, pattern", [
    # a marker from before it listed its files: the top-level names
    ({"written_by": "mopd_mini.export", "verl": "0.9.1", "files": OLD_NAMES}, "older export whose .* lists no files"),
    # no file list at all (before: "its .mopd_mini_export is unreadable ('files')", no way out named)
    ({"written_by": "mopd_mini.export", "verl": "0.9.1"}, "older export whose .* lists no files"),
    ("[1, 2]", r"is unreadable \(not a JSON object of the export's files\)"),
    ("{", r"is unreadable \(Expecting"),
], ids=["names", "no-files-key", "not-an-object", "truncated"])
def test_force_refuses_an_old_marker_without_a_file_list(run, exported, tmp_path, old, pattern):
    out = tmp_path / "out"
    shutil.copytree(exported, out)
    (out / MARKER).write_text(old if isinstance(old, str) else json.dumps(old))
    before = digest(out)
    with pytest.raises(SystemExit, match=pattern + r".*so --force cannot tell (its|the export's) files from "
                                                   r"(ones added since|others).*Move what you keep out of it, delete it, "
                                                   r"and export again \(the same command without --force, or --out to a "
                                                   r"new folder\)"):
        main(["verl", "--run", str(run), "--out", str(out), "--force"])
    assert digest(out) == before


def test_every_override_the_export_applies_is_recorded(run, tmp_path):
    """Before export.json recorded overrides, --loss pg over a run trained with jsd wrote mopd_config.loss: pg and recorded no override."""
    r = variant(run, tmp_path, loss="jsd")
    out = tmp_path / "out"
    with pytest.raises(SystemExit, match=r"loss='jsd'"):
        main(["verl", "--run", str(r), "--out", str(out)])
    main(["verl", "--run", str(r), "--out", str(out), "--loss", "pg"])
    saved = json.loads((out / "export.json").read_text())
    assert saved["mopd_config"]["loss"] == "pg"
    assert saved["overridden"] == [{"setting": "loss", "run": "jsd", "exported": "pg", "flag": "--loss"}]
    main(["verl", "--run", str(run), "--out", str(out), "--force", "--allow-domain-mismatch",
          "--teacher", f"binding={run / 'teacher_recall'}"])
    saved = json.loads((out / "export.json").read_text())
    assert saved["overridden"] == [
        {"setting": "teachers.binding", "run": str(run / "teacher_binding"), "exported": str(run / "teacher_recall"),
         "flag": "--teacher"},
        {"setting": "allow_domain_mismatch", "run": None, "exported": True, "flag": "--allow-domain-mismatch"}]


SIGTERM_SCRIPT = r"""
import os, signal, sys
from mopd_mini import export
argv, real_fold = sys.argv[1:], export.fold_teacher
def fold(*a, **k):
    result = real_fold(*a, **k)
    os.kill(os.getpid(), signal.SIGTERM)   # the binding teacher is in the staging folder
    return result
export.write.fold_teacher = fold         # build() looks it up in its own module
export.main(argv)
"""


def test_sigterm_during_export_force_cleans_its_staging_folder(run, exported, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(exported, out)
    before = digest(out)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", SIGTERM_SCRIPT, "verl", "--run", str(run), "--out", str(out),
                           "--force"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1 and "export stopped: export stopped by signal SIGTERM" in done.stderr, done.stderr[-2000:]
    assert digest(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


SIGINT_SCRIPT = r"""
import os, runpy, signal, sys, time
from mopd_mini import adapters
real_share = adapters.share
def share(path, *a, **k):
    real_share(path, *a, **k)
    os.kill(os.getpid(), signal.SIGINT)   # Ctrl-C: the whole export is in the staging folder, not yet in place
    time.sleep(5)
adapters.share = share                    # what `python -m mopd_mini.export` imports into its own namespace
sys.argv = ["export", *sys.argv[1:]]
runpy.run_module("mopd_mini.export", run_name="__main__", alter_sys=True)
"""


def test_ctrl_c_during_an_export_says_in_one_line_what_was_kept(run, exported, tmp_path):
    """Before, Ctrl-C during `python -m mopd_mini.export` (or `mopd-mini export`) printed a traceback and
    `KeyboardInterrupt` (exit -2 or 1): the training commands' one line did not reach the export."""
    out = tmp_path / "out"
    shutil.copytree(exported, out)
    before = digest(out)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    argv = ["verl", "--run", str(run), "--out", str(out), "--force"]
    done = subprocess.run([sys.executable, "-c", SIGINT_SCRIPT, *argv], env=env, capture_output=True, text=True,
                          timeout=600)
    lines = [line for line in done.stderr.splitlines() if "interrupted" in line or "Traceback" in line]
    assert done.returncode == 130 and lines == [
        f"python -m mopd_mini.export: interrupted (Ctrl-C): --out {out} is as it was (nothing of this export is in "
        f"it); no staging folder is left. Run the same command to export again: python -m mopd_mini.export "
        f"{' '.join(argv)}"], done.stderr[-3000:]
    assert digest(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_ctrl_c_in_mopd_mini_export_before_and_after_the_export_is_in_place(run, tmp_path, capsys, monkeypatch):
    from mopd_mini import export

    out = tmp_path / "out"

    def stop(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(export.write, "build", stop)   # export_verl looks it up in its own module
    assert cli.main(["export", "verl", "--run", str(run), "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == (
        f"mopd-mini export: interrupted (Ctrl-C): nothing was written to --out {out}; no staging folder is left. "
        f"Run the same command to export again: mopd-mini export verl --run {run} --out {out}")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    real_swap = export.swap_into_place

    def swap_then_stop(*a, **k):
        real_swap(*a, **k)
        raise KeyboardInterrupt

    monkeypatch.setattr(export.write, "swap_into_place", swap_then_stop)
    assert cli.main(["export", "verl", "--run", str(run), "--out", str(out)]) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"mopd-mini export: interrupted (Ctrl-C): the export had finished: {out} holds it whole; no staging folder "
        "is left. Nothing to resume")
    assert (out / MARKER).exists() and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_dead_exports_staging_folder_is_removed_by_the_next(run, tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".out.staging-{dead.pid}-abc123"
    (stale / "teachers").mkdir(parents=True)
    alive = tmp_path / f".out.staging-{os.getpid()}-def456"  # a running export's: left alone
    alive.mkdir()
    main(["verl", "--run", str(run), "--out", str(tmp_path / "out")])
    assert not stale.exists() and alive.exists()


# ------------------------------------------------------------------------------ 3. faithful to the run

def variant(run: Path, tmp_path: Path, drop=(), **config) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    path = copy / "student" / "config.json"
    saved = {**json.loads(path.read_text()), **config}
    path.write_text(json.dumps({k: v for k, v in saved.items() if k not in drop}))
    return copy


def test_a_missing_key_of_the_runs_record_is_named(run, tmp_path):
    r = variant(run, tmp_path, drop=("loss", "steps"))
    with pytest.raises(SystemExit, match=r"the student's config .*config.json is unreadable \(it lacks loss, steps: "
                                         r"the export writes only what the run did"):
        main(["verl", "--run", str(r), "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_a_wrong_type_in_the_runs_record_is_named(run, tmp_path):
    r = variant(run, tmp_path, steps="2")
    with pytest.raises(SystemExit, match=r"config.json is unreadable \(MOPDConfig.steps='2' is not an int"):
        main(["verl", "--run", str(r), "--out", str(tmp_path / "out")])


def test_swapped_teachers_are_refused_unless_asked_for(run, tmp_path):
    swapped = ["--teacher", f"binding={run / 'teacher_recall'}", "--teacher", f"recall={run / 'teacher_binding'}"]
    out = tmp_path / "out"
    with pytest.raises(SystemExit, match=r"the routing does not match the teachers' own records: binding is routed "
                                         r"to .*teacher_recall, whose record names \['recall'\]; recall is routed to "
                                         r".*teacher_binding, whose record names \['binding'\].*--allow-domain-mismatch"):
        main(["verl", "--out", str(out)] + swapped)
    assert not out.exists()
    info = main(["verl", "--out", str(out), "--allow-domain-mismatch"] + swapped)
    saved = json.loads((out / "export.json").read_text())
    assert saved["allow_domain_mismatch"] is True and saved["teacher_domains"] == {"binding": ["recall"],
                                                                                   "recall": ["binding"]}
    assert saved == json.loads(json.dumps(info, default=str))


def test_a_flag_teacher_over_a_run_is_checked_and_recorded(run, tmp_path):
    out = tmp_path / "out"
    flag = ["--teacher", f"binding={run / 'teacher_recall'}"]
    with pytest.raises(SystemExit, match=r"binding is routed to .*teacher_recall, whose record names \['recall'\]"):
        main(["verl", "--run", str(run), "--out", str(out)] + flag)
    main(["verl", "--run", str(run), "--out", str(out), "--allow-domain-mismatch"] + flag)
    saved = json.loads((out / "export.json").read_text())
    assert saved["routed_by_flag"] == ["binding"]
    assert saved["mopd_config"]["teachers"] == {"binding": str(run / "teacher_recall")}  # what the config serves
    assert saved["teachers"] == {"binding": str(run / "teacher_recall"), "recall": str(run / "teacher_recall")}


def test_the_student_records_its_teachers_and_the_export_checks_them(run, tmp_path):
    manifest = json.loads((run / "student" / runs.MANIFEST).read_text())
    assert [(t["name"], t["domains"]) for t in manifest] == [("teacher_binding", ["binding"]),
                                                             ("teacher_recall", ["recall"])]
    assert manifest[0]["sha256"] == runs.folder_digest(run / "teacher_binding")
    r = variant(run, tmp_path)
    weights = r / "teacher_binding" / "adapter_model.safetensors"
    tensors = load_file(str(weights))
    first = sorted(tensors)[0]
    tensors[first] = tensors[first] + 0.01  # another teacher under the same name
    save_file(tensors, str(weights))
    with pytest.raises(SystemExit, match=r"the binding teacher .*teacher_binding is not the 'teacher_binding' the "
                                         r"student was trained with: its weights' sha256 is"):
        main(["verl", "--run", str(r), "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_a_resume_with_other_teacher_weights_under_the_same_name_is_refused(teacher_bank, runs_dir, perturb):
    train_student(teacher_bank, student_config(steps=1))
    saved = json.loads((runs_dir / "g" / "student" / runs.MANIFEST).read_text())
    assert {t["name"] for t in saved} == {"teacher_binding", "teacher_recall"}
    perturb(teacher_bank, "teacher_binding", seed=7)
    before = (runs_dir / "g" / "student" / "checkpoint.pt").read_bytes()
    with pytest.raises(ValueError, match=r"was trained with another 'teacher_binding': its weights' sha256 was"):
        train_student(teacher_bank, student_config(steps=2))
    assert (runs_dir / "g" / "student" / "checkpoint.pt").read_bytes() == before


def test_the_checkpoint_keeps_the_manifest_and_a_missing_side_file_is_refused(teacher_bank, runs_dir, perturb):
    """Before checkpoints kept the manifest, deleting student/teacher_manifest.json and swapping a teacher let the resume succeed (the new
    manifest recorded only the new teacher). checkpoint.pt keeps a copy; a resume without the file is refused."""
    train_student(teacher_bank, student_config(steps=1))
    folder = runs_dir / "g" / "student"
    assert runs.load_checkpoint(folder / "checkpoint.pt")["teachers"] == json.loads((folder / runs.MANIFEST).read_text())
    (folder / runs.MANIFEST).unlink()
    perturb(teacher_bank, "teacher_binding", seed=7)
    before = (folder / "checkpoint.pt").read_bytes()
    with pytest.raises(ValueError, match=r"teacher_manifest.json is missing, but .*checkpoint.pt records the teachers "
                                         r"this run read \(teacher_binding, teacher_recall\).*restore_manifest"):
        train_student(teacher_bank, student_config(steps=2))
    assert (folder / "checkpoint.pt").read_bytes() == before and not (folder / runs.MANIFEST).exists()
    (folder / runs.MANIFEST).write_text(json.dumps(runs.teacher_manifest(teacher_bank, student_config().route)))
    with pytest.raises(ValueError, match=r"teacher_manifest.json does not match the copy in .*checkpoint.pt"):
        train_student(teacher_bank, student_config(steps=2))   # a file rewritten for the new teacher: refused too
    runs.restore_manifest(folder)
    with pytest.raises(ValueError, match=r"was trained with another 'teacher_binding'"):
        train_student(teacher_bank, student_config(steps=2))
    assert (folder / "checkpoint.pt").read_bytes() == before


def test_an_export_whose_manifest_file_is_missing_is_refused(run, tmp_path):
    r = variant(run, tmp_path)
    (r / "student" / runs.MANIFEST).unlink()
    with pytest.raises(SystemExit, match=r"export refused: .*student/teacher_manifest.json is missing, but "
                                         r".*checkpoint.pt records the teachers this run read"):
        main(["verl", "--run", str(r), "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_an_old_checkpoint_without_the_copy_is_accepted_once_and_upgraded(teacher_bank, runs_dir, recwarn):
    train_student(teacher_bank, student_config(steps=1))
    path = runs_dir / "g" / "student" / "checkpoint.pt"
    state = runs.load_checkpoint(path)
    del state["teachers"]                                      # as written before checkpoints kept the copy
    torch.save(state, path)
    with pytest.warns(UserWarning, match=r"checkpoint.pt predates the copy of the teacher manifest kept inside "
                                         r"checkpoints: it was checked against teacher_manifest.json this once, and "
                                         r"now holds the copy \(teacher_binding, teacher_recall\)"):
        train_student(teacher_bank, student_config(steps=1))   # the finished run, reloaded
    assert runs.load_checkpoint(path)["teachers"] == json.loads((path.parent / runs.MANIFEST).read_text())
    recwarn.clear()
    train_student(teacher_bank, student_config(steps=1))
    assert not [w for w in recwarn if "predates the copy" in str(w.message)]   # once


def old_checkpoint(student: Path) -> dict:
    """The student's checkpoint.pt rewritten as before checkpoints kept the teacher manifest's copy."""
    state = runs.load_checkpoint(student / "checkpoint.pt")
    del state["teachers"]
    torch.save(state, student / "checkpoint.pt")
    return state


def test_an_export_of_an_old_checkpoint_is_accepted_once_and_upgraded(run, tmp_path, recwarn):
    """Before, an export of a run whose checkpoint.pt held no copy of the manifest was accepted on every
    export, silently, and its checkpoint never gained the copy (so a later deleted side file went unseen)."""
    r = variant(run, tmp_path)
    student = r / "student"
    old_checkpoint(student)
    weights = r / "teacher_binding" / "adapter_model.safetensors"
    kept = weights.read_bytes()
    tensors = load_file(str(weights))
    first = sorted(tensors)[0]
    tensors[first] = tensors[first] + 0.01                    # a swapped teacher: refused, and no upgrade
    save_file(tensors, str(weights))
    before = (student / "checkpoint.pt").read_bytes()
    with pytest.raises(SystemExit, match=r"the binding teacher .*is not the 'teacher_binding' the student was trained"):
        main(["verl", "--run", str(r), "--out", str(tmp_path / "out")])
    assert (student / "checkpoint.pt").read_bytes() == before
    weights.write_bytes(kept)
    with pytest.warns(UserWarning, match=r"student/checkpoint.pt predates the copy of the teacher manifest kept inside "
                                         r"checkpoints: it was checked against teacher_manifest.json this once, and "
                                         r"now holds the copy \(teacher_binding, teacher_recall\)"):
        main(["verl", "--run", str(r), "--out", str(tmp_path / "out")])
    assert runs.load_checkpoint(student / "checkpoint.pt")["teachers"] == json.loads((student / runs.MANIFEST).read_text())
    (tmp_path / "a-file").write_text("")
    recwarn.clear()
    with pytest.raises(SystemExit, match=r"is a file"):      # past the manifest's check: no second warning
        main(["verl", "--run", str(r), "--out", str(tmp_path / "a-file")])
    assert not [w for w in recwarn if "predates the copy" in str(w.message)]
    (student / runs.MANIFEST).unlink()                       # upgraded: a deleted side file is now caught
    with pytest.raises(SystemExit, match=r"teacher_manifest.json is missing, but .*checkpoint.pt records the teachers"):
        main(["verl", "--run", str(r), "--out", str(tmp_path / "out2")])


def test_an_export_of_an_old_checkpoint_without_a_manifest_says_its_teachers_are_unchecked(run, tmp_path):
    r = variant(run, tmp_path)
    old_checkpoint(r / "student")
    (r / "student" / runs.MANIFEST).unlink()
    (tmp_path / "a-file").write_text("")
    with pytest.warns(UserWarning, match=r"student records no teachers \(no copy in its checkpoint.pt, no "
                                         r"teacher_manifest.json: .*could not be checked"):
        with pytest.raises(SystemExit, match=r"is a file"):
            main(["verl", "--run", str(r), "--out", str(tmp_path / "a-file")])


# ------------------------------------------------------------------------------ 4. caches heal

@pytest.mark.parametrize("corrupt", ["truncated", "lacks a key", "too few rows"])
def test_a_broken_collect_cache_is_named_set_aside_and_rebuilt(teacher_bank, runs_dir, corrupt):
    cfg = OfflineConfig(prompts_per_domain=2, samples_per_prompt=2, experiment="heal", progress=False)
    data = collect(teacher_bank, cfg)
    [path] = (runs_dir / "heal" / "collect").iterdir()
    text = path.read_text()
    broken = {"truncated": text[:50], "lacks a key": json.dumps({"rows": json.loads(text)["rows"]}),
              "too few rows": json.dumps({**json.loads(text), "rows": json.loads(text)["rows"][:3]})}[corrupt]
    path.write_text(broken)
    with pytest.warns(UserWarning, match=rf"the collect cache .*{path.name} is unreadable .*set aside as "
                                         rf"{path.name}.corrupt-"):
        again = collect(teacher_bank, cfg)
    assert (again.completions, again.correct) == (data.completions, data.correct)
    rebuilt, first = json.loads(path.read_text()), json.loads(text)
    assert rebuilt["rows"] == first["rows"] and rebuilt["cost"] == first["cost"]  # from its inputs: the same samples
    aside = [p for p in path.parent.iterdir() if p.name.startswith(f"{path.name}.corrupt-")]
    assert len(aside) == 1 and aside[0].read_text() == broken
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([path.name, aside[0].name])  # no temp files


def test_a_compacted_teacher_is_the_same_teacher_and_the_record_keeps_the_first(tmp_path):
    """AdapterBank.compact holds a teacher in a bf16 base's dtype (a resume in the same process sees it
    so): its bf16-rounded digest matches, and the manifest keeps the fp32 digest the export checks. Two
    fp32 teachers that differ are refused even when they round to the same bf16 weights."""
    first = {"name": "teacher_binding", "domains": ["binding"], "sha256": "a" * 64, "sha256_bf16": "b" * 64,
             "dtype": "float32"}
    (tmp_path / runs.MANIFEST).write_text(json.dumps([first]))
    run = runs.Run(tmp_path, {})
    run.check_teachers([{**first, "sha256": "c" * 64, "dtype": "bfloat16"}])
    assert run.teachers == [first]
    with pytest.raises(ValueError, match=r"was trained with another 'teacher_binding'"):
        run.check_teachers([{**first, "sha256": "c" * 64}])
    with pytest.raises(ValueError, match=r"was trained with another 'teacher_binding'"):
        run.check_teachers([{**first, "sha256": "c" * 64, "sha256_bf16": "d" * 64, "dtype": "bfloat16"}])


def test_added_fields_take_the_value_a_run_had_before_they_existed():
    """A run saved before a field existed trained with that field's default: runs.ADDED_FIELDS must
    say so, or an old run would resume or export as if it had set something else."""
    import dataclasses

    from mopd_mini import runs
    from mopd_mini.config import GRPOConfig, MOPDConfig, OfflineConfig

    for cls in (MOPDConfig, GRPOConfig, OfflineConfig):
        defaults = {f.name: f.default for f in dataclasses.fields(cls)}
        for name, before in runs.ADDED_FIELDS.items():
            if name in defaults:
                assert defaults[name] == before, f"{cls.__name__}.{name}: default {defaults[name]!r}, ADDED_FIELDS {before!r}"
    for name in ("stuck_p", "beta", "lmbda", "lmbda_prefix", "top_p", "topk_support"):
        assert name in runs.ADDED_FIELDS, name
