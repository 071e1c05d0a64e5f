"""Crashes lose nothing: a training process killed at a random step (a real SIGKILL) and started
again ends with exactly the adapter weights, optimizer state and metrics of a run that was never
interrupted; and a kill DURING a save leaves the previous checkpoint loadable.

Each run is a fresh Python process running SCRIPT (the tiny model on CPU, one thread), the way a
student's notebook or script would die and be re-run.
"""

import copy
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from mopd_mini import AdapterBank, GRPOConfig, runs, train_grpo

STEPS = 12
ADAPTER = {"teacher": "teacher_binding", "student": "student", "gkd_student": "student"}
SCRIPT = r"""
import os, signal, sys
from pathlib import Path
import torch
torch.set_num_threads(1)
from mopd_mini import AdapterBank, GRPOConfig, MOPDConfig, load_base, runs, train_grpo, train_student

kind, root, steps, die_at_save = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
runs.RUNS_DIR = root
if die_at_save:  # SIGKILL this process half-way through writing its die_at_save-th checkpoint.pt
    real_replace, saves = os.replace, [0]
    def replace(src, dst):
        if Path(dst).name == "checkpoint.pt":
            saves[0] += 1
            if saves[0] == die_at_save:
                with open(src, "r+b") as f:
                    f.truncate(os.path.getsize(src) // 2)
                os.kill(os.getpid(), signal.SIGKILL)
        real_replace(src, dst)
    os.replace = replace

bank = AdapterBank(*load_base("tiny", device="cpu"))
common = dict(steps=steps, checkpoint_every=2, eval_every=4, eval_n=4, experiment="resume", progress=False)
if kind == "teacher":
    train_grpo(bank, GRPOConfig(domain="binding", prompts_per_step=4, group_size=4, **common))
else:  # two fixed, distinct teachers: seeded adapters with seeded noise on lora_B
    for i, name in enumerate(["teacher_binding", "teacher_recall"]):
        bank.create(name, seed=i + 1)
        g = torch.Generator().manual_seed(100 + i)
        with torch.no_grad():
            for n, p in bank.parameters(name).items():
                if "lora_B" in n:
                    p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    # gkd_student: GKD's lmbda = 0.5, so some steps train on the teachers' own samples (a seeded draw per step)
    train_student(bank, MOPDConfig(prompts_per_domain=2, topk=8, track_steps=(1, 5, steps), track_prompts=1,
                                   **(dict(loss="kl", lmbda=0.5) if kind == "gkd_student" else {}), **common))
"""


def launch(kind: str, root: Path, die_at_save: int = 0) -> subprocess.Popen:
    """Start SCRIPT in a fresh process (one thread, offline); its output goes to root.with_suffix('.log')."""
    root.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "MOPD_FAST": ""}
    with open(root.with_suffix(".log"), "ab") as log:  # the child keeps its own copy of the handle
        return subprocess.Popen([sys.executable, "-c", SCRIPT, kind, str(root), str(STEPS), str(die_at_save)],
                                env=env, stdout=log, stderr=subprocess.STDOUT)


def run_to_the_end(kind: str, root: Path) -> Path:
    """Run (or resume) to completion in a fresh process; returns the run folder."""
    proc = launch(kind, root)
    assert proc.wait(timeout=600) == 0, root.with_suffix(".log").read_text()[-3000:]
    return root / "resume" / ADAPTER[kind]


def metric_lines(folder: Path) -> int:
    path = folder / "metrics.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


def assert_same_run(folder: Path, reference: Path) -> None:
    """Two finished run folders hold the same adapter, optimizer state, metrics and trace, exactly."""
    for name in ("metrics.jsonl", "trace.json", "config.json"):
        assert (folder / name).exists() == (reference / name).exists(), name
        if (reference / name).exists():
            assert (folder / name).read_bytes() == (reference / name).read_bytes(), name
    a, b = (load_file(f / "adapter_model.safetensors") for f in (folder, reference))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    ca, cb = (torch.load(f / "checkpoint.pt", weights_only=True) for f in (folder, reference))
    assert ca["step"] == cb["step"]
    for (_, sa), (_, sb) in zip(sorted(ca["optimizer"]["state"].items()), sorted(cb["optimizer"]["state"].items())):
        assert all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """uninterrupted(kind): the folder of a run of SCRIPT that was never killed (made once per kind)."""
    done = {}

    def get(kind):
        if kind not in done:
            done[kind] = run_to_the_end(kind, tmp_path_factory.mktemp(f"uninterrupted-{kind}") / "runs")
        return done[kind]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["teacher", "student", "gkd_student"])
