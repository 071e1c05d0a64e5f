"""The regime study of docs/regimes.md: one command per arm, as pre-registered.

    python -m studies.regimes --arm 2 --seeds 0 1 2 --workers 2     # chain: GRPO, SFT teacher, MOPD, SFT, RFT
    python -m studies.regimes --arm 1 --seeds 0 1 2 --workers 2     # conflict + memory: interference
    python -m studies.regimes --estimate --arm 2                    # a few timed steps of each method: the time
    python -m studies.regimes --render                              # the page and figures again, from the JSON
    python -m studies.regimes --quick --arm 2 --out /tmp/r          # the smoke test: seconds, every code path
    python -m studies.regimes --arm 2b --seeds 0 1 2 3 4 --workers 2  # arm 2 re-run: depths 2-5, the cures, rates on val
    python -m studies.regimes --arm memory-cures --seeds 0 1 2      # the cures on arm 1's memory domain
    python -m studies.regimes --teacher-depths                      # which chain depths the SFT teacher learns (seed 0)
    python -m studies.regimes --timed-steps 100                     # one arm-2b seed of exact KL, timed (a fraction)

Every method is an existing trainer with the arm's domains and the registered budget (the table
`ARMS`: train_grpo for GRPO and Mix-RL, train_student for MOPD, collect / train_offline for
RFT and SFT on a teacher's samples, train_offline on `offline.gold` for SFT on gold traces,
merge for the merges); one generic loop runs them. The order: the arm's gate (seed 0, val; its
registered fall-backs), then the methods by dependency level (a teacher before what reads it),
each level's (method, seed) jobs in `--workers` processes of one torch thread each.

Every finished job's results (greedy test and val accuracy by domain and length with the trace
diagnostics of `mopd_mini.starting_points`, cost totals from `mopd_mini.cost`, wall seconds, MOPD's
per-token KL along the trace at its tracked steps) are stored in docs/regimes.json as it finishes,
keyed by (arm, method, seed); a re-run skips what is recorded there, even on a fresh clone
without runs/ (a recorded teacher that an unrecorded method needs is retrained, deterministically,
when its adapter is missing). Runs live in runs/regimes/arm<a>/s<seed>/. The page's "## Results"
section and docs/figures/regimes_arm<a>_*.png are rewritten from the JSON after every arm.

Arms 2b and memory-cures (the amendment of 2026-12-03) declare a grid per method (`Arm.grids`):
each method's setting is chosen on val first by studies/study.py's runner (`plan_choice`, in slices), the
choice kept in the JSON, then every seed trains at it; their gate is read on every seed
(`Arm.gate_every_seed`), and arm 2b's chain is its own variant of the domain (`domain_variants`).
Their section of the page (`cures_markdown`) is rendered once they have records: the choice, the
gate on every seed, strict and prefix trace by depth and per seed, the stuck share at steps 50,
100, 300 per method and seed, and the amendment's decisions (`decisions_cures`: Holm over H2b.1's
four cures and H2b.3; H2b.2's threshold tested on seeds 3-4) over the seeds that pass the gate.

The store, the workers' claims, the gates, the per-seed rows and the decision rules are those of
the one study runner (studies/study.py). The study's files: studies/regimes_arms.py declares the arms
(`Recipe`: one row of an arm, a trainer and its budget; `ARMS`), studies/regimes_report.py reads their
records and applies the registered rules, studies/regimes_page.py writes the page,
studies/regimes_train.py trains, scores and records one method of an arm; this module runs them
(the gates, the slices, the estimate) and is the command.
"""

from __future__ import annotations

import sys

if __name__ == "__main__" and "--status" in sys.argv[1:]:   # from the JSON alone, before torch loads
    from studies.slices import status_main

    raise SystemExit(status_main("regimes", sys.argv[1:]))

import argparse
import dataclasses
import json
import time
from pathlib import Path

import torch  # noqa: E402

import mopd_mini as mm  # noqa: E402
from mopd_mini import runs  # noqa: E402
from mopd_mini.adapters import BASE  # noqa: E402
from mopd_mini.domains import get_domains  # noqa: E402
from mopd_mini.config import OfflineConfig  # noqa: E402
from mopd_mini.offline import gold, train_offline  # noqa: E402

from . import slices, study  # noqa: E402
from .cures import CURES, JSD_BETAS  # noqa: E402,F401
from tools.provenance import command, machine, machine_line  # noqa: E402
from .regimes_arms import (Arm, ARM1, ARM1B, ARM2, ARM2B, ARM2B_STEPS, ARM_MEMORY, ARMS, batch_of, CHAIN_DEEP,  # noqa: E402,F401
                           CHOICE_KEY, DEEP_TOKENS, DOCS, domain_variants, EVAL, EXPERIMENT, in_variants, level,
                           LR_GRID, methods_for, QUICK, QUICK_EVAL, Recipe, weight)
from .regimes_report import (acc, arm_methods, arm_records, ArmReport, comparison, complete, Context, decide,  # noqa: E402,F401
                             decisions, decisions_cures, gate_every_seed_values, gate_passing, gate_value, key_of,
                             lock_path, primary_arm2, REGISTERED, Store, tested, with_setting)
from .regimes_page import render  # noqa: E402,F401
from .regimes_train import build_recipe, evaluate_rows, run_job, trained_fields  # noqa: E402


