"""Where training runs live, and how they survive a crash.

    runs/<experiment>/<adapter>/
        adapter_config.json, adapter_model.safetensors, mopd_mini.json   the adapter (peft folder)
        checkpoint.pt     step, adapter and optimizer state, RNG states, metrics: resume from here
        metrics.jsonl     one JSON object per step
        config.json       the trainer's config
        trace.json        per-token records for plots (MOPD only)
        warnings.json     what the run warned about (MOPD's stuck detector), when it did
        teacher_manifest.json   the teachers a student read: name, domains, sha256 of the weights

Every file is written to a temporary name and renamed into place, so a run killed at any moment
(even during a save) leaves the previous checkpoint loadable, and resuming replays the exact
same steps: an interrupted run ends with the same weights and metrics as an uninterrupted one.

Nothing is overwritten that the run does not own. `Run.open`, before any work: the experiment and
adapter names must name a folder inside RUNS_DIR; a folder that holds an adapter of another role
(another trainer's, a merge, one no trainer made) or a trained adapter without checkpoint.pt is
refused; the checkpoint must have this config (the difference is named) and at most this many
steps. A finished run re-run with its config reloads and rewrites nothing: config.json changes only
when a run with that config trains.

Nothing runs from a file someone else made: checkpoint.pt is read with weights_only=True (tensors and
plain data only; `load_checkpoint`). No checkpoint holds non-finite weights: `guarded_step` skips and
undoes an update that makes one, and `Run.save` refuses one. A student records the teachers it reads
(teacher_manifest.json: name, domains, sha256 of the weights) and is not resumed with other weights
under one of those names. checkpoint.pt keeps a copy of that manifest: a run whose side file is
missing or changed while its checkpoint records one is refused, for a resume and for an export
(`recorded_teachers`; `restore_manifest` writes the file back from the copy).
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import random
import warnings
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from .adapters import ROLES, AdapterBank, atomic_write, check_adapter_name, role_of_config, role_of_folder
from .cost import COUNT_VERSION, count_version_of

RUNS_DIR = Path("runs")
# the presets and the loop's checks live with the configs (torch-free); importable from here as before
from .config import FAST, check_experiment, check_loop, experiment_name, fast_or, preset  # noqa: E402,F401
from .config import new_values  # noqa: E402


def writable(folder: Path) -> None:
    """A ValueError before any compute if `folder` (or the nearest folder above it that exists) cannot
    be written: the run would otherwise fail at its first checkpoint, after the work."""
    at = Path(folder)
    while not at.exists() and at != at.parent:
        at = at.parent
    if not at.is_dir():
        raise ValueError(f"cannot create the run folder {folder}: {at} is a file, not a folder")
    if not os.access(at, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write the run folder {folder}: {at} is not writable by this user; run "
                         "from a folder you can write (runs/ is relative to the working folder), or pass "
                         "experiment=None to keep the run in memory")


@dataclass
class Run:
    """One adapter's training run: its folder, its metrics so far, and its checkpoints."""

    dir: Path | None
    """runs/<experiment>/<adapter>/, or None to keep everything in memory (quick experiments)"""
    config: dict
    metrics: list[dict] = field(default_factory=list)
    trace: list[dict] = field(default_factory=list)
    warnings: list[dict] = field(default_factory=list)
    """what the trainer warned about, once each (MOPD's StuckWarning: step, domain, share, message); in
    checkpoint.pt and warnings.json, so a resumed run keeps them and does not warn again"""
    seconds: float = 0.0
    """wall time of the training steps so far (no evaluations, no checkpoints); in checkpoint.pt,
    not in metrics.jsonl, which stays byte-identical between runs of one seed"""
    trained: bool = False
    """whether this call trained a step (a finished run reloaded rewrites nothing)"""
    count_version: int = COUNT_VERSION
    """the version of the cost counting (`cost.COUNT_VERSION`) its metrics' cost/* columns were counted
    by; in checkpoint.pt. A run resumed from an older checkpoint keeps the older number (its first steps
    were counted by that code); one written before the version was kept reads 0"""
    _state: dict | None = field(default=None, repr=False)
    """the checkpoint `open` read and checked, until `resume` restores it"""
    teachers: list[dict] | None = None
    """the teachers this run reads (a student's): name, domain, sha256 of the weights; written beside
    config.json as teacher_manifest.json (`check_teachers`)"""

    @property
    def ledger(self) -> int:
        """`count_version`'s old name, for one release (a DeprecationWarning)."""
        warnings.warn("Run.ledger is deprecated and will be removed in the next release: use Run.count_version",
                      DeprecationWarning, stacklevel=2)
        return self.count_version

    @classmethod
    def open(cls, experiment: str | None, name: str, config) -> "Run":
        """The run of adapter `name`, before any work: the names are checked, and a folder that
        holds an adapter this trainer must not overwrite is refused (`claim`)."""
        check_adapter_name(name)
        folder = None if check_experiment(experiment) is None else RUNS_DIR / experiment / name
        run = cls(folder, asdict(config))
        run.claim(ROLE_OF[type(config).__name__])
        run._state = run.checkpoint()
        return run

    def claim(self, role: str) -> None:
        """Refuse a folder that holds an adapter of another role (a teacher, a merged or foreign
        adapter, another trainer's student), or a trained adapter with no checkpoint to resume
        from: training would replace weights that nothing can restore. The message never advises
        deleting it."""
        if self.dir is None or not self.dir.exists():
            return
        held = role_of_folder(self.dir)
        has_checkpoint = (self.dir / "checkpoint.pt").exists()
        if held is None and (has_checkpoint or not any((self.dir / f).exists() for f in ADAPTER_FILES)):
            return  # nothing there yet (killed before its first checkpoint), or the checkpoint says (`checkpoint`)
        self.check_role(held, role)
        if not has_checkpoint:
            raise ValueError(f"{self.dir} holds a trained adapter but no checkpoint.pt to resume from, so "
                             "training would replace its weights. Give this run another name "
                             f"({NAME_FIELD[role]}=...) or another experiment; load the adapter with bank.load "
                             "to use it")

    def check_role(self, held: str | None, role: str) -> None:
        if held != role:
            raise ValueError(f"{self.dir} holds {ROLES.get(held, UNKNOWN_ROLE)}; "
                             f"{ROLES[role]} never overwrites it. Give this run another name "
                             f"({NAME_FIELD[role]}=...) or another experiment")

    def check_teachers(self, manifest: list[dict]) -> None:
        """Record the teachers this run reads (`teacher_manifest`); a run folder whose record names a
        teacher of the same name with other weights is refused, naming it: resuming would mix two
        teachers in one student (and its export would serve the other one). The record is the
        checkpoint's copy (`recorded_teachers`: its teacher_manifest.json missing or changed is refused);
        a checkpoint from before it kept one is checked against the file, once, and upgraded."""
        self.teachers = manifest
        saved = recorded_teachers(self.dir, self._state) if self.dir is not None else None
        if saved is not None:
            self._compare_teachers(saved, manifest)
        if self._state is not None and "teachers" not in self._state:
            upgrade_checkpoint(self.dir, self._state, self.teachers, checked=saved is not None)

    def _compare_teachers(self, saved: list[dict], manifest: list[dict]) -> None:
        then = {t["name"]: t for t in saved}
        kept = []
        for t in manifest:
            old = then.get(t["name"])
            compacted = {old.get("dtype"), t.get("dtype")} != {"float32"} if old else False
            same = old is None or old.get("sha256") == t["sha256"] or (  # one of them compacted: compare rounded
                compacted and old.get("sha256_bf16") is not None and old.get("sha256_bf16") == t.get("sha256_bf16"))
            kept.append(t if old is None else old)  # the record keeps what the run first read
            if not same:
                raise ValueError(f"{self.dir} was trained with another {t['name']!r}: its weights' sha256 was "
                                 f"{str(old.get('sha256'))[:16]}..., the bank's {t['name']!r} is {str(t['sha256'])[:16]}"
                                 f"... ({MANIFEST}). Load the teacher it was trained with, or give this run another "
                                 "name or experiment")
        self.teachers = kept

    def log(self, row: dict) -> dict:
        self.metrics.append(row)
        self.trained = True
        return row

    # -- checkpoints --------------------------------------------------------------------------

    def save(self, step: int, bank: AdapterBank, name: str, optimizer, generator: torch.Generator) -> None:
        """Checkpoint everything a resumed run needs, atomically, plus the readable files."""
        if self.dir is None:
            return
        adapter = bank.state(name)
        if not finite(adapter.values()):  # the last guard: a checkpoint never holds non-finite weights
            bad = sorted(k for k, t in adapter.items() if not torch.isfinite(t).all())
            raise ValueError(f"step {step}: the adapter {name!r} holds non-finite weights ({', '.join(bad[:3])}"
                             f"{', ...' if len(bad) > 3 else ''}); nothing was saved, {self.dir / 'checkpoint.pt'} "
                             "keeps the last finite step. Lower lr or grad_clip")
        state = {"step": step, "config": self.config, "adapter": adapter,
                 "optimizer": optimizer.state_dict(), "generator": generator.get_state(),
                 "torch_rng": torch.get_rng_state(), "python_rng": random.getstate(),
                 "metrics": self.metrics, "trace": self.trace, "warnings": self.warnings, "seconds": self.seconds,
                 "count_version": self.count_version,
                 "teachers": self.teachers}   # the manifest's copy: a deleted or swapped side file is caught
        buffer = io.BytesIO()
        torch.save(state, buffer)
        atomic_write(self.dir / "checkpoint.pt", buffer.getvalue())
        self.write_files()

    def checkpoint(self) -> dict | None:
        """The last checkpoint, checked against this run's config before any work (`open` calls it):
        None if there is none; a ValueError naming every difference if it was trained with another
        config, or for more steps than this run asks for (the record would disagree with the weights)."""
        path = None if self.dir is None else self.dir / "checkpoint.pt"
        if path is None or not path.exists():
            if self.dir is not None:
                writable(self.dir)
            return None
        state = load_checkpoint(path)
        self.check_role(role_of_config(state.get("config")), role_of_config(self.config))
        saved, now = _comparable(state["config"]), _comparable(self.config)
        if saved != now:
            raise ValueError(f"{self.dir} holds a run with another config ({config_diff(saved, now)}); "
                             "use another experiment name, or the saved settings to resume or reload it")
        done = state["step"]
        if self.config["steps"] < done:
            raise ValueError(f"{self.dir} holds a run of {done} steps; steps={self.config['steps']} would not "
                             f"train, and its record would disagree with its weights: ask for steps={done} to "
                             f"reload it (more to extend it), or use another experiment name")
        if done == self.config["steps"]:  # finished: nothing trains, so the record stays the saved one
            self.config = state["config"]
        else:
            writable(self.dir)
        return state

    def resume(self, bank: AdapterBank, name: str, optimizer, generator: torch.Generator) -> int:
        """Restore the last checkpoint if there is one (checked by `open`); returns the next step."""
        state = self._state
        if state is None:
            return 1
        bank.load_state(name, state["adapter"])
        optimizer.load_state_dict(state["optimizer"])
        generator.set_state(state["generator"])
        torch.set_rng_state(state["torch_rng"])
        random.setstate(state["python_rng"])
        self.metrics, self.trace = state["metrics"], state["trace"]
        self.warnings = state.get("warnings", [])   # a checkpoint from before warnings were kept: none
        self.seconds = state.get("seconds", 0.0)
        self.count_version = min(self.count_version, count_version_of(state, 0))
        self._state = None  # resumed once; the tensors now live in the bank and the optimizer
        return state["step"] + 1

    def write_files(self) -> None:
        """config.json, metrics.jsonl and trace.json; a file whose content is unchanged is not rewritten
        (a finished run reloads from a folder it cannot write, e.g. a shared one)."""
        if self.dir is None:
            return
        files = {"config.json": json.dumps(self.config, indent=1, default=str).encode(),
                 "metrics.jsonl": "".join(json.dumps(r) + "\n" for r in self.metrics).encode()}
        if self.trace:
            files["trace.json"] = json.dumps(self.trace).encode()
        if self.warnings:
            files["warnings.json"] = json.dumps(self.warnings, indent=1).encode()
        if self.teachers is not None and (self.trained or (self.dir / MANIFEST).exists()):  # a reload writes nothing
            files[MANIFEST] = json.dumps(self.teachers, indent=1).encode()
        for file, data in files.items():
            path = self.dir / file
            if not (path.exists() and path.read_bytes() == data):
                atomic_write(path, data)

    def finish(self, bank: AdapterBank, name: str) -> Path | None:
        """Save the trained adapter as a peft folder beside its metrics (a finished run that trained
        nothing now keeps its saved adapter, unless a kill left it unsaved)."""
        if self.dir is None:
            return None
        self.write_files()
        if self.trained or not all((self.dir / f).exists() for f in ADAPTER_FILES):
            bank.save(name, self.dir)
        return self.dir


