"""Three studies that question MOPD, as plain functions (bench/ablations.py runs them for 3 seeds
and writes docs/ablations.md; notebook 06 runs them for one seed).

    bank, other = ablation_banks()                       # the course base, and a base of another origin
    teachers(bank, other)                                # teacher_binding/recall, and the other base's binding teacher
    origin = origin_study(bank, seed=0)                  # 1. same origin matters?
    rounds = multi_round(bank, seed=0)                   # 2. multi-round MOPD
    uc = ucmopd_study(bank, seed=0)                      # 3. UCMOPD vs plain MOPD, in two settings

1. Origin (the paper's section 4.4.2): the student on the course base learns binding from the
   binding teacher of ANOTHER base (`load_base("tiny-other")`: the same tokenizer, other weights),
   recall from the course's own recall teacher, beside the normal two-teacher run; the initial
   per-token KL to each binding teacher is measured on the same student samples.
2. Multi-round (section 4.4.3, Table 4): round-2 teachers by GRPO from a copy of the round-1
   student, then a round-2 student from the round-2 teachers (from the base, and optionally from
   the round-1 student), normalised against the ROUND-1 teachers.
3. UCMOPD (arXiv 2608.26735): Golden-Gain + Teacher-Endorsement vs plain MOPD, in the two-teacher
   setting and in capability preservation (recall prompts routed to the stage-1 base).

Every run goes through `train_teacher` / `train_student` with the tiny preset; names carry the
seed, so one bank holds every seed's runs, and runs/<experiment>/ reloads finished ones.
"""

from __future__ import annotations

import math

from dataclasses import replace

import torch

from . import stats
from . import routing
from .adapters import BASE, AdapterBank
from .distill import MOPDConfig, train_student
from .domains import get_domains
from .grpo import GRPOConfig, train_teacher
from .models import TINY, TINY_OTHER, load_base
from .rollout import sample
from .runs import experiment_name, fast_or
from .ucmopd import Endorsement, GoldenGain

OTHER = "teacher_binding_other"  # the foreign binding teacher's name in the course bank
OTHER_TEACHER = {"steps": 400, "lr": 2e-3}
"""The other base's binding teacher: GRPO with the binding recipe bench/teacher_headroom.py chose
on validation (docs/teachers.md: 400 steps at lr 2e-3, against the course preset's 200 at 1e-3), so
that it is STRONGER than the course's own binding teacher, as the paper's foreign teacher was
(measured in docs/ablations.md). The course's teachers keep the preset."""
OTHER_EXPERIMENT = "other_strong"  # its runs: runs/<experiment>/other_strong/
CURVE_KEYS = ("step", "kl/binding", "kl/recall", "reward/binding", "reward/recall", "gg_kept/binding",
              "gg_kept/recall", "tef_masked/binding", "tef_masked/recall")


def ablation_banks(other: str | None = TINY_OTHER, device=None) -> tuple[AdapterBank, AdapterBank | None]:
    """The course's bank (tiny base) and the other origin's bank (default: the tiny-other base;
    None: no second bank, for the studies that need none)."""
    bank = AdapterBank(*load_base(TINY, device=device))
    return bank, None if other is None else AdapterBank(*load_base(other, device=device, dtype=torch.float32))


def _quick(cfg, quick: bool):
    """--quick: a handful of steps, in memory (a smoke test of every code path)."""
    return replace(cfg, steps=3, eval_every=3, eval_n=4, experiment=None) if quick else cfg


