"""The regime study's training glue (studies/regimes.py is the command): one method of an arm built
in an adapter bank after what it reads (`build_recipe`: train_grpo for GRPO, train_student for
MOPD, collect / gold and train_offline for RFT and SFT, merge at a weight chosen on val), scored on
test and val (`evaluate_rows`: mopd_mini.starting_points' rows), and what its record keeps: the cost
totals, MOPD's per-token KL along the trace (`kl_along`), the stuck share at STUCK_STEPS
(`stuck_at`). `run_job` builds, evaluates and records one (method, seed) of an arm without grids;
`trained_fields` is what a sliced job's record keeps of its training run."""

from __future__ import annotations

import time
from statistics import fmean

import torch

import mopd_mini as mm
from mopd_mini import cost
from mopd_mini.adapters import BASE
from mopd_mini.config import OfflineConfig
from mopd_mini.domains import get_domains
from mopd_mini.merge import merge
from mopd_mini.offline import collect, gold, train_offline
from mopd_mini.starting_points import starting_points

from .cures import STUCK_STEPS, stuck_series
from .regimes_arms import EVAL, QUICK_EVAL, Recipe
from .regimes_report import Context, key_of
from tools.provenance import machine, machine_line


def build_recipe(ctx: Context, bank, m: Recipe, seed: int, built: dict) -> dict:
    """Train `m` at `seed` into the bank (a finished run reloads), after what it reads. Returns
    {"run": Run or None, "counts": ..., "merge_w": ...}."""
    if m.key in built:
        return built[m.key]
    for need in m.needs:
        build_recipe(ctx, bank, ctx.methods[need], seed, built)
    s = ctx.settings(m)
    domains = tuple(m.domains or ctx.arm.domains)
    route = {d: ctx.methods[t].name for d, t in m.teachers.items()}
    common = dict(seed=seed, experiment=ctx.experiment(seed), eval_every=0, progress=ctx.progress,
                  max_new_tokens=ctx.arm.max_new_tokens)
    out = {"run": None}
    if m.trainer == "base":
        pass
    elif m.trainer == "grpo":
        out["run"] = mm.train_grpo(bank, mm.GRPOConfig.for_model(
            "tiny", domain=domains[0] if len(domains) == 1 else domains, name=m.name, **s, **common))
    elif m.trainer == "mopd":
        out["run"] = mm.train_student(bank, mm.MOPDConfig.for_model(
            "tiny", domains=domains, student=m.name, teachers=route or None, **s, **common))
    elif m.trainer == "offline":
        cfg = OfflineConfig.for_model("tiny", loss="ce", domains=domains, name=m.name, teachers=route or None,
                                      **s, **common)
        data = gold(bank.tokenizer, cfg) if m.data == "gold" else collect(bank, cfg)
        out["run"] = train_offline(bank, cfg, data)
        out["counts"] = data.counts()
    elif m.trainer == "merge":
        w = merge_weight(ctx, m, bank, seed, built)
        merge(bank, m.name, {ctx.methods[t].name: w for t in m.merged}, how=s["how"])
        out["merge_w"] = w
    else:
        raise ValueError(f"unknown trainer {m.trainer!r} of method {m.key!r}")
    built[m.key] = out
    return out


def merge_weight(ctx: Context, m: Recipe, bank, seed: int, built: dict) -> float:
    """The merge's weight, chosen on val at seed 0 (the registered grid, studies.baselines' values)
    by the mean val accuracy over the arm's domains, once; recorded in the JSON for the other seeds."""
    key = f"{ctx.arm.number}|{m.key}|{m.name}"
    chosen = ctx.store.read()["merges"].get(key)
    if chosen is not None:
        return chosen["w"]
    s = ctx.settings(m)
    if seed != 0:   # seed 0's teachers choose: build them in a bank of their own
        other = mm.AdapterBank(*mm.load_base("tiny"))
        return merge_weight(ctx, m, other, 0, {})
    for t in m.merged:
        build_recipe(ctx, bank, ctx.methods[t], 0, built)
    n = (QUICK_EVAL if ctx.quick else EVAL)["val"]
    scores = {}
    for w in s["grid"]:
        merge(bank, "merge_probe", {ctx.methods[t].name: w for t in m.merged}, how=s["how"])
        rows = evaluate_rows(bank, "merge_probe", ctx.arm.domains, n, "val")
        scores[w] = fmean(r["acc"] for r in rows)
    w = max(scores, key=lambda x: (scores[x], -abs(x - 1.0)))
    with ctx.store.edit() as data:
        data["merges"][key] = {"w": w, "val": {str(k): v for k, v in scores.items()}}
    return w


def evaluate_rows(bank, adapter: str, domains: tuple, n: int, split: str) -> list[dict]:
    """mopd_mini.starting_points' rows (greedy accuracy and trace diagnostics by domain and length)."""
    with bank.use(adapter) as model:
        return starting_points(model, bank.tokenizer, n=n, seed=0, split=split, domains=get_domains(domains))