MANIFEST = "teacher_manifest.json"


def weights_digest(tensors: dict) -> str:
    """sha256 of an adapter's weights: its tensors in fp32, by name (the bank's names with the
    adapter's own name taken out, which are the names peft saves)."""
    h = hashlib.sha256()
    for n in sorted(tensors):
        h.update(n.encode() + tensors[n].detach().float().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def adapter_digest(bank: AdapterBank, name: str, dtype: torch.dtype | None = None) -> str:
    """`weights_digest` of adapter `name` in the bank (rounded to `dtype` first, if given)."""
    return weights_digest({n.replace(f".{name}.", "."): p if dtype is None else p.to(dtype)
                           for n, p in bank.parameters(name).items()})


def folder_digest(folder: str | Path) -> str:
    """`weights_digest` of a saved adapter folder (its adapter_model.safetensors)."""
    from safetensors.torch import load_file

    return weights_digest(load_file(str(Path(folder) / "adapter_model.safetensors")))


def teacher_manifest(bank: AdapterBank, route: dict[str, str]) -> list[dict]:
    """name, domains and sha256 of every teacher a run reads (`route`: domain -> teacher); the base
    and a foreign teacher carry no adapter of this bank (sha256 None, `kind` says which)."""
    out = {}
    for domain, name in route.items():
        entry = out.setdefault(name, {"name": name, "domains": []})
        entry["domains"].append(domain)
        if name in bank.names:  # sha256_bf16: the same teacher held compacted (AdapterBank.compact) matches
            held = next(iter(bank.parameters(name).values())).dtype
            entry.update(sha256=adapter_digest(bank, name), sha256_bf16=adapter_digest(bank, name, torch.bfloat16),
                         dtype=str(held).replace("torch.", ""))
        else:
            entry.update(sha256=None, kind="foreign" if name in bank.foreign else "base")
    return list(out.values())


def read_manifest(folder: Path) -> list[dict] | None:
    """A run's teacher_manifest.json (None if it has none); a ValueError naming it if unreadable."""
    path = Path(folder) / MANIFEST
    if not path.exists():
        return None
    try:
        saved = json.loads(path.read_text())
        if not all(isinstance(t, dict) and "name" in t and "sha256" in t for t in saved):
            raise ValueError("an entry lacks its name or sha256")
    except ValueError as err:
        raise ValueError(f"the teacher manifest {path} is unreadable ({err}); it records which teachers the run "
                         "read: restore it from the run's copy, or retrain the run") from err
    return saved


def recorded_teachers(folder: Path, state: dict | None = None) -> list[dict] | None:
    """The teachers the run in `folder` read, as its checkpoint records them (`state`: the checkpoint,
    if already read; else its checkpoint.pt). Its teacher_manifest.json must be there and say the same:
    a ValueError naming it if it is missing or differs while the checkpoint holds a copy. A checkpoint
    from before checkpoints kept the copy (or none at all): the file alone (None without it)."""
    folder = Path(folder)
    if state is None and (folder / "checkpoint.pt").exists():
        state = load_checkpoint(folder / "checkpoint.pt")
    held = state.get("teachers") if state is not None else None
    side = read_manifest(folder)
    if held is None:
        return side
    names = ", ".join(str(t.get("name")) for t in held)
    if side is None:
        raise ValueError(f"{folder / MANIFEST} is missing, but {folder / 'checkpoint.pt'} records the teachers this "
                         f"run read ({names}): without it a resume would record only the teachers it reads from now "
                         f"on, and an export would serve them. Write it back from the checkpoint's copy with "
                         f"mopd_mini.runs.restore_manifest({str(folder)!r}), or give this run another name or experiment")
    if side != held:
        raise ValueError(f"{folder / MANIFEST} does not match the copy in {folder / 'checkpoint.pt'} (the checkpoint "
                         f"records {names}; the file {', '.join(str(t.get('name')) for t in side)}, or other weights): "
                         f"it was changed after training. Write it back with mopd_mini.runs.restore_manifest("
                         f"{str(folder)!r}), or give this run another name or experiment")
    return held


def upgrade_checkpoint(folder: Path, state: dict, teachers: list[dict], checked: bool = True,
                       stacklevel: int = 3) -> None:
    """A checkpoint from before checkpoints kept a copy of the teacher manifest (`state`, read from
    `folder`/checkpoint.pt, has no "teachers"): accepted this once and rewritten with `teachers` as its
    copy (atomically; teacher_manifest.json written too where it is missing), said in a warning;
    from then on the copy is what a resume or an export compares with (`recorded_teachers`).
    `checked`: whether `teachers` was checked against a teacher_manifest.json (False: the folder had
    none, so they are the teachers read now). A folder this user cannot write keeps its checkpoint
    as it is, and the warning says so. The one upgrade, for a resume (`Run.check_teachers`) and an
    export (`export.check_manifest`)."""
    folder = Path(folder)
    path = folder / "checkpoint.pt"
    how = (f"it was checked against {MANIFEST} this once" if checked else
           f"it had no {MANIFEST} to check against, so it records the teachers read now")
    state["teachers"] = teachers
    if not os.access(folder, os.W_OK | os.X_OK):
        warnings.warn(f"{path} predates the copy of the teacher manifest kept inside checkpoints; "
                      f"{how} (the folder is not writable, so it is not upgraded)", stacklevel=stacklevel)
        return
    buffer = io.BytesIO()
    torch.save(state, buffer)
    atomic_write(path, buffer.getvalue())
    if not (folder / MANIFEST).exists():   # the copy and the file agree from now on (`recorded_teachers`)
        atomic_write(folder / MANIFEST, json.dumps(teachers, indent=1).encode())
    warnings.warn(f"{path} predates the copy of the teacher manifest kept inside checkpoints: {how}, and now "
                  f"holds the copy ({', '.join(str(t.get('name')) for t in teachers)})", stacklevel=stacklevel)


def restore_manifest(folder: str | Path) -> Path:
    """Write a run's teacher_manifest.json back from its checkpoint's copy (a deleted or changed file)."""
    folder = Path(folder)
    state = load_checkpoint(folder / "checkpoint.pt")
    if state.get("teachers") is None:
        raise ValueError(f"{folder / 'checkpoint.pt'} holds no copy of the teacher manifest (a checkpoint written "
                         "before checkpoints kept one, or not a student's)")
    atomic_write(folder / MANIFEST, json.dumps(state["teachers"], indent=1).encode())
    return folder / MANIFEST


def load_checkpoint(path: Path) -> dict:
    """A checkpoint.pt read as tensors and plain data only (`weights_only=True`): unpickling may build
    no other object, so a crafted file (a shared runs folder, a teacher handed out) runs no code.
    A ValueError naming the file if it is refused or unreadable."""
    import pickle

    try:
        state = torch.load(path, weights_only=True)
    except pickle.UnpicklingError as err:
        why = [line.strip().split(". Please")[0] for line in str(err).splitlines() if "GLOBAL" in line]
        if not why:  # not a pickle at all (a truncated or foreign file): below
            said = [x.strip() for x in str(err).splitlines() if x.strip() and not x.startswith(("Weights only",
                    "Please file", "Check the doc"))]
            raise ValueError(f"the checkpoint {path} is unreadable ({said[0] if said else err}); "
                             "if that folder is this run's, delete it to start over; else give this run another "
                             "name or experiment") from err
        raise ValueError(f"refused to load the checkpoint {path}: it asks to build objects that are not tensors "
                         f"or plain data ({why[0]}), so unpickling it could run code that whoever made the file "
                         "put in it; nothing of it was run. No trainer writes such a file: do not use this folder "
                         "(give this run another name or experiment)") from err
    except Exception as err:
        raise ValueError(f"the checkpoint {path} is unreadable ({err}); if that folder is this run's, delete "
                         "it to start over; else give this run another name or experiment") from err
    if not isinstance(state, dict) or not {"step", "config", "adapter"} <= set(state):
        raise ValueError(f"the checkpoint {path} is not a training checkpoint (no step, config and adapter); "
                         "give this run another name or experiment")
    return state


def adamw(params, lr: float, weight_decay: float = 0.0) -> torch.optim.AdamW:
    """AdamW for every trainer: torch's fused kernel (one kernel for all the tensors: the update of
    every LoRA matrix at once) where torch has it for the parameters' device (CUDA, CPU, MPS, ...),
    else the foreach kernels, else the plain loop. The same update as plain AdamW, up to rounding
    (about 1e-9 on fp32 weights)."""
    params = [p for p in params]
    if not params:
        raise ValueError("no parameters to optimise: the adapter has no trainable tensors")
    from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

    devices = {p.device.type for p in params}
    floating = all(p.is_floating_point() for p in params)
    if len(devices) == 1 and floating and devices <= set(_get_fused_kernels_supported_devices()):
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=True)
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, foreach=len(devices) == 1)


