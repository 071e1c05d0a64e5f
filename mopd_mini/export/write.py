"""The whole export: everything checked first, then every file built in a staging folder and
swapped into place (export_verl, build); a few-step tiny run to export (tiny_run)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

import torch

from ..adapters import BASE, AdapterBank, LoraSettings, atomic_write, share
from ..config import MOPDConfig
from ..domains import get_domains
from ..models import TINY, load_base
from .fold import check_origins, fold_teacher, save_base
from .folder import MARKER, check_out, cleaned_on_signal, clear_stale, marker, swap_into_place
from .for_verl import (MAPPING, VERL_VERSION, Layout, fit, hydra_value, max_prompt_tokens, reward_source, train_rows,
                       unexportable, val_rows, verl_command, verl_overrides, write_parquet)
from .run import check_manifest, check_routing, check_teachers


# ---------------------------------------------------------------------------------------------
# the whole export
# ---------------------------------------------------------------------------------------------


def export_verl(out: str | Path, cfg: MOPDConfig, teachers: dict[str, str | Path], lora: LoraSettings | None = None,
                base_name: str = TINY, layout: Layout = Layout(), root: str | None = None,
                allow_foreign: bool = False, force: bool = False, run: str | Path | None = None,
                allow_mismatch: bool = False, routed_by_flag: tuple[str, ...] = (), overridden: list[dict] = ()) -> dict:
    """Write the verl export of one MOPD experiment into `out`; returns what export.json holds.
    `root`: the folder `out` will be at on the cluster (default: `out` itself, absolute).
    `teachers`: domain -> adapter folder, or BASE (the base itself is that domain's teacher).
    `run`: the course run exported (its student's teacher manifest is checked; never replaced).
    `overridden`: each setting of the run the command line changed ({"setting", "run", "exported",
    "flag"}: --loss, --teacher, --allow-domain-mismatch, --allow-foreign), kept in export.json's "overridden".

    All or nothing: everything is checked first (the config, each setting verl cannot carry, the
    layout, the teachers' folders, origins, records and weights, `out`), then built in a staging
    folder beside `out` and renamed into place at the end. An existing non-empty `out` is refused
    unless `force` and it is a previous export (`check_out`); a failed, interrupted (SIGINT, SIGTERM,
    SIGHUP) or killed export leaves `out` as it was, and a dead one's staging folder is removed by the
    next export."""
    if not str(out).strip():
        raise ValueError("--out is empty (an unset shell variable?); give the export folder, e.g. "
                         "--out build/verl_export")
    cfg.check()
    lora = lora or LoraSettings()
    why = unexportable(cfg, lora)  # refuse before any work: never a silently different run
    if why:
        raise ValueError("; and ".join(why))
    teachers = {d: BASE if p == BASE else Path(p) for d, p in teachers.items()}
    check_teachers(cfg, teachers)
    named = check_routing(teachers, allow_mismatch)
    digests = check_manifest(Path(run) if run else None, teachers)
    actor, pool, replicas = fit(cfg, layout, len(teachers))
    out = Path(out).resolve()
    inputs = ([("the run being exported", Path(run))] if run else []) + [
        (f"the {d} teacher", p) for d, p in teachers.items() if p != BASE]
    check_out(out, force, inputs)
    at = Path(root) if root else out
    base, tokenizer = load_base(base_name, dtype=torch.float32, device="cpu")
    check_origins(base, tokenizer, teachers, base_name, allow_foreign)
    clear_stale(out)
    with cleaned_on_signal():
        staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.staging-{os.getpid()}-"))
        try:
            info = build(staging, at, cfg, teachers, lora, base_name, base, tokenizer, layout,
                         (actor, pool, replicas), allow_foreign)
            info.update(teacher_domains=named, allow_domain_mismatch=allow_mismatch, teacher_sha256=digests,
                        run=str(Path(run).resolve()) if run else None, routed_by_flag=list(routed_by_flag),
                        overridden=list(overridden))
            if routed_by_flag:  # what the exported config runs, not the run's map
                info["mopd_config"]["teachers"] = {**(cfg.teachers or {}),
                                                   **{d: str(teachers[d]) for d in routed_by_flag}}
            atomic_write(staging / "export.json", json.dumps(info, indent=1, default=str).encode())
            atomic_write(staging / MARKER, json.dumps(marker(staging), indent=1).encode())
            share(staging)  # mkdtemp's 0o700 and safetensors' 0o600: as the umask says instead
            swap_into_place(staging, out)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return info


def build(out: Path, at: Path, cfg: MOPDConfig, teachers: dict, lora: LoraSettings, base_name: str, base, tokenizer,
          layout: Layout, split: tuple[int, int, int], allow_foreign: bool) -> dict:
    """Every file of the export, written into `out` (the staging folder); paths in the config are under `at`."""
    actor, pool, replicas = split
    domains = get_domains(cfg.domains)
    save_base(base, tokenizer, out / "student_base")
    diffs = {}
    for d, adapter in teachers.items():
        if adapter == BASE:  # the stage-1 base is this domain's teacher: verl serves the student's checkpoint
            diffs[d] = {"base": True}
            continue
        diffs[d] = fold_teacher(base_name, adapter, out / "teachers" / d, domains, base=base,
                                 tokenizer=tokenizer, allow_foreign=allow_foreign)
    train, val = train_rows(tokenizer, cfg), val_rows(tokenizer, cfg)
    write_parquet(train, out / "data" / "train.parquet")
    write_parquet(val, out / "data" / "val.parquet")
    atomic_write(out / "reward" / "factworld_reward.py", reward_source().encode())
    paths = {"train": at / "data" / "train.parquet", "val": at / "data" / "val.parquet",
             "student": at / "student_base", "reward": at / "reward" / "factworld_reward.py",
             "teachers": {d: at / "student_base" if p == BASE else at / "teachers" / d for d, p in teachers.items()}}
    overrides = verl_overrides(cfg, lora, paths, layout, max_prompt_tokens(tokenizer, train + val))
    doc = {"verl_version": VERL_VERSION, "config_name": "ppo_trainer",
           "overrides": [f"{k}={hydra_value(v)}" for k, v in overrides.items()],
           "command": verl_command(overrides),
           "layout": {"gpus": layout.gpus, "actor_gpus": actor, "teacher_pool_gpus": pool,
                      "replicas_per_teacher": replicas, "teacher_tp": layout.teacher_tp},
           "mapping": [{"ours": a, "verl": b, "note": c} for a, b, c in MAPPING]}
    write_yaml(doc, out / "verl_config.yaml")
    atomic_write(out / "run_verl.sh", ("#!/usr/bin/env bash\n# written by mopd_mini.export; launch on the "
                                       "cluster's head node, in verl's environment\nset -euo pipefail\n"
                                       + doc["command"] + ' \\\n    "$@"\n').encode())
    (out / "run_verl.sh").chmod(0o755)
    info = {"base": base_name, "teachers": {d: str(p) for d, p in teachers.items()},
            "teacher_paths": {d: str(p) for d, p in paths["teachers"].items()}, "mopd_config": asdict(cfg),
            "lora": asdict(lora), "fold_check": diffs, "train_rows": len(train), "val_rows": len(val)}
    atomic_write(out / "export.json", json.dumps(info, indent=1, default=str).encode())
    return info


def write_yaml(doc: dict, path: Path) -> Path:
    try:
        import yaml
    except ImportError as err:
        raise ImportError("the verl export writes YAML with pyyaml: pip install 'mopd_mini[export]'") from err
    atomic_write(path, yaml.safe_dump(doc, sort_keys=False, width=120).encode())
    return path


def tiny_run(work: Path, experiment: str = "verl-tiny") -> Path:
    """A few-step tiny course run to export: teacher_binding, teacher_recall and the student trained
    for two steps each under <work>/runs/<experiment>/; returns the run folder. Its numbers mean
    nothing; its folders are a real course run's (what `make check-verl` and the export's tests use)."""
    from ..distill import train_student
    from ..config import GRPOConfig
    from ..grpo import train_grpo

    work.mkdir(parents=True, exist_ok=True)
    here = os.getcwd()
    os.chdir(work)  # runs/ is relative to the working folder
    try:
        bank = AdapterBank(*load_base("tiny", device="cpu"))
        small = dict(experiment=experiment, eval_every=0, progress=False, checkpoint_every=100)
        for domain in ("binding", "recall"):
            train_grpo(bank, GRPOConfig(domain=domain, steps=2, prompts_per_step=4, group_size=4, **small))
        train_student(bank, MOPDConfig(steps=2, prompts_per_domain=4, topk=8, track_steps=(), eval_n=8, **small))
    finally:
        os.chdir(here)
    return work / "runs" / experiment
