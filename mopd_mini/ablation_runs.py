"""Three studies that question MOPD, as plain functions (studies/ablations.py runs them for 3 seeds
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

Every run goes through `train_grpo` / `train_student` with the tiny preset; names carry the
seed, so one bank holds every seed's runs, and runs/<experiment>/ reloads finished ones.

`summary(results)` gives the numbers notebook 06 prints and the figures draw (`mean_accuracy`,
`round1_normalised`, mean and sample std over seeds); what only the 3-seed study runs (its own
arms: the round-1 control and UCMOPD's own setting; the origin verdicts; the paired per-seed
intervals) lives in studies/ablations.py.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from . import stats
from . import routing
from .adapters import BASE, AdapterBank
from .config import Endorsement, GoldenGain, GRPOConfig, MOPDConfig
from .distill import train_student
from .domains import get_domains
from .grpo import train_grpo
from .models import TINY, TINY_OTHER, load_base
from .rollout import sample
from .runs import experiment_name, fast_or

OTHER = "teacher_binding_other"  # the foreign binding teacher's name in the course bank
OTHER_TEACHER = {"steps": 400, "lr": 2e-3}
"""The other base's binding teacher: GRPO with the binding recipe studies/teacher_headroom.py chose
on validation (docs/teachers.md: 400 steps at lr 2e-3, against the course preset's 200 at 1e-3), meant
to make it stronger than the course's own binding teacher, as the paper's foreign teacher was (one
seed of each teacher in docs/ablations.md: higher there, not shown stronger by any interval). The course's teachers keep the preset."""
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
    runs = {f"teacher_{d}": train_grpo(bank, teacher_config(d, 0, experiment, quick)) for d in ("binding", "recall")}
    if other is not None:
        runs[OTHER] = train_grpo(other, teacher_config("binding", 0, f"{experiment}/{OTHER_EXPERIMENT}", quick,
                                                       **OTHER_TEACHER))
        bank.add_foreign(OTHER, other, "teacher_binding", allow_foreign=True)
    return runs


def normal_student(bank: AdapterBank, seed: int, loss: str = "pg", experiment: str = "ablations",
                   quick: bool = False, steps: int | None = None, **overrides):
    """The normal two-teacher student student_<loss>_s<seed> (trained, or reloaded): the origin
    study's reference, the round-1 student of multi_round, plain MOPD in ucmopd_study."""
    name = f"student_{loss}_s{seed}"
    return name, train_student(bank, student_config(name, seed, experiment, quick, steps, loss=loss, **overrides))


def logged_curve(run) -> list[dict]:
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
        out["runs"][name] = {"loss": loss, "origin": "same", "seed": seed, "curve": logged_curve(run)}
        name = f"foreign_{loss}_s{seed}"
        run = train_student(bank, student_config(name, seed, experiment, quick, steps, loss=loss,
                                                 teachers={"binding": OTHER}, **overrides))
        out["runs"][name] = {"loss": loss, "origin": "other", "seed": seed, "curve": logged_curve(run)}
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
        run = train_grpo(bank, teacher_config(d, seed, experiment, quick, teacher_steps, init_from=round1, name=name))
        out["runs"][name] = {"curve": logged_curve(run)}
    starts = {f"r2_student_s{seed}": None} | ({f"r2_student_from_r1_s{seed}": round1} if from_round1 else {})
    for name, init in starts.items():
        run = train_student(bank, student_config(name, seed, experiment, quick, steps, teachers=r2, init_from=init,
                                                 **overrides))
        out["runs"][name] = {"init_from": init, "curve": logged_curve(run)}
    return out


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
            out["runs"][name] = {"setting": setting, "method": method, "seed": seed, "curve": logged_curve(run)}
    return out


# ---------------------------------------------------------------------------------------------
# the numbers the report and the notebook show, from evaluated tables and curves
# ---------------------------------------------------------------------------------------------




def mean_accuracy(table: dict, adapter: str, domain: str) -> float:
    """Mean greedy accuracy of `adapter` over the domain's evaluated lengths, summed in order (the
    sum the ablations' pages were computed with; `evaluation.domain_score` sums with fsum, and
    the two can differ in the last bit)."""
    by_len = table["acc"][adapter][domain]
    return sum(by_len.values()) / len(by_len)


def round1_normalised(table: dict, name: str, domain: str) -> float:
    """(model - base) / (round-1 teacher - base) on the domain's mean accuracy; nan without headroom."""
    base, teacher = (mean_accuracy(table, a, domain) for a in ("base", f"teacher_{domain}"))
    den = teacher - base
    return (mean_accuracy(table, name, domain) - base) / den if abs(den) > 1e-9 else float("nan")


def kl_window(curve: list[dict], key: str = "kl/binding", share: float = 0.1) -> tuple[float, float]:
    """Mean of `key` over the first and over the last `share` of the steps."""
    vals = [r[key] for r in curve if r.get(key) is not None]
    w = max(1, int(len(vals) * share))
    return sum(vals[:w]) / w, sum(vals[-w:]) / w


ROUND_ROWS = {"round-1 student": lambda s: [f"student_pg_s{s}"] * 2,
              "round-2 teachers": lambda s: [f"r2_teacher_binding_s{s}", f"r2_teacher_recall_s{s}"],
              "round-2 student (from base)": lambda s: [f"r2_student_s{s}"] * 2,
              "round-2 student (from round-1 student)": lambda s: [f"r2_student_from_r1_s{s}"] * 2}
"""multi_round's rows: {label: seed -> (its binding adapter, its recall adapter)}"""
PAPER_ROUNDS = {"round-2 teachers": 1.030, "round-2 student (from base)": 0.986}
"""the paper's Table 4, normalised against the round-1 teachers"""


def summary(results: dict) -> dict:
    """The numbers notebook 06 prints and `views.rounds` / `views.ucmopd` draw, from
    {"table": evaluate table of every adapter (incl. "base"), "rounds": {seed: multi_round},
    "ucmopd": {seed: ucmopd_study}} (either study may be absent): the base's and the round-1
    teachers' accuracies, and per study the mean and sample std over seeds of each row (with its
    per-seed values)."""
    table = results["table"]
    out = {"base": {d: mean_accuracy(table, "base", d) for d in ("binding", "recall")},
           "teachers": {d: mean_accuracy(table, f"teacher_{d}", d) for d in ("binding", "recall")}}
    if results.get("rounds"):
        seeds = sorted(results["rounds"], key=int)
        r = {"seeds": seeds, "rows": {}}
        for label, names_of in ROUND_ROWS.items():
            if not all(names_of(s)[0] in table["acc"] for s in seeds):
                continue
            per = {d: [round1_normalised(table, names_of(s)[i], d) for s in seeds]
                   for i, d in enumerate(("binding", "recall"))}
            mean = [(b + c) / 2 for b, c in zip(per["binding"], per["recall"])]
            r["rows"][label] = {"binding": stats.mean_sd_or_none(per["binding"]),
                                "recall": stats.mean_sd_or_none(per["recall"]),
                                "mean": stats.mean_sd_or_none(mean), "per_seed": mean}
        r["paper"] = dict(PAPER_ROUNDS)
        out["rounds"] = r
    if results.get("ucmopd"):
        seeds = sorted(results["ucmopd"], key=int)
        u = {"seeds": seeds, "settings": {}}
        for setting in ("two", "preserve"):
            rows = {}
            for method in ("mopd", "ucmopd"):
                runs = [(n, r) for s in seeds for n, r in results["ucmopd"][s]["runs"].items()
                        if r["setting"] == setting and r["method"] == method]
                if runs:
                    rows[method] = _ucmopd_cell(table, runs, out["base"])
            if rows:
                u["settings"][setting] = rows
        out["ucmopd"] = u
    return out


def _ucmopd_cell(table: dict, runs: list, base: dict) -> dict:
    """One (setting, method) of ucmopd_study over its seeds' runs [(name, run), ...]."""
    names = [n for n, _ in runs]
    ms = stats.mean_sd_or_none
    cell = {d: ms([mean_accuracy(table, n, d) for n in names]) for d in ("binding", "recall")}
    cell["normalised"] = {d: ms([round1_normalised(table, n, d) for n in names]) for d in ("binding", "recall")}
    cell["binding_gained"] = ms([mean_accuracy(table, n, "binding") - base["binding"] for n in names])
    cell["recall_kept"] = ms([mean_accuracy(table, n, "recall") - base["recall"] for n in names])
    for key in ("gg_kept", "tef_masked"):
        for d in ("binding", "recall"):
            vals = [sum(row[f"{key}/{d}"] for row in c) / len(c) for _, r in runs
                    if (c := r.get("curve")) and f"{key}/{d}" in c[0]]
            cell[f"{key}/{d}"] = ms(vals)
    cell["per_seed"] = {r["seed"]: (round1_normalised(table, n, "binding") + round1_normalised(table, n, "recall")) / 2
                        for n, r in runs}
    return cell


# every public function (and class method) of this module: its annotated arguments checked at a call from outside
# the package (mopd_mini.validate.guard_public); the package's own calls, e.g. the training loop's, skip the checks
from .validate import guard_public  # noqa: E402

guard_public(globals())