@contextmanager
def train_mode(model, enabled: bool = True):
    """model.train() inside, model.eval() after (the trainers sample and score in eval mode); nothing
    at all when not `enabled` (the forward is the same in both modes: no dropout, no checkpointing),
    which spares two walks over every module per step."""
    if not enabled:
        yield model
        return
    model.train()
    try:
        yield model
    finally:
        model.eval()


def finite(tensors) -> bool:
    """Whether every value of every tensor is finite (one sync for all of them)."""
    tensors = [t.detach() for t in tensors]
    return not tensors or bool(torch.stack([torch.isfinite(t).all() for t in tensors]).all())


def guarded_step(loss: torch.Tensor, params: list, optimizer, grad_clip: float) -> dict:
    """backward, clip, step; a non-finite loss, gradient or updated weight skips the update: the
    weights and the optimizer's state stay as they were, and the row says which (`nonfinite`)."""
    optimizer.zero_grad()
    if not torch.isfinite(loss):
        return {"skipped_nonfinite": True, "nonfinite": "loss"}
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(params, grad_clip)
    if not torch.isfinite(norm):
        optimizer.zero_grad()
        return {"skipped_nonfinite": True, "nonfinite": "grad", "grad_norm": norm.item()}
    weights = [p.detach().clone() for p in params]
    state = copy.deepcopy(optimizer.state_dict())
    optimizer.step()
    if not finite(params):  # e.g. an lr so large the update overflows: never keep, never checkpoint it
        with torch.no_grad():
            for p, w in zip(params, weights):
                p.copy_(w)
        optimizer.load_state_dict(state)
        optimizer.zero_grad()
        return {"skipped_nonfinite": True, "nonfinite": "update", "grad_norm": norm.item()}
    return {"skipped_nonfinite": False, "grad_norm": norm.item()}


ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
ROLE_OF = {"GRPOConfig": "teacher", "MOPDConfig": "student", "OfflineConfig": "offline"}
"""the role (adapters.ROLES) of the adapter each trainer's config makes"""
UNKNOWN_ROLE = "an adapter that no trainer's run made (no config.json of train_grpo, train_student or train_offline)"
NAME_FIELD = {"teacher": "name", "student": "student", "offline": "name"}


