"""The run exported, read and checked: its config (an older run's config.json upgraded to today's
fields), its teachers and the student's LoRA settings; each teacher's own record against the routing,
and the teachers' weights against the student's record (an old checkpoint upgraded with it once)."""

from __future__ import annotations

import json
import warnings
from dataclasses import fields
from pathlib import Path

from .. import runs
from ..adapters import BASE, LoraSettings, role_of_config
from ..config import Endorsement, GoldenGain, MOPDConfig


# ---------------------------------------------------------------------------------------------
# the run: its config, teachers and LoRA settings, read and checked
# ---------------------------------------------------------------------------------------------


def config_from_json(saved: dict) -> MOPDConfig:
    """An MOPDConfig from its config.json (lists back to tuples, the UCMOPD options back to theirs),
    checked. Every field must be there: a missing one is a ValueError naming it, never its default
    (only the fields newer than some saved runs, runs.ADDED_FIELDS, take the value they had before)."""
    if not isinstance(saved, dict):
        raise ValueError(f"it holds a {type(saved).__name__}, not a config")
    known = {f.name for f in fields(MOPDConfig)}
    missing = sorted(known - set(saved) - set(runs.ADDED_FIELDS))
    if missing:
        raise ValueError(f"it lacks {', '.join(missing)}: the export writes only what the run did, and will not "
                         "guess a default")
    saved = {**runs.ADDED_FIELDS, **saved}
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in saved.items() if k in known}
    for name, option in (("golden_gain", GoldenGain), ("endorsement", Endorsement)):
        if isinstance(values.get(name), dict):
            values[name] = option(**values[name])
    cfg = MOPDConfig(**values)
    cfg.check()
    return cfg


def read_run(run: str | Path) -> tuple[MOPDConfig, dict[str, Path | str], LoraSettings]:
    """The MOPD config, teachers and student LoRA settings of a finished course run. Each domain's
    teacher is the one the run was distilled from (its `teachers` map): an adapter folder of the
    run, or BASE (the stage-1 base)."""
    run = Path(run)
    config_file = run / "student" / "config.json"
    if not run.is_dir():
        raise FileNotFoundError(f"no run folder at {run}: give --run runs/<experiment> (the folder that holds "
                                "teacher_<domain>/ and student/)")
    if not config_file.exists():
        raise FileNotFoundError(f"no MOPD run at {run} ({config_file} is missing): train the student first "
                                "(notebook 03 or train_student), or give --teacher DOMAIN=ADAPTER instead")
    try:
        cfg = config_from_json(json.loads(config_file.read_text()))
    except (ValueError, TypeError) as err:
        raise ValueError(f"the student's config {config_file} is unreadable ({err}); re-run the training "
                         "that made it, or restore its config.json") from err
    teachers = {d: BASE if name == BASE else run / name for d, name in cfg.route.items()}
    return cfg, teachers, lora_of(run / "student")


def lora_of(adapter: Path) -> LoraSettings:
    """The LoRA settings of a saved adapter (peft's adapter_config.json), else the defaults."""
    path = Path(adapter) / "adapter_config.json"
    if not path.exists():
        return LoraSettings()
    c = json.loads(path.read_text())
    targets = c.get("target_modules", "all-linear")
    # peft saves "all-linear" expanded to module paths; their leaf names select the same layers
    targets = targets if isinstance(targets, str) else tuple(sorted({t.split(".")[-1] for t in targets}))
    return LoraSettings(r=c["r"], alpha=c["lora_alpha"], dropout=c.get("lora_dropout", 0.0), target_modules=targets)


def check_teachers(cfg: MOPDConfig, teachers: dict) -> None:
    """Every domain has exactly one teacher, and each is an adapter folder (or BASE): a clear error
    naming the domain, the path and the fix, before anything is loaded or written."""
    missing = [d for d in cfg.domains if d not in teachers]
    if missing:
        raise ValueError(f"no teacher adapter for domain(s) {missing}: every domain in the data needs one "
                         f"(--teacher DOMAIN=ADAPTER); given: {sorted(teachers)}")
    extra = [d for d in teachers if d not in cfg.domains]
    if extra:
        raise ValueError(f"teacher(s) for {extra} but the experiment's domains are {list(cfg.domains)}")
    for d, path in teachers.items():
        if path == BASE:
            continue
        if not (Path(path) / "adapter_config.json").is_file():
            routed = (cfg.teachers or {}).get(d)
            why = (f" (the run's teachers map routes {d} to {routed!r}; a foreign teacher, on another base, has "
                   "no folder in the run)" if routed else "")
            raise FileNotFoundError(f"no teacher adapter for {d} at {path}{why}: adapter_config.json is missing. "
                                    f"Train it, or give --teacher {d}=FOLDER (a folder saved by AdapterBank.save)")