def deep_teacher_cfg(steps: int) -> OfflineConfig:
    """teacher_depths' SFT teacher at `steps` (seed 0; a finished run in its folder reloads)."""
    return OfflineConfig.for_model("tiny", loss="ce", domains=("chain",), name=f"sft_teacher_deep_{steps}",
                                   steps=steps, batch_size=8, prompts_per_domain=8 * steps, seed=0, eval_every=0,
                                   progress=False, max_new_tokens=DEEP_TOKENS, experiment=f"{EXPERIMENT}/depths/s0")


def teacher_depths(args) -> dict:
    """Which chain depths the tiny base can learn (a design measurement, not a study run): the SFT
    teacher of arm 2's recipe (SFT on gold traces) trained at seed 0 on CHAIN_DEEP's depths 2-5 at
    200 and 400 steps (arm 2's budget and its gate's retry), each depth scored on val (100
    prompts): final answer, strict trace, prefix trace."""
    out = {}
    with domain_variants({"chain": CHAIN_DEEP}):
        bank = mm.AdapterBank(*mm.load_base("tiny"))
        for steps in (200, 400):
            cfg = deep_teacher_cfg(steps)
            name = cfg.name
            t = time.perf_counter()
            train_offline(bank, cfg, gold(bank.tokenizer, cfg))
            rows = evaluate_rows(bank, name, ("chain",), 100, "val")
            out[str(steps)] = {"seconds": time.perf_counter() - t,
                               "by_depth": {str(r["length"]): {k: r[k] for k in ("acc", "strict", "trace", "words")}
                                            for r in rows}}
            print(f"SFT teacher, {steps} steps, seed 0, val (100 a depth): " + "; ".join(
                f"depth {L}: acc {v['acc']:.2f} strict {v['strict']:.2f} prefix {v['trace']:.2f} words {v['words']:.2f}"
                for L, v in out[str(steps)]["by_depth"].items()) + f" ({out[str(steps)]['seconds']:.0f} s)", flush=True)
    rec = {"command": command("studies.regimes", args.argv), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "machine": machine_line(machine()), "runs": out}
    with Store(args.out / "regimes.json").edit() as data:
        data["measurements"]["teacher_depths"] = rec
    return rec


def timed_seed(args) -> dict:
    """One seed of one method at arm 2b's registered settings, for the compute statement: MOPD exact
    KL (the arm's most expensive per-step form beside the cures, docs/benchmarks.md) on CHAIN_DEEP
    from `teacher_depths`' 400-step seed-0 teacher, `args.timed_steps` of its 400 steps (a fraction,
    scaled linearly to the budget), then the registered evaluation (test 200 and val 100 a depth)."""
    steps = args.timed_steps
    with domain_variants({"chain": CHAIN_DEEP}):
        bank = mm.AdapterBank(*mm.load_base("tiny"))
        cfg = deep_teacher_cfg(400)
        train_offline(bank, cfg, gold(bank.tokenizer, cfg))   # reloads the measured run
        t = time.perf_counter()
        run = mm.train_student(bank, mm.MOPDConfig.for_model(
            "tiny", domains=("chain",), student=f"timed_mopd_kl_{steps}", teachers={"chain": cfg.name}, loss="kl",
            steps=steps, prompts_per_domain=8, seed=0, eval_every=0, progress=False, max_new_tokens=DEEP_TOKENS,
            experiment=f"{EXPERIMENT}/timed/s0"))
        train = time.perf_counter() - t
        t = time.perf_counter()
        evaluate_rows(bank, f"timed_mopd_kl_{steps}", ("chain",), EVAL["test"], "test")
        evaluate_rows(bank, f"timed_mopd_kl_{steps}", ("chain",), EVAL["val"], "val")
        ev = time.perf_counter() - t
    rec = {"command": command("studies.regimes", args.argv), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "machine": machine_line(machine()), "method": "mopd_kl", "steps": steps, "budget_steps": ARM2B_STEPS,
           "train_seconds": train, "eval_seconds": ev,
           "seconds_at_budget": train / steps * ARM2B_STEPS + ev,
           "stuck_share": {str(r["step"]): r.get("stuck_share/chain") for r in run.metrics if r.get("step") in (50, 100)}}
    print(f"timed seed: mopd_kl, {steps} of {ARM2B_STEPS} steps: {train:.0f} s ({train / steps:.2f} s a step), "
          f"evaluation {ev:.0f} s; at the budget about {rec['seconds_at_budget'] / 60:.1f} min", flush=True)
    with Store(args.out / "regimes.json").edit() as data:
        data["measurements"]["timed_seed"] = rec
    return rec


class ArmEvals(study.StoreEvals):
    """The runner's evaluation cache on the arm's JSON (its "choices" section): {domain: {L: score}}
    at the lengths a choice reads (the domain's train lengths) by CHOICE_KEY."""

    def __init__(self, arm: Arm, store: Store):
        super().__init__(store, "choices", f"{arm.number}|eval")
        self.arm = arm

    def score(self, bank, name: str, split: str, n: int) -> dict:
        doms = get_domains(self.arm.domains)
        if name in self.refused:   # a run the trainer refused: nothing right
            return {d: {str(L): 0.0 for L in dom.train_lengths} for d, dom in doms.items()}
        rows = evaluate_rows(bank, name, self.arm.domains, n, split)
        return {d: {str(r["length"]): r[CHOICE_KEY.get(d, "acc")] for r in rows
                    if r["domain"] == d and r["length"] in doms[d].train_lengths} for d in self.arm.domains}