def student_config(name: str, seed: int, experiment: str, quick: bool = False, steps: int | None = None,
                   **overrides) -> MOPDConfig:
    """The tiny student preset (MOPD_FAST=1: half the steps, runs/<experiment>-fast/); `steps`
    replaces the preset's step count (the notebook's live runs are shorter)."""
    cfg = MOPDConfig.for_model("tiny", experiment=experiment_name(experiment), progress=False, seed=seed,
                               student=name, track_steps=(), **overrides)
    if steps is not None:
        cfg = replace(cfg, steps=fast_or(steps, max(1, steps // 2)))
    return _quick(cfg, quick)


def teacher_config(domain: str, seed: int, experiment: str, quick: bool = False, steps: int | None = None,
                   **overrides) -> GRPOConfig:
    """The tiny teacher preset, as `student_config`."""
    cfg = GRPOConfig.for_model("tiny", domain=domain, experiment=experiment_name(experiment), progress=False,
                               seed=seed, **overrides)
    if steps is not None:
        cfg = replace(cfg, steps=fast_or(steps, max(1, steps // 2)))
    return _quick(cfg, quick)


def teachers(bank: AdapterBank, other: AdapterBank | None, experiment: str = "ablations", quick: bool = False) -> dict:
    """Round-1 teachers on the course base (seed 0, as the course's), the other base's binding
    teacher (seed 0, `OTHER_TEACHER`), registered in `bank` as OTHER (allow_foreign: on purpose;
    `other=None` skips it). Returns the runs."""
    runs = {f"teacher_{d}": train_teacher(bank, teacher_config(d, 0, experiment, quick)) for d in ("binding", "recall")}
    if other is not None:
        runs[OTHER] = train_teacher(other, teacher_config("binding", 0, f"{experiment}/{OTHER_EXPERIMENT}", quick,
                                                          **OTHER_TEACHER))
        bank.add_foreign(OTHER, other, "teacher_binding", allow_foreign=True)
    return runs


def normal_student(bank: AdapterBank, seed: int, loss: str = "pg", experiment: str = "ablations",
                   quick: bool = False, steps: int | None = None, **overrides):
    """The normal two-teacher student student_<loss>_s<seed> (trained, or reloaded): the origin
    study's reference, the round-1 student of multi_round, plain MOPD in ucmopd_study."""
    name = f"student_{loss}_s{seed}"
    return name, train_student(bank, student_config(name, seed, experiment, quick, steps, loss=loss, **overrides))


def _curve(run) -> list[dict]:
    """The logged rows, cut to the keys the figures read (and the accuracies)."""
    return [{k: v for k, v in r.items() if k in CURVE_KEYS or k.startswith("acc/")} for r in run.metrics]


# ---------------------------------------------------------------------------------------------
# 1. origin
# ---------------------------------------------------------------------------------------------


@torch.no_grad()
def initial_kl(bank: AdapterBank, seed: int, n: int = 256, foreign: str = OTHER) -> dict:
    """Per-token reverse KL from the student AT INIT (the base: its adapter starts at B = 0) to the
    same-origin and the foreign binding teacher, on the SAME n student samples of binding prompts."""
    binding = get_domains(["binding"])["binding"]
    examples = binding.train_examples(1, n, seed)
    with bank.use(BASE) as model:
        rollout = sample(model, bank.tokenizer, examples, temperature=1.0, max_new_tokens=4,
                         generator=torch.Generator().manual_seed(seed))
    kl = routing.kl_on_samples(bank, rollout, BASE, ["teacher_binding", foreign])
    return {"same_origin": kl["teacher_binding"], "other_origin": kl[foreign],
            "ratio": kl[foreign] / kl["teacher_binding"], "n": n}


def origin_study(bank: AdapterBank, seed: int, losses=("pg", "topk"), experiment: str = "ablations",
                 quick: bool = False, steps: int | None = None, **overrides) -> dict:
    """For each loss: the normal two-teacher student and the one whose binding teacher is OTHER."""
    out = {"initial_kl": initial_kl(bank, seed, n=16 if quick else 256), "runs": {}}
    for loss in losses:
        name, run = normal_student(bank, seed, loss, experiment, quick, steps, **overrides)
        out["runs"][name] = {"loss": loss, "origin": "same", "seed": seed, "curve": _curve(run)}
        name = f"foreign_{loss}_s{seed}"
        run = train_student(bank, student_config(name, seed, experiment, quick, steps, loss=loss,
                                                 teachers={"binding": OTHER}, **overrides))
        out["runs"][name] = {"loss": loss, "origin": "other", "seed": seed, "curve": _curve(run)}
    return out


# ---------------------------------------------------------------------------------------------
# 2. multi-round
# ---------------------------------------------------------------------------------------------


def multi_round(bank: AdapterBank, seed: int, experiment: str = "ablations", from_round1: bool = True,
                quick: bool = False, steps: int | None = None, teacher_steps: int | None = None, **overrides) -> dict:
    """Round-2 teachers by GRPO from a copy of the round-1 student (student_pg_s<seed>, from
    origin_study), then round-2 students from them: from the base (as stage 3 does) and, with
    `from_round1`, from a copy of the round-1 student."""
    round1, _ = normal_student(bank, seed, "pg", experiment, quick, steps, **overrides)  # reloaded if trained
    r2 = {d: f"r2_teacher_{d}_s{seed}" for d in ("binding", "recall")}
    out = {"round1_student": round1, "round2_teachers": r2, "runs": {}}
    for d, name in r2.items():
        run = train_teacher(bank, teacher_config(d, seed, experiment, quick, teacher_steps, init_from=round1, name=name))
        out["runs"][name] = {"curve": _curve(run)}
    starts = {f"r2_student_s{seed}": None} | ({f"r2_student_from_r1_s{seed}": round1} if from_round1 else {})
    for name, init in starts.items():
        run = train_student(bank, student_config(name, seed, experiment, quick, steps, teachers=r2, init_from=init,
                                                 **overrides))
        out["runs"][name] = {"init_from": init, "curve": _curve(run)}
    return out


def round1_control(bank: AdapterBank, seed: int, experiment: str = "ablations", quick: bool = False,
                   steps: int = 300, **overrides) -> dict:
    """The control multi_round lacks: a round-1 student (MOPD-PG from the base, the round-1
    teachers) trained for TWICE the steps, student_pg_long_s<seed>, as many distillation steps
    as the round-2 student started from the round-1 student has had in all."""
    name = f"student_pg_long_s{seed}"
    run = train_student(bank, student_config(name, seed, experiment, quick, 2 * steps, loss="pg", **overrides))
    return {"runs": {name: {"steps": run.config.get("steps"), "seed": seed, "curve": _curve(run)}}}


# ---------------------------------------------------------------------------------------------
# 3. UCMOPD
# ---------------------------------------------------------------------------------------------


def ucmopd_options() -> dict:
    """The options as the study runs them: the paper's Golden-Gain settings (m = 3, T = 1.5,
    top-p 0.9, no importance weight) and Teacher-Endorsement Filtering."""
    return {"golden_gain": GoldenGain(samples=3, temperature=1.5, top_p=0.9), "endorsement": Endorsement()}


def ucmopd_study(bank: AdapterBank, seed: int, experiment: str = "ablations", settings=("two", "preserve"),
                 quick: bool = False, steps: int | None = None, **overrides) -> dict:
    """UCMOPD vs plain MOPD (PG). "two": the course's two teachers (plain = student_pg_s<seed> of
    origin_study); "preserve": binding from its teacher, recall prompts routed to the stage-1 base."""
    out = {"runs": {}}
    for setting in settings:
        route = None if setting == "two" else {"recall": BASE}
        for method in ("mopd", "ucmopd"):
            if setting == "two" and method == "mopd":  # the normal run (reloaded if trained)
                name, run = normal_student(bank, seed, "pg", experiment, quick, steps, **overrides)
            else:
                name = f"{'uc' if setting == 'two' else 'keep'}_{method}_s{seed}"
                options = ucmopd_options() if method == "ucmopd" else {}
                run = train_student(bank, student_config(name, seed, experiment, quick, steps, teachers=route,
                                                         **options, **overrides))
            out["runs"][name] = {"setting": setting, "method": method, "seed": seed, "curve": _curve(run)}
    return out


SPECIALIST = "specialist_rb"
"""UCMOPD's own setting: Cascade RL recall -> binding (GRPO on binding from a copy of the recall
teacher), a binding specialist that forgets recall while specialising"""


SPECIALIST_STEPS = 300
"""its GRPO steps on binding (the baselines' Cascade RL second stage: the course's student budget)"""


def specialist(bank: AdapterBank, experiment: str = "ablations", quick: bool = False,
               steps: int = SPECIALIST_STEPS) -> str:
    """The specialist that forgot (seed 0, shared by every seed, as the teachers are): the second
    stage of the cascade recall -> binding, `steps` GRPO steps (the baselines' cascade budget)."""
    train_teacher(bank, teacher_config("binding", 0, experiment, quick, steps, init_from="teacher_recall",
                                       name=SPECIALIST, eval_domains=("recall",)))
    return SPECIALIST


def ucmopd_own(bank: AdapterBank, seed: int, experiment: str = "ablations", quick: bool = False,
               steps: int | None = None, **overrides) -> dict:
    """UCMOPD where its claim applies: every student starts from a copy of the specialist that
    forgot recall; binding prompts are scored by the specialist itself (keep the specialty), recall
    prompts by the recall teacher (the general capability to recover). Three students: plain MOPD
    (1 rollout per prompt), MOPD with UCMOPD's rollout budget (4x the prompts per domain: as many
    rollouts per step as UCMOPD's anchor + m = 3 explorations), and UCMOPD."""
    start = specialist(bank, experiment, quick)
    route = {"binding": start, "recall": "teacher_recall"}
    per_domain = MOPDConfig.for_model("tiny").prompts_per_domain
    arms = {"mopd": {}, "mopd_rollouts": {"prompts_per_domain": per_domain * (1 + ucmopd_options()["golden_gain"].samples)},
            "ucmopd": ucmopd_options()}
    out = {"specialist": start, "runs": {}}
    for method, options in arms.items():
        name = f"own_{method}_s{seed}"
        run = train_student(bank, student_config(name, seed, experiment, quick, steps, teachers=route, init_from=start,
                                                 **options, **overrides))
        out["runs"][name] = {"method": method, "seed": seed, "curve": _curve(run)}
    return out


# ---------------------------------------------------------------------------------------------
# the numbers the report and the notebook show, from evaluated tables and curves
# ---------------------------------------------------------------------------------------------


def _mean_sd(values):
    """(mean, sample std over seeds) of the values that are not None; (None, None) with none."""
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    m, sd = stats.mean_sd(values)
    return m, (None if math.isnan(sd) else sd)


def score(table: dict, adapter: str, domain: str) -> float:
    """Mean greedy accuracy of `adapter` over the domain's evaluated lengths."""
    by_len = table["acc"][adapter][domain]
    return sum(by_len.values()) / len(by_len)


def binding_curve(curve: list[dict]) -> list[tuple[int, float]]:
    """(step, mean binding accuracy over its evaluated lengths) at each evaluation of a run."""
    out = []
    for r in curve:
        accs = [v for k, v in r.items() if k.startswith("acc/binding/")]
        if accs:
            out.append((r["step"], sum(accs) / len(accs)))
    return out


def kl_window(curve: list[dict], key: str = "kl/binding", share: float = 0.1) -> tuple[float, float]:
    """Mean of `key` over the first and over the last `share` of the steps."""
    vals = [r[key] for r in curve if r.get(key) is not None]
    w = max(1, int(len(vals) * share))
    return sum(vals[:w]) / w, sum(vals[-w:]) / w


def origin_verdict(same_final: float, other_final: float, other_peak: float, kl_first: float, kl_last: float,
                   margin: float = 0.05) -> str:
    """"diverges" if the KL to the foreign teacher ends higher than it began; "degrades" if the
    foreign run ends more than `margin` below the same-origin run AND below its own peak by more
    than `margin`; else "neither". (The thresholds are ours; the paper gives none.)"""
    if kl_last > kl_first:
        return "diverges"
    if other_final < same_final - margin and other_final < other_peak - margin:
        return "degrades"
    return "neither"


def summarise(results: dict) -> dict:
    """Per-study numbers (mean and sample std over seeds, paired per-seed differences) from bench/ablations' results dict:
    {"table": evaluate table of every adapter (incl. "base"), "other_table": the other base's,
    "origin": {seed: origin_study}, "rounds": {seed: multi_round}, "ucmopd": {seed: ucmopd_study}}."""
    table, out = results["table"], {}
    base = {d: score(table, "base", d) for d in ("binding", "recall")}
    teacher = {d: score(table, f"teacher_{d}", d) for d in ("binding", "recall")}
    def norm(name, d):  # (model - base) / (round-1 teacher - base); nan without headroom
        den = teacher[d] - base[d]
        return (score(table, name, d) - base[d]) / den if abs(den) > 1e-9 else float("nan")
    out["base"], out["teachers"] = base, teacher
    if results.get("origin"):
        seeds = sorted(results["origin"], key=int)
        kl = [results["origin"][s]["initial_kl"] for s in seeds]
        other_t = score(results["other_table"], "teacher_binding", "binding")
        o = {"seeds": seeds, "other_teacher_binding": other_t,
             "other_base_binding": score(results["other_table"], "base", "binding"),
             "initial_kl": {k: _mean_sd([x[k] for x in kl]) for k in ("same_origin", "other_origin", "ratio")},
             "losses": {}}
        losses = sorted({r["loss"] for s in seeds for r in results["origin"][s]["runs"].values()})
        for loss in losses:
            row = {}
            for kind in ("same", "other"):
                names = [n for s in seeds for n, r in results["origin"][s]["runs"].items()
                         if r["loss"] == loss and r["origin"] == kind]
                curves = [results["origin"][s]["runs"][n]["curve"] for s in seeds for n in names
                          if n in results["origin"][s]["runs"]]
                firsts, lasts = zip(*[kl_window(c) for c in curves])
                peaks = [max(a for _, a in binding_curve(c)) for c in curves]
                row[kind] = {"binding": _mean_sd([score(table, n, "binding") for n in names]),
                             "recall": _mean_sd([score(table, n, "recall") for n in names]),
                             "kl_first": _mean_sd(firsts), "kl_last": _mean_sd(lasts), "peak": _mean_sd(peaks),
                             "step1_kl": _mean_sd([c[0]["kl/binding"] for c in curves]),
                             "per_seed_binding": [score(table, n, "binding") for n in names]}
            s, x = row["same"], row["other"]
            row["paired_binding"] = stats.paired(row["other"]["per_seed_binding"], row["same"]["per_seed_binding"])
            row["verdict"] = origin_verdict(s["binding"][0], x["binding"][0], x["peak"][0], x["kl_first"][0],
                                            x["kl_last"][0])
            o["losses"][loss] = row
        out["origin"] = o
    if results.get("rounds"):
        seeds = sorted(results["rounds"], key=int)
        r = {"seeds": seeds, "rows": {}}
        kinds = {"round-1 student": lambda s: [f"student_pg_s{s}"] * 2,
                 "round-2 teachers": lambda s: [f"r2_teacher_binding_s{s}", f"r2_teacher_recall_s{s}"],
                 "round-2 student (from base)": lambda s: [f"r2_student_s{s}"] * 2,
                 "round-2 student (from round-1 student)": lambda s: [f"r2_student_from_r1_s{s}"] * 2}
        for label, names_of in kinds.items():
            if not all(names_of(s)[0] in table["acc"] for s in seeds):
                continue
            per = {d: [norm(names_of(s)[i], d) for s in seeds] for i, d in enumerate(("binding", "recall"))}
            mean = [(b + c) / 2 for b, c in zip(per["binding"], per["recall"])]
            r["rows"][label] = {"binding": _mean_sd(per["binding"]), "recall": _mean_sd(per["recall"]),
                                "mean": _mean_sd(mean), "per_seed": mean}
        first = r["rows"].get("round-1 student")
        r["paired"] = {label: stats.paired(row["per_seed"], first["per_seed"]) for label, row in r["rows"].items()
                       if first is not None and label != "round-1 student"}
        if results.get("control"):
            cseeds = [s for s in seeds if s in results["control"]]
            names = {s: f"student_pg_long_s{s}" for s in cseeds if f"student_pg_long_s{s}" in table["acc"]}
            if names:
                per = {d: [norm(names[s], d) for s in names] for d in ("binding", "recall")}
                mean = [(b + c) / 2 for b, c in zip(per["binding"], per["recall"])]
                r["rows"]["round-1 student, twice the steps (control)"] = {
                    "binding": _mean_sd(per["binding"]), "recall": _mean_sd(per["recall"]), "mean": _mean_sd(mean),
                    "per_seed": mean}
                by_seed = dict(zip(names, mean))
                def seeded(label):  # {seed: per-seed mean} of a row, on the control's seeds
                    row = r["rows"].get(label)
                    return {} if row is None else {s: v for s, v in zip(seeds, row["per_seed"]) if s in by_seed}
                r["control"] = {
                    "from_round1_minus_control": stats.paired(seeded("round-2 student (from round-1 student)"), by_seed),
                    "control_minus_round1": stats.paired(by_seed, seeded("round-1 student"))}
        r["paper"] = {"round-2 teachers": 1.030, "round-2 student (from base)": 0.986}
        out["rounds"] = r
    if results.get("ucmopd"):
        seeds = sorted(results["ucmopd"], key=int)
        u = {"seeds": seeds, "settings": {}, "paired": {}}
        for setting in ("two", "preserve"):
            rows = {}
            for method in ("mopd", "ucmopd"):
                runs = [(n, r) for s in seeds for n, r in results["ucmopd"][s]["runs"].items()
                        if r["setting"] == setting and r["method"] == method]
                if not runs:
                    continue
                names = [n for n, _ in runs]
                cell = {d: _mean_sd([score(table, n, d) for n in names]) for d in ("binding", "recall")}
                cell["normalised"] = {d: _mean_sd([norm(n, d) for n in names]) for d in ("binding", "recall")}
                cell["binding_gained"] = _mean_sd([score(table, n, "binding") - base["binding"] for n in names])
                cell["recall_kept"] = _mean_sd([score(table, n, "recall") - base["recall"] for n in names])
                for key in ("gg_kept", "tef_masked"):
                    for d in ("binding", "recall"):
                        vals = [sum(row[f"{key}/{d}"] for row in c) / len(c) for _, r in runs
                                if (c := r.get("curve")) and f"{key}/{d}" in c[0]]
                        cell[f"{key}/{d}"] = _mean_sd(vals)
                cell["per_seed"] = {r["seed"]: (norm(n, "binding") + norm(n, "recall")) / 2 for n, r in runs}
                rows[method] = cell
            if "mopd" in rows and "ucmopd" in rows:
                u["paired"][setting] = stats.paired(rows["ucmopd"]["per_seed"], rows["mopd"]["per_seed"])
            if rows:
                u["settings"][setting] = rows
        out["ucmopd"] = u
    if results.get("ucmopd_own"):
        seeds = sorted(results["ucmopd_own"], key=int)
        own = {"seeds": seeds, "specialist": {d: score(table, SPECIALIST, d) for d in ("binding", "recall")}
               if SPECIALIST in table["acc"] else None, "rows": {}, "per_seed": {}}
        for method in ("mopd", "mopd_rollouts", "ucmopd"):
            names = {s: f"own_{method}_s{s}" for s in seeds if f"own_{method}_s{s}" in table["acc"]}
            if not names:
                continue
            per = {s: {d: score(table, n, d) for d in ("binding", "recall")} for s, n in names.items()}
            own["rows"][method] = {"binding": _mean_sd([v["binding"] for v in per.values()]),
                                   "recall": _mean_sd([v["recall"] for v in per.values()]),
                                   "recall_normalised": _mean_sd([norm(n, "recall") for n in names.values()]),
                                   "mean_normalised": _mean_sd([(norm(n, "binding") + norm(n, "recall")) / 2
                                                                for n in names.values()])}
            own["per_seed"][method] = per
        ps = own["per_seed"]
        if "ucmopd" in ps:
            own["paired"] = {f"ucmopd minus {ref}": {d: stats.paired({s: v[d] for s, v in ps["ucmopd"].items()},
                                                                     {s: v[d] for s, v in ps[ref].items()})
                                                     for d in ("binding", "recall")}
                             for ref in ("mopd_rollouts", "mopd") if ref in ps}
        out["ucmopd_own"] = own
    return out
