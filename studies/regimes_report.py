"""The regime study's records and statistics: docs/regimes.json's store and keys (`Store`,
`Context`: what makes a record this very method's), an arm's records by method and seed
(`ArmReport`), the registered decision rules applied to them (`decisions`, `decisions_cures`,
`stuck_predicts`) and what the figures and notebook 07 draw (`view`, `stuck_view`). No training.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean

import mopd_mini as mm
from mopd_mini import cost, runs, stats
from mopd_mini.domains import get_domains

from . import study
from .cures import CURES
from .regimes_arms import Arm, CHOICE_KEY, EXPERIMENT, methods_for, QUICK, Recipe, signature

# ---------------------------------------------------------------------------------------------
# the results file: docs/regimes.json, written under a lock by every worker
# ---------------------------------------------------------------------------------------------


SECTIONS = ("runs", "gates", "merges", "invocations", "measurements", "choices")


class Store(study.Store):
    """docs/regimes.json: {"runs": {"<arm>|<method>|<seed>": record}, "gates": {arm: ...}, "merges",
    "invocations", "measurements", "choices"}, studies/study.py's store under this study's lock."""

    def __init__(self, path: Path):
        super().__init__(path, lock_path, SECTIONS)

    def record(self, ctx: "Context", key: str, seed: int) -> dict | None:
        """The recorded result of (arm, method, seed), if it was made by this very method."""
        r = self.read()["runs"].get(key_of(ctx.arm.number, key, seed))
        return r if r is not None and r.get("signature") == ctx.signature(key) else None


def lock_path() -> Path:
    """The lock every process of a run takes to write the JSON or claim a job (beside the runs, out of docs/)."""
    runs.RUNS_DIR.mkdir(parents=True, exist_ok=True)
    return runs.RUNS_DIR / f"{EXPERIMENT}.lock"


def key_of(arm: int, method: str, seed: int) -> str:
    return f"{arm}|{method}|{seed}"


# ---------------------------------------------------------------------------------------------
# one job: a method at one seed (its teachers reloaded, or retrained when missing), evaluated
# ---------------------------------------------------------------------------------------------


@dataclass
class Context:
    arm: Arm
    methods: dict
    quick: bool
    store: Store
    progress: bool = False

    def experiment(self, seed: int) -> str:
        return f"{EXPERIMENT}{'-quick' if self.quick else ''}/arm{self.arm.number}/s{seed}"

    def settings(self, m: Recipe) -> dict:
        s = dict(m.settings)
        if self.quick:
            s.update({k: v for k, v in QUICK.items() if k in s})
            if "steps" in s and m.adapter:   # a fall-back keeps a distinct (longer) budget
                s["steps"] += 1
        return s

    def signature(self, key: str) -> str:
        return signature(self.methods, key, self.settings)

    def adapter_saved(self, m: Recipe, seed: int) -> bool:
        folder = runs.RUNS_DIR / self.experiment(seed) / m.name
        return (folder / "adapter_model.safetensors").exists() and (folder / "checkpoint.pt").exists()


def with_setting(m: Recipe, setting: dict) -> Recipe:
    """`m` at one setting of its grid, as its own adapter (`mopd_kl_lr1em03`)."""
    tags = "_".join(f"{k}{study.tag(v)}" for k, v in sorted(setting.items()))
    return dataclasses.replace(m, settings={**m.settings, **setting}, adapter=f"{m.key}_{tags}")


def arm_records(data: dict, arm: Arm) -> dict[str, dict]:
    """Every record of the arm in the store, {section|key: record} (the inputs' makers and readers)."""
    return {f"{sec}|{k}": r for sec in ("choices", "runs") for k, r in data[sec].items()
            if isinstance(r, dict) and r.get("arm") == arm.number}


def arm_methods(arm: Arm, data: dict, tried: int = 0, fallback: bool = False) -> dict[str, Recipe]:
    """The arm's methods as they run: after its gate's retries (methods_for), or at the settings
    its val choice recorded in `data` (the JSON; an arm with grids, none recorded: as declared)."""
    if not arm.grids:
        return methods_for(arm, tried, fallback)
    chosen = data.get("choices", {}).get(str(arm.number), {}).get("chosen", {})
    return {m.key: with_setting(m, chosen[m.key]) if m.key in chosen else m for m in arm.methods}


def gate_every_seed_values(data: dict, arm: Arm) -> dict:
    """{seed: {length: value}} of the arm's gate read on every seed (arm.gate_every_seed): the gate
    method's recorded val score at each compared length (the strict trace on chain, else accuracy)."""
    g = arm.gate_every_seed
    key = "strict" if g.domain in CHOICE_KEY else "acc"
    return {rec["seed"]: {L: acc(rec, g.domain, (L,), key, "val") for L in g.lengths}
            for rec in data["runs"].values() if rec["arm"] == arm.number and rec["method"] == g.method and "val" in rec}


def gate_value(rec: dict, gate: study.Gate) -> float:
    return fmean(r["acc"] for r in rec["val"] if r["domain"] == gate.domain and r["length"] in gate.lengths)


# ---------------------------------------------------------------------------------------------
# the report: tables, decisions, figures (a function of the JSON)
# ---------------------------------------------------------------------------------------------


def held(arm: Arm) -> dict[str, dict[str, tuple]]:
    out = {}
    for d, dom in get_domains(arm.domains).items():
        out[d] = {"held-in": tuple(L for L in dom.eval_lengths if L in dom.train_lengths),
                  "held-out": dom.held_out, "all": dom.eval_lengths}
    return out


def acc(rec: dict, domain: str, lengths, key: str = "acc", split: str = "test") -> float:
    vals = [r[key] for r in rec[split] if r["domain"] == domain and r["length"] in lengths and key in r]
    return fmean(vals) if vals else float("nan")


REGISTERED = (0, 1, 2)   # the seeds every decision of the page is registered on; more seeds are a check beside it


class ArmReport:
    """The arm's records by method and seed, and every statistic the page prints."""

    def __init__(self, data: dict, arm: Arm, seeds: tuple | None = REGISTERED):
        """`seeds`: the records read (the registered 3 by default; None: every seed recorded)."""
        self.arm, self.data = arm, data
        self.gate = data["gates"].get(str(arm.number))
        tried = 0 if self.gate is None else len(self.gate["tries"]) - 1
        self.methods = arm_methods(arm, data, tried, bool(self.gate and self.gate.get("fallback")))
        ctx = Context(arm, self.methods, data.get("quick", False), None)
        self.runs, self.failed = {}, {}
        for rec in data["runs"].values():
            if seeds is not None and rec["seed"] not in seeds:
                continue
            if rec["arm"] == arm.number and rec["method"] in self.methods and rec["signature"] == ctx.signature(rec["method"]):
                into = self.failed if "failed" in rec else self.runs
                into.setdefault(rec["method"], {})[rec["seed"]] = rec
        self.held = held(arm)
        self.seeds = sorted({s for per in self.runs.values() for s in per})

    def per_seed(self, method: str, domain: str, lengths, key: str = "acc") -> dict:
        return {s: acc(r, domain, lengths, key) for s, r in self.runs.get(method, {}).items()}

    def lora_n(self, method: str) -> int:
        """The trained adapter's parameter count of `method` (a merge or the base: any run's, for FLOPs)."""
        first = next(iter(self.runs[method].values()))
        return first["n"] or next((r["n"] for p in self.runs.values() for r in p.values() if r["n"]), 0)

    def lift(self, method: str, domain: str, lengths) -> dict:
        base = self.per_seed("base", domain, lengths)
        b = next(iter(base.values()), float("nan"))   # greedy: the base is the same at every seed
        return {s: v - base.get(s, b) for s, v in self.per_seed(method, domain, lengths).items()}

    def normalised(self, method: str, domain: str, lengths) -> dict | None:
        lift, teacher = self.lift(method, domain, lengths), self.lift(self.arm.teacher_of[domain], domain, lengths)
        if not teacher or any(teacher.get(s, 0) <= 0.10 for s in lift):
            return None
        return {s: v / teacher[s] for s, v in lift.items() if s in teacher}

    def pipeline(self, method: str, seed: int) -> dict:
        rec = self.runs.get(method, {}).get(seed)
        if rec is None:
            return {}
        return cost.add(rec["cost"], *(self.pipeline(n, seed) for n in rec["needs"]))

    def costs(self, method: str, seed: int) -> tuple[dict, dict]:
        """The method's stage and pipeline at `seed` (what it needs, with what they need), each with
        its FLOPs (`cost.method_costs`, at the N of the method's first record and its `lora_n`)."""
        rec, first = self.runs[method][seed], next(iter(self.runs[method].values()))
        return cost.method_costs(rec["cost"], [self.pipeline(n, seed) for n in rec["needs"]], first["N"],
                                 self.lora_n(method))


def ms(values) -> str:
    """'mean ± sample std' over seeds, 3 digits (study.cell), '-' with no value."""
    vals = list(values.values()) if isinstance(values, dict) else list(values)
    return "-" if math.isnan(stats.mean_sd(vals)[0]) else study.cell(vals, digits=3)


decide = study.decide   # the registered rule's verb (the runner's), as the tests call it


def holm_of(tests: dict) -> dict:
    """{name: Holm-adjusted p} of a family {name: (stats.paired, the rule's threshold)}: the
    runner's `family`, each p-value the paired t-test against the threshold the rule reads."""
    fam = study.family({k: t[0] for k, t in tests.items()}, nulls={k: t[1] for k, t in tests.items()})
    return {k: v["p_holm"] for k, v in fam.items()}


def decide_holm(p: dict, above: float | None = None, below: float | None = None, p_adj: float | None = None,
                alpha: float | None = None) -> str:
    """`decide` with the Holm-adjusted p put inside the verdict's own parenthesis: "supported (the interval
    at Holm's level (98.33%): a to b; p (Holm) 0.004)", "not resolved: the interval at Holm's level ...
    (uncorrected 95% interval: ...; p (Holm) 0.988)"."""
    v = decide(p, above=above, below=below, p_adj=p_adj, alpha=alpha)
    if p_adj is None or math.isnan(p_adj) or "(p (Holm) " in v:
        return v
    tag = f"p (Holm) {p_adj:.3f}"
    return v[:-1] + f"; {tag})" if v.endswith(")") else f"{v} ({tag})"


def holm_levels_of(tests: dict) -> dict:
    """{name: the level at which Holm's step-down tests it} of the same family as `holm_of` (the
    interval at that level excludes the rule's threshold exactly when the adjusted p is below 0.05)."""
    fam = study.family({k: t[0] for k, t in tests.items()}, nulls={k: t[1] for k, t in tests.items()})
    return {k: v["alpha_holm"] for k, v in fam.items()}


FAMILY_NOTE = ("Multiplicity (amendment, 2026-12-03): the arm's family is its primary comparisons, the rows named "
               "H<k> without brackets ({names}); each decision reads Holm's correction over them (the paired t-test "
               "against the rule's threshold), shown as p (Holm); a bracketed row is reported or descriptive, outside "
               "the family. No equivalence margin was registered: nothing is called equal.")


interval = study.interval


def comparison(rep: ArmReport, a: str, b: str | float, domain: str, lengths) -> dict:
    va = rep.per_seed(a, domain, lengths)
    vb = {s: b for s in va} if isinstance(b, float) else rep.per_seed(b, domain, lengths)
    return stats.paired(va, vb)


def primary_arm2(rep: ArmReport) -> dict:
    """Arm 2's family: {hypothesis: (its paired comparison, the threshold its rule reads)}."""
    k, o = ({L: rep.per_seed(x, "chain", (L,)) for L in (2, 3, 4)} for x in ("mopd_kl", "sft_traces"))
    growth = {s: (k[4][s] - o[4][s]) - ((k[2][s] - o[2][s]) + (k[3][s] - o[3][s])) / 2 for s in k[2] if s in o[2]}
    return {"H2.1": (comparison(rep, "grpo", 0.30, "chain", (2, 3)), 0.0),
            "H2.2": (comparison(rep, "mopd_kl", "sft_teacher", "chain", (2, 3)), -0.05),
            "H2.3": (stats.paired(growth, {s: 0.0 for s in growth}), 0.0)}


def decisions_arm2(rep: ArmReport) -> tuple[list[str], dict]:
    hin, h4, h5 = (2, 3), (4,), (5,)
    rows, out = study.DecisionRows(), {}
    row = rows.add

    gate_ok = bool(rep.gate and rep.gate["passed"])
    adj, lv = holm_of(primary_arm2(rep)), holm_levels_of(primary_arm2(rep))
    out["family"] = {h: a for h, a in adj.items()}
    p = comparison(rep, "grpo", 0.30, "chain", hin)
    out["H2.1"] = row("H2.1 GRPO at depths 2, 3 minus 0.30", p, "supported iff below 0; refuted iff above 0",
                      decide_holm(p, below=0.0, p_adj=adj["H2.1"], alpha=lv["H2.1"]))
    for loss in ("kl", "pg", "topk"):
        for lengths, where in ((hin, "depths 2, 3"), (h4, "depth 4")):
            p = comparison(rep, f"mopd_{loss}", "sft_teacher", "chain", lengths)
            primary = loss == "kl" and lengths == hin
            name = f"{'H2.2' if primary else '(H2.2, reported)'} MOPD {loss} minus the SFT teacher, {where}"
            v = (decide_holm(p, above=-0.05, p_adj=adj["H2.2"] if primary else None,
                             alpha=lv["H2.2"] if primary else None)
                 if gate_ok else "not tested (gate G2 failed)")
            if not primary and lengths == h4 and gate_ok:   # the teacher is at 0.00 there: no reach to test
                v = f"descriptive (by the rule: {v}; the teacher scores about 0.00 at depth 4, so this compares near-zero accuracies)"
            v = row(name, p, "supported iff above -0.05; refuted iff below -0.05", v)
            if primary:
                out["H2.2"] = v
    for other, label in (("sft_traces", "SFT on the teacher's traces"), ("rft", "RFT"), ("sft_gold", "SFT on gold")):
        for deep, where in ((h4, "depth 4"), (h5, "depth 5 (shortcut)")):
            k, o = ({L: rep.per_seed(x, "chain", (L,)) for L in (2, 3, deep[0])} for x in ("mopd_kl", other))
            lead = {s: {L: k[L][s] - o[L][s] for L in k} for s in k[2] if s in o[2]}
            growth = {s: v[deep[0]] - (v[2] + v[3]) / 2 for s, v in lead.items()}
            p = stats.paired(growth, {s: 0.0 for s in growth})
            primary = other == "sft_traces" and deep == h4
            name = f"{'H2.3' if primary else '(H2.3, descriptive)'} growth of MOPD kl's lead over {label}, {where}"
            v = (decide_holm(p, above=0.0, p_adj=adj["H2.3"] if primary else None,
                             alpha=lv["H2.3"] if primary else None)
                 if gate_ok else "not tested (gate G2 failed)")
            if not primary and gate_ok:
                v = f"descriptive ({decide(p, above=0.0)} by H2.3's rule)"
            v = row(name, p, "supported iff above 0; refuted iff below 0" if primary else "H2.3's rule", v)
            if primary:
                out["H2.3"] = v
    return rows, out


def decisions(rep: ArmReport) -> tuple[list[str], dict]:
    """The arm's registered comparisons: (the table's rows, {hypothesis: decision})."""
    if rep.arm.grids:
        return decisions_cures(rep)
    return (decisions_arm2 if rep.arm.number == 2 else decisions_arm1)(rep)


def decisions_arm1(rep: ArmReport) -> tuple[list[str], dict]:
    rows, out = study.DecisionRows(), {}
    row = rows.add
    partner = "sft_both" if rep.gate and rep.gate.get("fallback") else "mixrl"
    allL = {d: rep.held[d]["all"] for d in rep.arm.domains}

    shown = []
    fam = {f"H1.1 {d}": (comparison(rep, partner, rep.arm.teacher_of[d], d, rep.held[d]["all"]), 0.0)
           for d in rep.arm.domains}
    pre = [d for d in rep.arm.domains if fam[f"H1.1 {d}"][0]["n"] >= 2 and fam[f"H1.1 {d}"][0]["diff"] <= -0.10
           and fam[f"H1.1 {d}"][0]["hi"] < 0]
    for d in pre:   # the conditional comparisons join the family where H1.1's interval is shown uncorrected
        fam[f"H1.2 {d}"] = (comparison(rep, "mopd_kl", "mixrl", d, allL[d]), 0.0)
        fam[f"H1.3 {d}"] = (comparison(rep, "rft", "mixrl", d, allL[d]), 0.0)
    adj, lv = holm_of(fam), holm_levels_of(fam)
    out["family"] = adj

    def holm_txt(key: str, p: dict) -> str:   # p (Holm) with the interval at Holm's level (stats.holm_levels)
        if key not in adj or math.isnan(adj[key]):
            return ""
        return f" (p (Holm) {adj[key]:.3f}; {stats.holm_interval_text(p, lv[key])})"

    def other_side(v: str, p: dict, q: dict, d: str, o: str) -> str:
        """H1.2's rule is not met on either side when p is above 0 and q, on the other domain, below 0: say so."""
        if p["n"] >= 2 and p["lo"] > 0 and q["n"] >= 2 and q["hi"] < 0:
            return (f"not resolved: above 0 on {d}, but below 0 on {o} ({interval(q)}, uncorrected), which the "
                    "rule's \"not below 0 on the other\" excludes; nor is it below 0, so not refuted")
        return v

    for d in rep.arm.domains:
        for part in ("all", "held-in", "held-out"):
            p = comparison(rep, partner, rep.arm.teacher_of[d], d, rep.held[d][part])
            if part == "all":
                a = adj[f"H1.1 {d}"]
                raw = p["n"] >= 2 and p["diff"] <= -0.10 and p["hi"] < 0
                ok = raw and a < 0.05
                v = ("shown on this domain" if ok else "not shown on this domain"
                     + (" after Holm (uncorrected: shown)" if raw and not ok else "")) + holm_txt(f"H1.1 {d}", p)
                if ok:
                    shown.append(d)
                row(f"H1.1 D_{d} = {partner} minus teacher_{d} ({d}, all lengths)", p,
                    "shown iff mean <= -0.10 and the interval below 0", v)
            else:
                row(f"(H1.1, reported) D_{d}, {part}", p, "descriptive", "descriptive")
        for other in (["mixrl"] if partner != "mixrl" else []) + ["mixrl_300"]:
            p = comparison(rep, other, rep.arm.teacher_of[d], d, rep.held[d]["all"])
            row(f"(H1.1, beside it) {rep.methods[other].label} ({rep.methods[other].settings['steps']} steps) minus "
                f"teacher_{d} ({d}, all lengths)", p, "descriptive", "descriptive")
    out["H1.1"] = f"shown (on {', '.join(shown)})" if shown else "not shown"
    for d in shown:
        o = [x for x in rep.arm.domains if x != d][0]
        for loss in ("kl", "pg", "topk"):
            p, q = comparison(rep, f"mopd_{loss}", "mixrl", d, allL[d]), comparison(rep, f"mopd_{loss}", "mixrl", o, allL[o])
            v = "not resolved (fewer than 2 seeds)" if p["n"] < 2 else "supported" if p["lo"] > 0 and not q["hi"] < 0 \
                else "refuted" if p["hi"] < 0 else "not resolved" + (f" ({p['n']} seeds finished)" if p["n"] < 3 else "")
            v = other_side(v, p, q, d, o)
            if loss == "kl" and v in ("supported", "refuted") and not adj.get(f"H1.2 {d}", 0) < 0.05:
                v = f"not resolved after Holm (uncorrected: {v})"
            if loss == "kl":
                v += holm_txt(f"H1.2 {d}", p)
            row(f"{'H1.2' if loss == 'kl' else '(H1.2 rule)'} MOPD {loss} minus Mix-RL on {d} (on {o}: {interval(q)})", p,
                "supported iff above 0 and not below 0 on the other; refuted iff below 0", v)
            if loss == "kl":
                out["H1.2"] = v
        p, q = comparison(rep, "rft", "mixrl", d, allL[d]), comparison(rep, "rft", "mixrl", o, allL[o])
        v = "not tested (RFT did not finish)" if p["n"] == 0 else "not resolved (fewer than 2 seeds)" if p["n"] < 2 else \
            "supported" if p["lo"] > 0 and not q["hi"] < 0 else "refuted" if p["hi"] < 0 else "not resolved"
        v = other_side(v, p, q, d, o)
        if v in ("supported", "refuted") and not adj.get(f"H1.3 {d}", 0) < 0.05:
            v = f"not resolved after Holm (uncorrected: {v})"
        v += holm_txt(f"H1.3 {d}", p)
        out["H1.3"] = row(f"H1.3 RFT minus Mix-RL on {d} (on {o}: {interval(q)})", p, "H1.2's rule", v)
        p = comparison(rep, "mopd_kl", "rft", d, allL[d])
        row(f"(H1.3) MOPD kl minus RFT on {d}", p, "registered: \"interval includes 0: the simple method did as "
            "well\"; amended 2026-12-03: an interval that includes 0 is not resolved (no equivalence margin was "
            "registered)", stats.reading(p) if p["n"] >= 2 else "not resolved (fewer than 2 seeds)")
    if not shown:
        out["H1.2"] = out["H1.3"] = "not tested (H1.1 not shown)"
    for mg in ("merge_linear", "merge_cat"):
        for d in rep.arm.domains:
            for ref in (rep.arm.teacher_of[d], "mixrl"):
                row(f"{mg} minus {ref} on {d}", comparison(rep, mg, ref, d, allL[d]), "descriptive", "descriptive")
    return rows, out


# ---------------------------------------------------------------------------------------------
# arms 2b and memory-cures, as registered in their amendment (docs/regimes.md, 2026-12-03)
# ---------------------------------------------------------------------------------------------

CURE_KEYS = tuple(k for k, _, _ in CURES)
MEASURES = {"chain": ("strict", "trace", "acc"), "memory": ("acc", "copy")}
"""each domain's per-seed measures: chain's strict trace (primary), prefix trace and final answer"""
MEASURE_NAMES = {"strict": "strict trace", "trace": "prefix trace", "acc": "accuracy", "copy": "copy", "words": "words"}


def metric(arm: Arm) -> str:
    """The metric an arm's decisions read: the strict trace on chain (CHOICE_KEY), else accuracy."""
    return CHOICE_KEY.get(arm.domains[0], "acc")


def gate_passing(data: dict, arm: Arm) -> tuple[dict, list]:
    """({seed: {length: value}} of the gate read on every seed, the seeds that pass it)."""
    values = gate_every_seed_values(data, arm)
    return values, [s for s, ok in study.gate_by_seed(values, arm.gate_every_seed.threshold).items() if ok]


def tested(data: dict, arm: Arm) -> ArmReport:
    """An arm with a gate on every seed: its records at the registered seeds that pass the gate."""
    _, passing = gate_passing(data, arm)
    return ArmReport(data, arm, seeds=tuple(s for s in arm.seeds if s in passing))


def cure_rows(rep: ArmReport, d: str) -> dict:
    """Arm 2b / memory-cures' family: {hypothesis: (paired comparison, threshold 0)}; H2b.3 on chain."""
    key, L = metric(rep.arm), rep.arm.compared
    fam = {f"H2b.1 {c}": (comparison_on(rep, c, "mopd_kl", d, L, key), 0.0) for c in CURE_KEYS}
    if d == "chain":
        g = growth(rep, "mopd_kl", "sft_traces", d)
        fam["H2b.3"] = (stats.paired(g, {s: 0.0 for s in g}), 0.0)
    return fam


def comparison_on(rep: ArmReport, a: str, b: str, domain: str, lengths, key: str) -> dict:
    """a - b paired by seed on `key` (mean over `lengths`)."""
    return stats.paired(rep.per_seed(a, domain, lengths, key), rep.per_seed(b, domain, lengths, key))


def growth(rep: ArmReport, a: str, b: str, d: str, deep: tuple = (4, 5)) -> dict:
    """{seed: the mean of lead(L) over `deep` minus the mean of lead(2) and lead(3)}, lead = a - b
    at depth L on the arm's metric (H2b.3's measure; deep (6,): at the held-out depth)."""
    key, out = metric(rep.arm), {}
    for seed in rep.seeds:
        ra, rb = rep.runs.get(a, {}).get(seed), rep.runs.get(b, {}).get(seed)
        if ra is not None and rb is not None:
            lead = {L: acc(ra, d, (L,), key) - acc(rb, d, (L,), key) for L in (2, 3, *deep)}
            out[seed] = fmean(lead[L] for L in deep) - (lead[2] + lead[3]) / 2
    return out


def decisions_cures(rep: ArmReport) -> tuple[list[str], dict]:
    """The amendment's rules over the seeds that pass the gate (rep: `tested`): H2b.1's four cures
    minus exact KL and (chain) H2b.3's growth, decided by Holm over that family; H2b.2 (chain) by
    its own test. Fewer than 3 passing seeds: every hypothesis is descriptive, not tested."""
    arm, rows, out = rep.arm, study.DecisionRows(), {}
    row = rows.add
    d = arm.domains[0]
    key, L = metric(arm), arm.compared
    fam = cure_rows(rep, d)
    adj, lv = holm_of(fam), holm_levels_of(fam)
    out["family"] = adj
    few = len(rep.seeds) < 3
    where = f"{MEASURE_NAMES[key]}, mean over {', '.join(map(str, L))}"

    def verdict(h):
        if few:
            return f"not tested (fewer than 3 seeds pass gate {arm.gate_every_seed.name})"
        return decide_holm(fam[h][0], above=0.0, p_adj=adj[h], alpha=lv[h])

    rule = "supported iff above 0; refuted iff below 0 (Holm over the family)"
    for c in CURE_KEYS:
        h = f"H2b.1 {c}"
        out[h] = row(f"{h}: {rep.methods[c].label} minus MOPD exact KL ({where})", fam[h][0], rule, verdict(h))
        for Lx in get_domains(arm.domains)[d].eval_lengths:
            row(f"(H2b.1, descriptive) {c} minus mopd_kl, {MEASURE_NAMES[key]} at {Lx}",
                comparison_on(rep, c, "mopd_kl", d, (Lx,), key), "descriptive", "descriptive")
        if d == "chain":
            row(f"(H2b.1, descriptive) {c} minus mopd_kl, prefix trace ({', '.join(map(str, L))})",
                comparison_on(rep, c, "mopd_kl", d, L, "trace"), "descriptive", "descriptive")
    if d != "chain":
        return rows, out
    out["H2b.3"] = row("H2b.3: growth of MOPD exact KL's lead over SFT on the teacher's traces (mean lead at 4, 5 minus "
                       "at 2, 3; strict trace)", fam["H2b.3"][0], rule, verdict("H2b.3"))
    best = max(CURE_KEYS, key=lambda c: -math.inf if math.isnan(fam[f"H2b.1 {c}"][0]["diff"]) else fam[f"H2b.1 {c}"][0]["diff"])
    for a, b, deep, name in (("mopd_kl", "rft", (4, 5), "over RFT"), ("mopd_kl", "sft_gold", (4, 5), "over SFT on gold"),
                             (best, "sft_traces", (4, 5), f"of the best cure ({best}) over SFT on the teacher's traces"),
                             ("mopd_kl", "sft_traces", (6,), "over SFT on the teacher's traces at depth 6 (held out; "
                                                             "lead at 6 minus at 2, 3)")):
        g = growth(rep, a, b, d, deep)
        row(f"(H2b.3, descriptive) growth of the lead {name}", stats.paired(g, {s: 0.0 for s in g}), "H2b.3's rule",
            "descriptive")
    out["H2b.2"] = stuck_predicts(rep)["decision"]
    return rows, out


MOPD_KEYS = ("mopd_pg", "mopd_topk", "mopd_kl", *CURE_KEYS)


def share_window(rec: dict, d: str, step: int = 100, window: int = 10) -> float | None:
    """The stuck share H2b.2 reads: its mean over the `window` steps ending at `step`; where the run
    drew off-policy steps (lmbda < 1), over its last `window` on-policy steps up to `step`, from the
    per-step series (the amendment of 2026-12-05: an off-policy step scores the teacher's prefixes)."""
    series = rec.get("stuck_series")
    if series and not all(series["on_policy"]):
        vals = [v for st, on, v in zip(series["step"], series["on_policy"], series[d]["share"])
                if st <= step and on and v is not None][-window:]
        return fmean(vals) if vals else None
    return (((rec.get("stuck") or {}).get(d) or {}).get(str(step)) or {}).get("share_window")


def stuck_predicts(rep: ArmReport) -> dict:
    """H2b.2: does the stuck share at step 100 (its mean over steps 91-100) predict a run's failure
    (test strict trace below 0.50 over the compared depths)? tau chosen on seeds 0-2
    (stats.best_threshold), tested on seeds 3-4 (the one-sided Fisher exact test)."""
    d, key = rep.arm.domains[0], metric(rep.arm)
    units = []
    for k in MOPD_KEYS:
        for seed, r in rep.runs.get(k, {}).items():
            share = share_window(r, d)
            if share is not None:
                units.append((seed, share, acc(r, d, rep.arm.compared, key) < 0.50))
    fit = [(x, f) for s, x, f in units if s in (0, 1, 2)]
    held = [(x, f) for s, x, f in units if s in (3, 4)]
    out = {"units": len(units), "fit": len(fit), "test": len(held)}
    if len(rep.seeds) < 3:
        out["decision"] = f"not tested (fewer than 3 seeds pass gate {rep.arm.gate_every_seed.name})"
        return out
    for part, name in ((fit, "seeds 0-2"), (held, "seeds 3-4")):
        fails = sum(f for _, f in part)
        if not part or fails in (0, len(part)):
            out["decision"] = f"not tested ({name} have {'no run with a step-100 share' if not part else 'no failure' if not fails else 'no success'})"
            return out
    tau = stats.best_threshold([x for x, _ in fit], [f for _, f in fit])
    a = sum(x > tau and f for x, f in held)
    b = sum(x > tau and not f for x, f in held)
    c = sum(x <= tau and f for x, f in held)
    dd = sum(x <= tau and not f for x, f in held)
    p = stats.fisher_greater(a, b, c, dd)
    bal = stats.balanced_accuracy([x for x, _ in held], [f for _, f in held], tau)
    out.update(tau=tau, table=[[a, b], [c, dd]], p=p, balanced_accuracy=bal,
               decision=f"{'supported' if p < 0.05 else 'not supported'} (tau {tau:.3f} on seeds 0-2; on seeds 3-4 "
                        f"predicted failure x failure [[{a}, {b}], [{c}, {dd}]], Fisher p {p:.3f}, balanced accuracy {bal:.2f})")
    return out


def complete(every: ArmReport) -> bool:
    """Whether every method of the arm has a record (or the trainer's refusal) at every registered seed."""
    return all(s in every.runs.get(k, {}) or s in every.failed.get(k, {}) for k in every.methods for s in every.arm.seeds)


def kl_positions(rep: ArmReport) -> int:
    """The longest tracked completion of any MOPD run (at least the depth-2 gold's 5 tokens)."""
    return max([5] + [len(v["kl"]) for k in ("mopd_pg", "mopd_topk", "mopd_kl") for r in rep.runs.get(k, {}).values()
                      for v in (r.get("kl_along") or {}).values()])


POSITIONS = ["start", "hop 1", "answer", ".", "end"]   # a depth-2 gold trace, token by token


def _over_seeds(values: dict) -> dict:
    """{"mean", "half" (95% t half-width; NaN below 2 seeds), "n"} of {seed: value}."""
    vals = list(values.values())
    return {"mean": stats.mean_sd(vals)[0], "half": stats.t_half_width(vals), "n": sum(v == v for v in vals)}


def view(data: dict, arm: Arm) -> dict:
    """What the figures (views.regime_*) draw, in plain numbers: the page's figures and notebook 07
    draw the same dict, which render() stores in regimes.json["views"][arm]."""
    rep = tested(data, arm) if arm.gate_every_seed else ArmReport(data, arm)
    out = {"arm": str(arm.number), "title": arm.title, "domains": list(arm.domains), "seeds": rep.seeds,
           "parts": {d: {p: list(v) for p, v in parts.items()} for d, parts in rep.held.items()},
           "positions": POSITIONS, "methods": {}, "kl": {}}
    for k, m in rep.methods.items():
        if k not in rep.runs:
            continue
        per = rep.runs[k]
        lifts = {d: rep.lift(k, d, rep.held[d]["all"]) for d in arm.domains}
        out["methods"][k] = {
            "label": m.label, "seeds": sorted(per),
            "lift": {} if k == "base" else {d: {p: _over_seeds(rep.lift(k, d, rep.held[d][p])) for p in
                                                ("held-in", "held-out", "all")} for d in arm.domains},
            "mean_lift": None if k == "base" else _over_seeds({s: fmean(lifts[d][s] for d in arm.domains)
                                                               for s in per}),
            "pipeline_flops": fmean(rep.costs(k, s)[1]["flops"] for s in per),
            "by_length": {d: {str(L): fmean(acc(r, d, (L,)) for r in per.values()) for L in rep.held[d]["all"]}
                          for d in arm.domains}}
    for loss in ("pg", "topk", "kl"):
        per = [r["kl_along"] for r in rep.runs.get(f"mopd_{loss}", {}).values() if r.get("kl_along")]
        if not per or arm.number != 2:
            continue
        steps = sorted({int(s) for r in per for s in r}, key=int)
        out["kl"][loss] = {}
        for st in steps:
            width = max(len(r[str(st)]["kl"]) for r in per if str(st) in r)
            out["kl"][loss][str(st)] = [fmean(r[str(st)]["kl"][i] for r in per if str(st) in r and len(r[str(st)]["kl"]) > i)
                                        for i in range(width)]
    if arm.grids:
        out["stuck"] = stuck_view(data, arm)
    dec = decisions(rep)[1] if rep.runs else {}
    out["decisions"] = {h: v for h, v in dec.items() if h != "family"}
    out["holm"] = dec.get("family", {})       # each primary comparison's Holm-adjusted p over the arm's family
    every = ArmReport(data, arm, seeds=None)
    if not arm.grids and set(every.seeds) - set(REGISTERED):   # the check beside the registered decisions (five_seed_check)
        out["check"] = {"seeds": every.seeds,
                        "decisions": {h: v for h, v in decisions(every)[1].items() if h != "family"}}
    return out


def stuck_view(data: dict, arm: Arm) -> dict:
    """The stuck-share curves of a cures arm, from each MOPD record's per-step series: {method:
    {"label", "seeds": {seed: {"step", "share", "passes"}}}} over every recorded seed (a seed that
    fails the gate kept, marked); an off-policy step (lmbda < 1) has no share (None: the amendment
    of 2026-12-05); the threshold is MOPDConfig's stuck_warn_share."""
    every = ArmReport(data, arm, seeds=None)
    _, passing = gate_passing(data, arm)
    d = arm.domains[0]
    out = {"domain": d, "threshold": mm.MOPDConfig.stuck_warn_share, "methods": {}}
    for k in MOPD_KEYS:
        seeds = {}
        for seed, r in sorted(every.runs.get(k, {}).items()):
            series = r.get("stuck_series")
            if series:
                seeds[str(seed)] = {"step": series["step"], "passes": seed in passing,
                                    "share": [v if on else None for v, on in zip(series[d]["share"], series["on_policy"])]}
        if seeds:
            out["methods"][k] = {"label": every.methods[k].label, "seeds": seeds}
    return out