def quick_grid(key: str, grid: list) -> list:
    """The smoke test's grid: each method's middle setting; exact KL's two lowest, so the
    bracketing and the tie-break run too."""
    return list(grid[:2]) if key == "mopd_kl" else [grid[len(grid) // 2]]


# ---------------------------------------------------------------------------------------------
# the arms with grids (2b, memory-cures) in time-boxed slices: every run one recorded job, the
# adapters later jobs read kept beside the JSON (studies/slices.py)
# ---------------------------------------------------------------------------------------------


INPUTS = "regimes_inputs"
"""the folder beside regimes.json that holds every adapter a later job reads (tracked by git)"""


def inputs_of(out: Path) -> slices.Inputs:
    return slices.Inputs(out / INPUTS, runs.folder_digest)


def input_key(arm: Arm, name: str, seed: int) -> str:
    return f"arm{arm.number}/s{seed}/{name}"


def run_key(arm: Arm, key: str, setting: dict, seed: int) -> str:
    """A val-choice run's record in the "choices" section: (arm, method, setting, seed)."""
    return f"{arm.number}|run|{key}|{json.dumps(setting, sort_keys=True)}|{seed}"


def choice_spec(args, arm: Arm, keys) -> study.Study:
    """The runner's declaration of the arm's choice for `keys` (what `study.replay_choice` reads):
    each method's grid (the smoke test's shorter one), bracketed by study.extend_lr, a tie-break at
    seed 1. Nothing trains through it: its runs are this study's jobs."""
    return study.Study(module="studies.regimes", methods={k: study.Method(None, grid=quick_grid(k, arm.grids[k])
                                                                          if args.quick else list(arm.grids[k]),
                                                                          extend=study.extend_lr) for k in keys},
                       setup=None, domains=tuple(arm.domains), tie_break=1, val_from_run=False,
                       **(dict(max_extend=1, rebracket=1) if args.quick else {}))


def choice_entry(arm: Arm, base_val: dict, rec: dict, setting: dict, val_n: int) -> dict:
    """A run's grid entry (study.replay_choice's): its normalised val scores against the base and a
    ceiling of 1.0 at every read length (i.e. the mean val score itself), from its record."""
    doms = get_domains(arm.domains)
    accs = {"base": base_val, **{f"teacher_{d}": {d: {L: 1.0 for L in dom.train_lengths}} for d, dom in doms.items()},
            rec["adapter"]: {d: {int(L): v for L, v in by.items()} for d, by in rec["scores"].items()}}
    s = study.scores(accs, rec["adapter"], val_n, domains=tuple(arm.domains))
    return {**setting, "name": rec["adapter"], **{d: s[d]["normalised"] for d in arm.domains}, "mean": s["mean"],
            "se": s["mean_se"], "seconds": rec.get("train_seconds", 0.0)}


def plan_choice(args, arm: Arm, data: dict) -> tuple[list[dict], dict, dict]:
    """(jobs, chosen, grid) of the arm's val choice from its records: the jobs the choice needs next
    (every one independent of the others), the settings chosen so far {method: setting}, and each
    chosen method's grid entries. A method is planned once what it reads is chosen; a run at seed s
    of a method that reads a teacher needs that teacher's chosen run at seed s first (a job of its own),
    or, for a teacher with no grid (memory-cures' teacher_memory), its seed record at s."""
    n = (QUICK_EVAL if args.quick else EVAL)["val"]
    base = data["choices"].get(f"{arm.number}|eval|{BASE}|val|{n}")
    if base is None:
        return [{"kind": "base"}], {}, {}
    base = {d: {int(L): v for L, v in by.items()} for d, by in base.items()}
    methods = {m.key: m for m in arm.methods}
    spec = choice_spec(args, arm, list(arm.grids))
    chosen, grid, jobs = {}, {}, []

    def need(job):
        if job not in jobs:
            jobs.append(job)

    for k in sorted(arm.grids, key=lambda k: level(methods, k)):
        if any(t in arm.grids and t not in chosen for t in methods[k].needs):
            continue                                    # what it reads is not chosen yet
        def val_of(setting, seed, k=k):
            rec = data["choices"].get(run_key(arm, k, setting, seed))
            return None if rec is None else choice_entry(arm, base, rec, setting, n)
        missing, entries, best = study.replay_choice(spec, k, val_of)
        for setting, seed in missing:
            ready = True
            for t in methods[k].needs:                 # its teacher's run at this seed, first
                if t in arm.grids and run_key(arm, t, chosen[t], seed) not in data["choices"]:
                    need({"kind": "choice", "key": t, "setting": chosen[t], "seed": seed})
                    ready = False
                elif t not in arm.grids and not has_input(data, arm, methods[t].name, seed):
                    need({"kind": "seed", "key": t, "seed": seed})   # a teacher with no grid: its seed record
                    ready = False
            if ready:
                need({"kind": "choice", "key": k, "setting": setting, "seed": seed})
        if best is not None:
            chosen[k], grid[k] = study._setting(spec.methods[k], best), entries
    return jobs, chosen, grid


def methods_at(arm: Arm, chosen: dict) -> dict[str, Recipe]:
    """The arm's methods at the settings chosen so far (the others as declared)."""
    return {m.key: with_setting(m, chosen[m.key]) if m.key in chosen else m for m in arm.methods}


def reads(data: dict, inp: str) -> list[str]:
    """The recorded jobs that read input `inp` (their "reads": {input: digest})."""
    recs = [*data["choices"].values(), *data["runs"].values()]
    return [f"{r['method']} at seed {r['seed']}" for r in recs if isinstance(r, dict) and inp in (r.get("reads") or {})]


def input_records(data: dict, arm: Arm, name: str, seed: int) -> list[dict]:
    """The records that made adapter `name` of the arm at `seed` and kept it as an input."""
    return [r for r in [*data["choices"].values(), *data["runs"].values()]
            if isinstance(r, dict) and r.get("arm") == arm.number and r.get("seed") == seed
            and r.get("adapter") == name and r.get("digest")]


def has_input(data: dict, arm: Arm, name: str, seed: int) -> bool:
    return bool(input_records(data, arm, name, seed))


def provide(ctx: Context, bank, m: Recipe, seed: int, built: dict, data: dict, out: Path) -> tuple[str, str]:
    """Load the input adapter of `m` at `seed` (a teacher a job reads) into the bank from the inputs
    folder, its digest checked against the record that made it. Returns (input, digest). No record:
    the study stops (a teacher's job runs before its readers'); missing or another digest: InputError."""
    made = input_records(data, ctx.arm, m.name, seed)
    if not made:
        raise SystemExit(f"{m.name} at seed {seed} has no record with an input: its job must run first")
    inp, digest = made[0]["input"], made[0]["digest"]
    bank.load(m.name, inputs_of(out).get(inp, digest, reads(data, inp)))
    built[m.key] = {"run": None}
    return inp, digest


def choice_scores(arm: Arm, rows: list[dict]) -> dict:
    """{domain: {str(L): score}} a choice reads: CHOICE_KEY's metric at the domain's train lengths."""
    doms = get_domains(arm.domains)
    return {d: {str(r["length"]): r[CHOICE_KEY.get(d, "acc")] for r in rows
                if r["domain"] == d and r["length"] in doms[d].train_lengths} for d in arm.domains}


def train_job(args, arm: Arm, store: Store, key: str, seed: int, setting: dict | None) -> tuple:
    """Train one run of the arm in a fresh bank, its teachers read from the inputs: (ctx, bank, m,
    fields, reads) or, when the trainer refused at this setting, (ctx, None, m, {"failed": msg}, reads)."""
    data = store.read()
    _, chosen, _ = plan_choice(args, arm, data)
    methods = methods_at(arm, chosen)
    m = with_setting(methods[key], setting) if setting is not None else methods[key]
    ctx = Context(arm, {**methods, key: m}, args.quick, store, not args.quiet)
    torch.manual_seed(0)
    bank = mm.AdapterBank(*mm.load_base("tiny"))
    built, read = {}, {}
    for t in m.needs:
        inp, digest = provide(ctx, bank, ctx.methods[t], seed, built, data, args.out)
        read[inp] = digest
    try:
        out = build_recipe(ctx, bank, m, seed, built)
    except ValueError as err:        # refused at its registered budget (RFT with no correct sample): a result
        print(f"{m.name} seed {seed} FAILED: {err}", flush=True)
        return ctx, None, m, {"failed": str(err)}, read
    return ctx, bank, m, trained_fields(ctx, bank, m, out), read


def save_input(args, arm: Arm, bank, m: Recipe, seed: int) -> dict:
    """The trained adapter saved in the inputs folder (once): {"input": key, "digest": ...}."""
    k = input_key(arm, m.name, seed)
    return {"input": k, "digest": inputs_of(args.out).put(k, lambda tmp: bank.save(m.name, tmp))}


def choice_job(args, arm: Arm, store: Store, key: str, setting: dict, seed: int) -> None:
    """One run of the val choice: trained, scored on val, its adapter kept as an input, recorded."""
    started = time.perf_counter()
    n = QUICK_EVAL if args.quick else EVAL
    ctx, bank, m, fields, read = train_job(args, arm, store, key, seed, setting)
    rec = {"arm": arm.number, "method": key, "setting": setting, "seed": seed, "adapter": m.name,
           "signature": ctx.signature(key), "reads": read, **fields}
    if bank is None:                 # refused: it scores 0 at every read length, as registered
        rec["scores"] = {d: {str(L): 0.0 for L in dom.train_lengths} for d, dom in get_domains(arm.domains).items()}
    else:
        rec["val"] = evaluate_rows(bank, m.name, arm.domains, n["val"], "val")
        rec["scores"] = choice_scores(arm, rec["val"])
        rec.update(save_input(args, arm, bank, m, seed))
    rec.update(machine=machine_line(machine()), wall_seconds=time.perf_counter() - started, finished_at=time.time())
    with store.edit() as data:
        data["quick"] = args.quick
        data["choices"][run_key(arm, key, setting, seed)] = rec


def base_job(args, arm: Arm, store: Store) -> None:
    """The base's val scores, which every choice is normalised against (the choice's first job)."""
    n = (QUICK_EVAL if args.quick else EVAL)["val"]
    bank = mm.AdapterBank(*mm.load_base("tiny"))
    ArmEvals(arm, store).get(bank, BASE, "val", n)


def seed_job(args, arm: Arm, store: Store, key: str, seed: int) -> None:
    """One (method, seed) of the arm at its chosen setting, recorded in "runs" with its test and val
    rows. A run the val choice made at this seed is not trained again: its adapter is read from the
    inputs and its training fields from its record. A teacher's adapter is kept as an input."""
    started = time.perf_counter()
    n = QUICK_EVAL if args.quick else EVAL
    data = store.read()
    _, chosen, _ = plan_choice(args, arm, data)
    made = data["choices"].get(run_key(arm, key, chosen[key], seed)) if key in chosen else None
    methods = methods_at(arm, chosen)
    m = methods[key]
    if made is not None and "digest" in made:
        ctx = Context(arm, methods, args.quick, store, not args.quiet)
        bank = mm.AdapterBank(*mm.load_base("tiny"))
        bank.load(m.name, inputs_of(args.out).get(made["input"], made["digest"], reads(data, made["input"])))
        fields = {k: made[k] for k in ("trainer", "settings", "needs", "cost", "train_seconds", "N", "n", "merge_w",
                                       "counts", "kl_along", "stuck", "stuck_series", "reads", "val", "input", "digest")}
        fields["from_choice"] = run_key(arm, key, chosen[key], seed)
    elif made is not None:           # the choice's run was refused by its trainer: so is this seed's
        ctx, bank, fields = Context(arm, methods, args.quick, store), None, {"failed": made["failed"], "reads": made["reads"]}
    else:
        ctx, bank, m, fields, read = train_job(args, arm, store, key, seed, None)
        fields["reads"] = read
        if bank is not None:
            fields["val"] = evaluate_rows(bank, BASE if m.trainer == "base" else m.name, arm.domains, n["val"], "val")
            if any(key in r.needs for r in methods.values()):   # a teacher: later jobs read it
                fields.update(save_input(args, arm, bank, m, seed))
    rec = {"arm": arm.number, "method": key, "seed": seed, "adapter": m.name, "signature": ctx.signature(key), **fields}
    if bank is not None:
        rec["test"] = evaluate_rows(bank, BASE if m.trainer == "base" else m.name, arm.domains, n["test"], "test")
    rec.update(machine=machine_line(machine()), wall_seconds=time.perf_counter() - started, finished_at=time.time())
    with store.edit() as data:
        data["quick"] = args.quick
        data["runs"][key_of(arm.number, key, seed)] = rec


def plan_seeds(args, arm: Arm, data: dict, chosen: dict) -> list[dict]:
    """The seed jobs left once the choice is made: every (method, seed) with no record at its chosen
    setting whose teachers' records at that seed exist (a teacher's job runs before its readers')."""
    methods = methods_at(arm, chosen)
    ctx = Context(arm, methods, args.quick, None)
    def recorded(k, s):
        r = data["runs"].get(key_of(arm.number, k, s))
        return r is not None and r.get("signature") == ctx.signature(k)
    jobs = []
    for s in args.seeds:
        for k in sorted(methods, key=lambda k: (level(methods, k), -weight(methods[k]))):
            if not recorded(k, s) and all(has_input(data, arm, methods[t].name, s) for t in methods[k].needs):
                jobs.append({"kind": "seed", "key": k, "seed": s})
    return jobs


def job_seconds(arm: Arm, data: dict, job: dict) -> float:
    """A job's estimate: the longest recorded wall time of the same method in this arm (any setting
    or seed), else the timed seed's time at the budget scaled by the method's relative cost
    (`weight`), else 15 minutes."""
    if job["kind"] == "base":
        return 60.0
    walls = [r["wall_seconds"] for r in [*data["choices"].values(), *data["runs"].values()]
             if isinstance(r, dict) and r.get("arm") == arm.number and r.get("method") == job["key"] and r.get("wall_seconds")]
    if walls:
        return max(walls)
    timed = data.get("measurements", {}).get("timed_seed")
    methods = {m.key: m for m in arm.methods}
    ref = methods.get(timed["method"]) if timed else None
    if ref is not None and weight(ref) > 0:
        return timed["seconds_at_budget"] * max(0.2, weight(methods[job["key"]]) / weight(ref))
    return 900.0


def job_argv(args, arm: Arm, job: dict) -> list[str]:
    return [slices.python(), "-m", "studies.regimes", "--arm", str(arm.number), "--out", str(args.out), "--quiet",
            "--job", json.dumps(job), *(["--quick"] if args.quick else [])]


def run_job_json(args, arm: Arm, job: dict) -> None:
    """One job of `run_sliced` in this process (`--job`)."""
    store = Store(args.out / "regimes.json")
    if job["kind"] == "base":
        return base_job(args, arm, store)
    if job["kind"] == "choice":
        return choice_job(args, arm, store, job["key"], job["setting"], job["seed"])
    return seed_job(args, arm, store, job["key"], job["seed"])


def phase_of(args, arm: Arm, data: dict) -> tuple[str, list[dict], dict]:
    """(phase, its jobs now, chosen): the val choice while it has jobs, then the seeds."""
    jobs, chosen, grid = plan_choice(args, arm, data)
    if jobs or set(chosen) < set(arm.grids):
        return "val choice", jobs, chosen
    return "seeds", plan_seeds(args, arm, data, chosen), chosen


def finish_choice(args, arm: Arm, store: Store) -> None:
    """Once every method is chosen: the choice's summary in the JSON (what the page and arm_methods read)."""
    data = store.read()
    jobs, chosen, grid = plan_choice(args, arm, data)
    if jobs or set(chosen) < set(arm.grids) or str(arm.number) in data["choices"]:
        return
    methods = {m.key: m for m in arm.methods}
    sig = json.dumps([str(arm.number), arm.grids, [Context(arm, methods, args.quick, store).signature(k) for k in methods],
                      args.quick], default=str)
    refused = {r["adapter"]: r["failed"] for k, r in data["choices"].items()
               if k.startswith(f"{arm.number}|run|") and "failed" in r}
    runs_ = [r for k, r in data["choices"].items() if k.startswith(f"{arm.number}|run|")]
    with store.edit() as d:
        d["choices"][str(arm.number)] = {"signature": sig, "chosen": chosen, "grid": grid, "refused": refused,
                                         "machine": " | ".join(sorted({r["machine"] for r in runs_})),
                                         "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def run_sliced(args, arm: Arm) -> None:
    """The arm, phase after phase, each phase's jobs in `--workers` processes, inside `--hours`: no job
    starts that its estimate says cannot finish before the deadline, the running ones are stopped
    there (nothing of them kept), and the command ends with what is done, what is left and how to
    continue. Running it again continues where it stopped, on any machine holding the JSON and inputs."""
    store = Store(args.out / "regimes.json")
    deadline = slices.Deadline(args.hours)
    started = time.time()
    with store.edit() as data:       # every input a record names, checked first (slices.Inputs.check)
        for k in inputs_of(args.out).check(arm_records(data, arm)):
            sec, key = k.split("|", 1)
            print(f"input of {key} is missing and no recorded job read it: its job runs again", flush=True)
            del data[sec][key]
    again = slices.continuing("studies.regimes", args.argv if args.argv is not None else sys.argv[1:])
    total = slices.run_phases(store.read, lambda data: phase_of(args, arm, data), lambda j: job_argv(args, arm, j),
                              workers=args.workers, deadline=deadline, estimate=lambda data, j: job_seconds(arm, data, j),
                              again=again, label=f"arm {arm.number}", between=lambda: finish_choice(args, arm, store))
    finish_choice(args, arm, store)
    data = store.read()
    phase, jobs, _ = phase_of(args, arm, data)
    left = sum(job_seconds(arm, data, j) for j in jobs)
    with store.edit() as d:
        d.setdefault("slices", {}).setdefault(str(arm.number), []).append(
            {"command": command("studies.regimes", args.argv), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
             "machine": machine_line(machine()), "wall_seconds": time.time() - started, "hours": args.hours,
             "workers": args.workers, "finished": len(total.finished), "stopped": len(total.stopped),
             "phase_wall_seconds": {k: round(v, 1) for k, v in total.phase_wall_s.items()}})
        d.setdefault("plans", {})[str(arm.number)] = {
            "done": not jobs, "phase": phase, "total_left": len(jobs), "seconds": left, "more": phase == "val choice",
            "command": again, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    slices.slice_report(total, jobs, left, again)


def gate_every_seed_line(data: dict, arm: Arm) -> list[str]:
    """Each recorded seed's gate (arm.gate_every_seed): the value at every compared length, passed or not."""
    return [] if arm.gate_every_seed is None else study.gate_lines(arm.gate_every_seed, gate_every_seed_values(data, arm))


def run_gate(args, arm: Arm, store: Store) -> tuple[int, bool]:
    """(retries used, fall-back taken): the gate's method at seed 0 on val, then its retries."""
    g = arm.gate
    tries, before = [], (store.read()["gates"].get(str(arm.number)) or {}).get("tries", [])
    for tried in range(len(g.retries) + 1):
        ctx = Context(arm, methods_for(arm, tried), args.quick, store, not args.quiet)
        m = ctx.methods[g.method]
        seen = [t for t in before if t.get("signature") == ctx.signature(g.method)]   # a try made before
        v = seen[0]["val"] if seen else gate_value(store.record(ctx, g.method, 0) or run_job(ctx, g.method, 0), g)
        tries.append({"adapter": m.name, "steps": ctx.settings(m).get("steps"), "val": v, "passed": v >= g.threshold,
                      "signature": ctx.signature(g.method)})
        print(f"gate {g.name}: {m.name} at seed 0, val {g.domain} L{g.lengths}: {v:.3f} "
              f"({'passes' if v >= g.threshold else 'fails'} >= {g.threshold})", flush=True)
        if v >= g.threshold:
            break
    passed = tries[-1]["passed"]
    fallback = not passed and g.fallback is not None
    with store.edit() as data:
        data["gates"][str(arm.number)] = {"name": g.name, "tries": tries, "passed": passed, "fallback": fallback,
                                          "threshold": g.threshold, "lengths": list(g.lengths), "domain": g.domain}
    return len(tries) - 1, fallback


def jobs_to_run(ctx: Context, seeds: list[int]) -> list[list[tuple[str, int]]]:
    """Per dependency level, the (method, seed) jobs to run: those not recorded, and recorded ones
    whose adapter is missing while an unrecorded method of the seed reads it (so no two workers
    retrain one teacher)."""
    todo = {(k, s) for k in ctx.methods for s in seeds if ctx.store.record(ctx, k, s) is None}
    for k, m in ctx.methods.items():
        for s in seeds:
            readers = [r for r, rm in ctx.methods.items() if k in rm.needs and (r, s) in todo]
            if readers and m.trainer not in ("merge", "base") and not ctx.adapter_saved(m, s):
                todo.add((k, s))
    order = list(ctx.methods)
    levels = {}
    for k, s in todo:
        levels.setdefault(batch_of(ctx.methods, k), []).append((k, s))
    return [sorted(levels[lv], key=lambda j: (-weight(ctx.methods[j[0]]), order.index(j[0]), j[1]))
            for lv in sorted(levels)]


def run_arm(args, arm: Arm) -> None:
    """An arm without grids (1, 1b, 2): its gate at seed 0 (and its retries), then every (method,
    seed) by dependency level in claiming workers (the arms with grids run in slices: `run_sliced`)."""
    store = Store(args.out / "regimes.json")
    started = time.time()
    tried, fallback = run_gate(args, arm, store)
    ctx = Context(arm, arm_methods(arm, store.read(), tried, fallback), args.quick, store, not args.quiet)
    with store.edit() as data:   # recorded first: a run stopped early still names its command
        data["invocations"].setdefault(str(arm.number), []).append(
            {"command": command("studies.regimes", args.argv), "started": started, "wall_seconds": None,
             "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine_line(machine()),
             "seeds": args.seeds})
    for i, jobs in enumerate(jobs_to_run(ctx, args.seeds)):
        print(f"arm {arm.number}: {len(jobs)} jobs: {jobs}", flush=True)
        if args.workers > 1 and len(jobs) > 1:
            claims = runs.RUNS_DIR / ctx.experiment(0).rsplit("/", 1)[0] / f"claims-{started:.0f}-{i}.json"
            study.in_claiming_workers("studies.regimes", jobs, args.workers, claims,
                                      ["--arm", str(arm.number), "--tried", str(tried), "--out", str(args.out), "--quiet"]
                                      + (["--fallback"] if fallback else []) + (["--quick"] if args.quick else []))
        else:
            for k, s in jobs:
                run_job(ctx, k, s)
    with store.edit() as data:
        data["invocations"][str(arm.number)][-1]["wall_seconds"] = time.time() - started


def estimate(args, arm: Arm) -> float:
    """Seconds the arm would take: each method's first 3 steps timed (in memory), scaled to its
    steps; collect's samples timed on 16 prompts and scaled; one evaluation timed; / workers."""
    methods = methods_for(arm, 0)
    if arm.grids:   # timed at each method's middle setting (the rate does not change a step's cost)
        methods = {k: with_setting(m, arm.grids[k][len(arm.grids[k]) // 2]) if k in arm.grids else m
                   for k, m in methods.items()}
    ctx = Context(arm, methods, args.quick, Store(args.out / "regimes.json"))
    bank = mm.AdapterBank(*mm.load_base("tiny"))
    total, lines, per_method = 0.0, [], {}
    for k, m in methods.items():
        s = ctx.settings(m)
        if m.trainer in ("base", "merge"):
            continue
        steps = s.get("steps", 0)
        probe = dataclasses.replace(m, adapter=f"probe_{k}", settings={
            **s, "steps": 3, **({"prompts_per_domain": min(s["prompts_per_domain"], 16)} if m.trainer == "offline" else {}),
            **({"track_steps": ()} if m.trainer == "mopd" else {}),
            **({"keep": "all"} if "keep" in s else {})})   # an untrained teacher may get nothing right
        pctx = dataclasses.replace(ctx, methods={**ctx.methods, k: probe})
        pctx.experiment = lambda seed: None
        for n in m.needs:   # what it reads: an adapter at the base (the cost does not depend on the weights)
            bank.create(methods[n].name, seed=1)
        t = time.perf_counter()
        build_recipe(pctx, bank, probe, 0, {n: {"run": None} for n in m.needs})
        sec = time.perf_counter() - t
        per = sec / 3 * steps
        if m.data == "collect":
            per += sec * s["prompts_per_domain"] / 16 * len(m.domains or arm.domains)   # the sampling, scaled
        lines.append(f"  {k}: {sec / 3:.2f} s a step x {steps} -> {per / 60:.1f} min a seed")
        total += per
        per_method[k] = per
    t = time.perf_counter()
    evaluate_rows(bank, BASE, arm.domains, (QUICK_EVAL if args.quick else EVAL)["test"], "test")
    ev = (time.perf_counter() - t) * 1.5 * len(methods)
    if arm.grids:   # the val choice at seed 0 (and the tie-break's seed 1), then seeds 1.. at the chosen settings
        one_eval = ev / len(methods)
        grid = sum(len(arm.grids[k]) * (per_method.get(k, 0.0) + one_eval / 1.5) for k in arm.grids)
        worst = sum((2 + 2 + 2 * 4) * (per_method.get(k, 0.0) + one_eval / 1.5) for k in arm.grids)
        seeds = (total + ev) * len([x for x in args.seeds if x != 0])
        # the choice runs in this one process (study.choose with one worker); the seeds in --workers processes
        lo, hi = grid + seeds / max(1, args.workers), grid + worst + seeds / max(1, args.workers)
        print(f"arm {arm.number} estimate ({len(args.seeds)} seeds, {args.workers} workers):\n" + "\n".join(lines)
              + f"\n  the val grid at seed 0: {grid / 3600:.2f} CPU-h; bracketing and tie-breaks at most {worst / 3600:.2f} "
              f"CPU-h more; seeds {[x for x in args.seeds if x != 0]} at the chosen settings: {seeds / 3600:.2f} CPU-h"
              f"\n  total between {lo / 3600:.1f} and {hi / 3600:.1f} h of wall time", flush=True)
        timed = ctx.store.read()["measurements"].get("timed_seed")
        if timed and timed["method"] in per_method and timed.get("budget_steps") == methods[timed["method"]].settings.get("steps"):
            scale = timed["train_seconds"] / timed["steps"] * timed["budget_steps"] / per_method[timed["method"]]
            print(f"  scaled by the timed seed ({timed['method']}: {timed['train_seconds'] / timed['steps']:.2f} s a step "
                  f"over {timed['steps']} steps, {timed['date']}; x{scale:.2f} this probe's): between "
                  f"{lo * scale / 3600:.1f} and {hi * scale / 3600:.1f} h", flush=True)
        return hi
    total = (total + ev) * len(args.seeds) / max(1, args.workers)
    print(f"arm {arm.number} estimate ({len(args.seeds)} seeds, {args.workers} workers, evaluations "
          f"{ev / 60:.1f} min a seed):\n" + "\n".join(lines) + f"\n  total about {total / 60:.0f} min", flush=True)
    return total


# ---------------------------------------------------------------------------------------------
# the command
# ---------------------------------------------------------------------------------------------


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arm", choices=[str(a) for a in ARMS], default="2",
                   help="1, 2, 1b (arm 1's second pair), 2b (arm 2 re-run with the cures) or memory-cures")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--workers", type=int, default=1, help="processes of one torch thread each [default: 1]")
    p.add_argument("--out", type=Path, default=None, help="where regimes.json, regimes.md and figures/ go "
                   "[default: docs/, or a temporary-looking runs/regimes-quick/docs with --quick]")
    p.add_argument("--quick", action="store_true", help="every method at a few steps (the smoke test)")
    p.add_argument("--estimate", action="store_true", help="time a few steps of every method; train nothing")
    p.add_argument("--render", action="store_true", help="the page and figures from the JSON only")
    p.add_argument("--allow-shrink", action="store_true", help="write the page even if it shows fewer table rows "
                   "than the one at --out, or its views fewer values (recorded in the JSON and said on the page)")
    p.add_argument("--teacher-depths", action="store_true",
                   help="measure which chain depths (2-5, a 7-cycle) the SFT teacher learns at seed 0; train nothing else")
    p.add_argument("--timed-steps", type=int, default=0,
                   help="time this many steps of one arm-2b seed of MOPD exact KL (after --teacher-depths); train nothing else")
    slices.quiet_flag(p)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--jobs", default="[]", help=argparse.SUPPRESS)
    p.add_argument("--tried", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--claims", default=None, help=argparse.SUPPRESS)
    p.add_argument("--fallback", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--hours", type=float, default=None,
                   help="a time-boxed slice (arms with grids: 2b, memory-cures): stop starting jobs that cannot end "
                   f"{slices.RESERVE_S / 60:.0f} min before this many hours, stop the running ones at that point "
                   "(nothing of them kept), print what is left and the command that continues")
    p.add_argument("--status", action="store_true", help="per arm and phase: jobs recorded and left, CPU-hours, "
                   "machines (from the JSON alone; answered before torch loads)")
    p.add_argument("--job", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.argv = list(argv) if argv is not None else None
    args.out = args.out or (runs.RUNS_DIR / "regimes-quick" / "docs" if args.quick else DOCS)
    torch.set_num_threads(1)
    if args.teacher_depths:
        return teacher_depths(args)
    if args.timed_steps:
        return timed_seed(args)
    arm = {str(k): v for k, v in ARMS.items()}[args.arm]
    with domain_variants(arm.variants):
        return _main(args, arm)


def _main(args, arm: Arm):
    if args.job is not None:         # one job of a slice (run_sliced), in its own process
        return run_job_json(args, arm, json.loads(args.job))
    if args.worker:
        store = Store(args.out / "regimes.json")
        ctx = Context(arm, arm_methods(arm, store.read(), args.tried, args.fallback), args.quick, store)
        for k, s in study.claimed(json.loads(args.jobs), lock_path(), args.claims and Path(args.claims)):
            run_job(ctx, k, s)
        return None
    if args.estimate:
        return estimate(args, arm)
    if not args.render and arm.grids:
        run_sliced(args, arm)
    elif not args.render:
        if args.hours is not None:
            raise SystemExit(f"--hours slices the arms with grids (2b, memory-cures); arm {arm.number} is recorded in full")
        run_arm(args, arm)
    if arm.grids and not args.render:   # the amendment's arms: recorded; their tables are written with their results
        gates = gate_every_seed_line(Store(args.out / "regimes.json").read(), arm)
        print(f"arm {arm.number}: recorded in {args.out / 'regimes.json'}" + "".join(f"; {g}" for g in gates), flush=True)
        return Store(args.out / "regimes.json").read()
    page = render(args.out, allow_shrink=args.allow_shrink)
    print(f"wrote {page} and {args.out / 'figures'}")
    return Store(args.out / "regimes.json").read()


if __name__ == "__main__":
    main()