def test_kill_at_a_random_step_and_resume_is_exact(kind, tmp_path, uninterrupted):
    """SIGKILL a training process at a random point after a random checkpoint (a seeded choice), then
    re-run it: the final adapter, optimizer state, metrics.jsonl (and trace.json) equal an
    uninterrupted run's byte for byte."""
    rng = random.Random(f"kill-{kind}")
    kill_after = rng.choice([2, 4, 6])                          # a checkpoint step; checkpoint_every=2
    root = tmp_path / "runs"
    folder = root / "resume" / ADAPTER[kind]
    proc = launch(kind, root)
    deadline = time.time() + 300
    while metric_lines(folder) < kill_after:                    # metrics.jsonl is written after checkpoint.pt
        assert proc.poll() is None, root.with_suffix(".log").read_text()[-3000:]
        assert time.time() < deadline, "no checkpoint in 300 s"
        time.sleep(0.005)
    time.sleep(rng.uniform(0, 0.05))                            # somewhere inside a later step
    proc.kill()
    assert proc.wait() == -signal.SIGKILL, "the run finished before it could be killed"
    killed_at = torch.load(folder / "checkpoint.pt", weights_only=True)["step"]
    assert kill_after <= killed_at < STEPS
    assert not (folder / "adapter_model.safetensors").exists()  # it never reached the end

    run_to_the_end(kind, root)
    assert_same_run(folder, uninterrupted(kind))


@pytest.mark.slow
def test_kill_during_a_save_leaves_the_previous_checkpoint(tmp_path, uninterrupted):
    """SIGKILL half-way through writing the third checkpoint (step 6): checkpoint.pt is still the
    step-4 one and loads, the half-written file sits under a temporary name that nothing reads, and
    the resumed run ends exactly like an uninterrupted one."""
    root = tmp_path / "runs"
    folder = root / "resume" / ADAPTER["teacher"]
    proc = launch("teacher", root, die_at_save=3)
    assert proc.wait(timeout=600) == -signal.SIGKILL, root.with_suffix(".log").read_text()[-3000:]
    assert torch.load(folder / "checkpoint.pt", weights_only=True)["step"] == 4
    assert runs.read_metrics(folder)[-1]["step"] == 4
    assert [f.name for f in folder.iterdir() if f.name.startswith(".checkpoint.pt.")], "no half-written temporary"

    run_to_the_end("teacher", root)
    assert_same_run(folder, uninterrupted("teacher"))


def test_a_failed_save_keeps_the_previous_checkpoint_and_leaves_no_temporary(tiny, tmp_path, monkeypatch):
    """In-process: the rename of the step-4 checkpoint fails (a full disk); the error reaches the
    caller, checkpoint.pt still holds step 2, no temporary file is left behind, and resuming ends
    exactly like an uninterrupted run."""
    cfg = GRPOConfig(domain="recall", steps=6, prompts_per_step=2, group_size=4, eval_every=3, eval_n=2,
                     checkpoint_every=2, experiment="atomic", progress=False)

    def train(root):
        monkeypatch.setattr(runs, "RUNS_DIR", root)
        return train_grpo(AdapterBank(copy.deepcopy(tiny[0]), tiny[1]), cfg)

    reference = train(tmp_path / "reference")
    real_replace, saves = os.replace, []

    def failing_replace(src, dst):
        if Path(dst).name == "checkpoint.pt":
            saves.append(dst)
            if len(saves) == 2:
                raise OSError(28, "No space left on device")
        real_replace(src, dst)

    with monkeypatch.context() as m:
        m.setattr(os, "replace", failing_replace)
        with pytest.raises(OSError, match="No space left"):
            train(tmp_path / "failed")
    folder = tmp_path / "failed" / "atomic" / "teacher_recall"
    assert torch.load(folder / "checkpoint.pt", weights_only=True)["step"] == 2
    assert sorted(f.name for f in folder.iterdir()) == ["checkpoint.pt", "config.json", "metrics.jsonl"]

    train(tmp_path / "failed")
    assert_same_run(folder, reference.dir)