def teacher_domains(path) -> tuple[str, ...]:
    """The domains a teacher's own record (its run's config.json) names: a GRPO teacher's `domain`,
    a Mix-RL adapter's several, a student's or an offline adapter's `domains`; none for the base, a
    merge or a foreign adapter (no config.json of a trainer)."""
    if path == BASE:
        return ()
    try:
        config = json.loads((Path(path) / "config.json").read_text())
    except (OSError, ValueError):
        return ()
    role = role_of_config(config)
    names = config.get("domain") if role == "teacher" else config.get("domains") if role else None
    names = (names,) if isinstance(names, str) else names
    return tuple(n for n in names if isinstance(n, str)) if isinstance(names, (list, tuple)) else ()


def check_routing(teachers: dict, allow_mismatch: bool) -> dict[str, list[str]]:
    """Each domain's teacher names that domain in its own record (`teacher_domains`); a ValueError
    naming every mismatch unless `allow_mismatch` (--allow-domain-mismatch, recorded in export.json).
    Returns domain -> the domains its teacher's record names."""
    named = {d: list(teacher_domains(p)) for d, p in teachers.items()}
    wrong = [f"{d} is routed to {p}, whose record names {named[d] or 'no domain'}"
             + ("" if p == BASE or named[d] else f" (no trainer's config.json in {p})")
             for d, p in teachers.items() if d not in named[d]]
    if wrong and not allow_mismatch:
        raise ValueError("the routing does not match the teachers' own records: " + "; ".join(wrong)
                         + ". Route each domain to its own teacher, or pass --allow-domain-mismatch "
                         "(allow_mismatch=True) to export this routing on purpose (export.json records it)")
    return named


def check_manifest(run: Path | None, teachers: dict) -> dict[str, str]:
    """A teacher given under a name the student's record names must have the weights the student read
    (sha256); a ValueError naming it otherwise. The record is its checkpoint's copy of the teacher
    manifest, which teacher_manifest.json must match (`runs.recorded_teachers`: a file missing or changed
    while the checkpoint records one is refused). A checkpoint from before checkpoints kept the copy is
    checked against teacher_manifest.json this once and, when the teachers match, upgraded with it
    (`runs.upgrade_checkpoint`, as a resume does; said in a warning); one with no manifest at all is
    exported with a warning that its teachers could not be checked. Returns domain -> sha256 of each
    exported adapter."""
    student = Path(run) / "student" if run else None
    state = (runs.load_checkpoint(student / "checkpoint.pt")
             if student is not None and (student / "checkpoint.pt").exists() else None)
    recorded = runs.recorded_teachers(student, state) if student is not None else None
    manifest = {t["name"]: t for t in recorded or []}
    digests = {}
    for d, path in teachers.items():
        if path == BASE:
            continue
        digests[d] = runs.folder_digest(path)
        read = manifest.get(Path(path).name)
        if read is not None and read.get("sha256") is not None and read["sha256"] != digests[d]:
            raise ValueError(f"the {d} teacher {path} is not the {Path(path).name!r} the student was trained "
                             f"with: its weights' sha256 is {digests[d][:16]}..., the student's "
                             f"{runs.MANIFEST} records {read['sha256'][:16]}... Give the teacher it read, or "
                             "retrain the student")
    if state is not None and "teachers" not in state:   # an old checkpoint: accepted once, upgraded
        if recorded is not None:
            runs.upgrade_checkpoint(student, state, recorded, stacklevel=4)
        else:
            warnings.warn(f"{student} records no teachers (no copy in its checkpoint.pt, no {runs.MANIFEST}: "
                          "written before runs recorded them), so the exported teachers could not be checked "
                          "against the ones it was trained with", stacklevel=3)
    return digests