def config_diff(saved: dict, now: dict) -> str:
    """`field: saved X, now Y` for every field that differs."""
    return "; ".join(f"{k}: saved {saved.get(k)!r}, now {now.get(k)!r}"
                     for k in sorted(saved.keys() | now.keys()) if saved.get(k) != now.get(k))


IGNORED_ON_RESUME = ("steps", "progress", "eval_every", "eval_n", "checkpoint_every", "track_steps", "track_prompts",
                     "stuck_p", "stuck_teacher_logp", "stuck_warn_share", "stuck_window")
ADDED_FIELDS = {"eval_split": "test", "teachers": None,  # fields newer than some saved runs: their value before they existed
                "stuck_p": 0.9, "stuck_teacher_logp": -5.0, "stuck_warn_share": 0.02, "stuck_window": 50,
                "topk_support": False, "beta": 0.5, "lmbda": 1.0, "lmbda_prefix": "teacher", "top_p": 1.0}


def _comparable(config: dict) -> dict:
    """A config minus the fields that do not change the trained weights (how long, how often it
    evaluates or checkpoints, what it shows): a run may be resumed or extended across those. A value
    renamed since the run was saved (config.RENAMED_VALUES: loss "sft" is "ce") reads as its new name."""
    config = new_values({**ADDED_FIELDS, **config})  # a run saved before a field existed had its default
    return {k: v for k, v in config.items() if k not in IGNORED_ON_RESUME}


def read_metrics(folder: str | Path) -> list[dict]:
    """The metrics.jsonl of a run folder."""
    path = Path(folder) / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# every public function (and class method) of this module: its annotated arguments checked at a call from outside
# the package (mopd_mini.validate.guard_public); the package's own calls, e.g. the training loop's, skip the checks
from .validate import guard_public  # noqa: E402

guard_public(globals())