def kl_along(trace: list[dict]) -> dict:
    """MOPD's tracked records as {step: {"kl": mean per completion position, "n": records there}}."""
    out = {}
    for r in trace:
        s = out.setdefault(str(r["step"]), {"sum": [], "n": []})
        for i, v in enumerate(r["kl"]):
            if i == len(s["sum"]):
                s["sum"].append(0.0), s["n"].append(0)
            s["sum"][i] += v
            s["n"][i] += 1
    return {k: {"kl": [a / b for a, b in zip(v["sum"], v["n"])], "n": v["n"]} for k, v in out.items()}


def stuck_at(run, domains: tuple, window: int = 10) -> dict:
    """The stuck detector's share and the off-support mass per domain at STUCK_STEPS and the last
    step: {domain: {step: {"share", "off_support", "share_window"}}}, share_window the mean share
    over the `window` steps ending there (the registered predictor reads it at step 100; docs/stuck.md)."""
    rows = [r for r in run.metrics if "step" in r]
    last = rows[-1]["step"] if rows else None
    out = {}
    for d in domains:
        by = {r["step"]: r.get(f"stuck_share/{d}") for r in rows}
        out[d] = {}
        for r in rows:
            if r["step"] in (*STUCK_STEPS, last):
                near = [v for st, v in by.items() if r["step"] - window < st <= r["step"] and v is not None]
                out[d][str(r["step"])] = {"share": r.get(f"stuck_share/{d}"), "off_support": r.get(f"off_support/{d}"),
                                          "share_window": fmean(near) if near else None}
    return out


def run_job(ctx: Context, key: str, seed: int) -> dict:
    """Build, evaluate and record one (method, seed)."""
    started = time.perf_counter()
    torch.manual_seed(0)
    bank = mm.AdapterBank(*mm.load_base("tiny"))
    m = ctx.methods[key]
    built = {}
    for need in m.needs:
        build_recipe(ctx, bank, ctx.methods[need], seed, built)
    try:
        out = build_recipe(ctx, bank, m, seed, built)
    except ValueError as err:   # the trainer refused at its registered budget (e.g. RFT with no correct
        print(f"{key} seed {seed} FAILED: {err}", flush=True)   # sample): a result, recorded as such
        with ctx.store.edit() as data:
            data["runs"][key_of(ctx.arm.number, key, seed)] = {
                "arm": ctx.arm.number, "method": key, "seed": seed, "adapter": m.name, "signature": ctx.signature(key),
                "failed": str(err), "wall_seconds": time.perf_counter() - started}
        return data["runs"][key_of(ctx.arm.number, key, seed)]
    name = BASE if m.trainer == "base" else m.name
    n = QUICK_EVAL if ctx.quick else EVAL
    run = out["run"]
    rec = {"arm": ctx.arm.number, "method": key, "seed": seed, "adapter": m.name, "trainer": m.trainer,
           "signature": ctx.signature(key),
           "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in ctx.settings(m).items()},
           "needs": list(m.needs), "test": evaluate_rows(bank, name, ctx.arm.domains, n["test"], "test"),
           "val": evaluate_rows(bank, name, ctx.arm.domains, n["val"], "val"),
           "cost": cost.totals(run.metrics) if run is not None else {},
           "train_seconds": run.seconds if run is not None else 0.0,
           "N": cost.param_counts(bank)[0],
           "n": sum(p.numel() for p in bank.parameters(m.name).values()) if m.trainer != "base" else 0,
           "merge_w": out.get("merge_w"), "counts": out.get("counts"),
           "kl_along": kl_along(run.trace) if run is not None and run.trace else None,
           "stuck": stuck_at(run, ctx.arm.domains) if m.trainer == "mopd" else None, "machine": machine_line(machine())}
    rec["wall_seconds"], rec["finished_at"] = time.perf_counter() - started, time.time()
    with ctx.store.edit() as data:
        data["quick"] = ctx.quick
        data["runs"][key_of(ctx.arm.number, key, seed)] = rec
    return rec


def trained_fields(ctx: Context, bank, m: Recipe, out: dict) -> dict:
    """What a record keeps of a training run (its cost, time, MOPD's KL along the trace and stuck shares)."""
    run = out["run"]
    return {"trainer": m.trainer, "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in ctx.settings(m).items()},
            "needs": list(m.needs), "cost": cost.totals(run.metrics) if run is not None else {},
            "train_seconds": run.seconds if run is not None else 0.0, "N": cost.param_counts(bank)[0],
            "n": sum(p.numel() for p in bank.parameters(m.name).values()) if m.trainer != "base" else 0,
            "merge_w": out.get("merge_w"), "counts": out.get("counts"),
            "kl_along": kl_along(run.trace) if run is not None and run.trace else None,
            "stuck": stuck_at(run, ctx.arm.domains) if m.trainer == "mopd" and run is not None else None,
            "stuck_series": stuck_series(run, ctx.arm.domains) if m.trainer == "mopd" and run is not None else None}
