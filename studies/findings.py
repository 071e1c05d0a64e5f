"""The findings' sentences, rendered from the studies' committed JSON (`render(id)`), and `fill`: a
page's marked sentences rendered again (a study's page command calls it on the page it writes;
tools.findings checks every page's markers against `render` and its numbers against their sources).

A page states a comparison only inside a marker:

    <!-- finding: matched/T400/mopd_pg-mixrl -->...the sentence...<!-- /finding -->

and the sentence between the two comments is exactly what `render(id)` makes from the study's
committed JSON: the verb from the registered rule's outcome after the study's correction
(resolved / not resolved with the differences the interval allows / equivalent within a
registered margin; supported / refuted for a hypothesis), the numbers from the JSON, the table's
name with them.

Ids:
  matched/headline                   the matched study's corrected decisions at the T's run with 5 seeds
  matched/T<T>/<a>-<b>               one comparison of the matched family (a, b: studies.matched's keys)
  matched/T<T>/H3/<b>                H3's cost ratio of the best MOPD form over offline baseline b at T
  matched/T<T>/norm/<a>-<b>          a - b in the normalised score at T (outside the family: uncorrected)
  matched/T<T>/lift/<a>-<b>          a - b in the mean lift, a pair outside the family (uncorrected)
  matched/decision/<H>               a decision of the matched page's decisions table
  matched/T<T>/cure/<cure>           the course-setting check at T (docs/regimes.md): cure minus exact KL,
                                     Holm over the cures; refused unless every asked seed is recorded
  matched/H4/<m>                     H4's row (descriptive) for method m at the T's run with 5 seeds
  regimes/<arm>/<H>[@5]              a registered decision of docs/regimes.md (@5: its 5-seed check)
  regimes/<arm>/cmp/<a>-<b>/<domain>[@5]   a paired comparison of one arm's accuracy (all lengths)
  regimes/<arm>/mean/<m>/<domain>/<part>[@5]   a method's accuracy, mean ± sd over seeds (descriptive)
  regimes/<arm>/seed/<m>/<domain>/<part>/<seed>   one seed's accuracy (what that seed did)
  regimes/<arm>/kl/<loss>/<step>/<pos>  one cell of arm 2's KL table (mean, median, max)
  regimes/<arm>/klmean/<loss>/<step>    arm 2's KL table at one step, mean over its positions
  regimes/<arm>/cure/<H>             a registered decision of a cures arm (2b, memory-cures), H with '+'
                                     for its space ("H2b.1+mopd_fkl"), over the seeds that pass its gate
  results/stage3                     docs/results.md's stage-3 normalised scores (descriptive)
  results/token_kl                   the caption of docs/figures/token_kl.png, from the figure's data
  matched/family                     how many of the registered family survive Holm's correction
  ablations/none                     how many of the ablations' paired differences are resolved
  ablations/<key>                    a paired comparison of docs/ablations.md (ABLATION_PAIRS)
  ablations/value/<key>              a descriptive value of docs/ablations.md (ABLATION_VALUES)
  baselines/<m>-<ref>                one row of docs/baselines.md's "Which differences are resolved"
  baselines/ranking                  docs/baselines.md's ranking of means (descriptive)
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from mopd_mini import stats

ROOT = Path(__file__).resolve().parents[1]
MARK = re.compile(r"<!-- finding: (?P<id>[^ ]+) -->(?P<text>.*?)<!-- /finding -->", re.S)


def _label(m: str) -> str:
    from studies.baselines import LABEL
    return LABEL[m].split(" (")[0]


def comparison_sentence(name: str, p: dict, table: str, m: int | None = None) -> str:
    """One comparison of a family as a sentence: its name, the difference with its 95% interval,
    the Holm-adjusted p over the family of m, the reading after the correction, and the table."""
    uncorrected = (f"; uncorrected p {p['p']:.3f}, resolved only uncorrected" if p.get("resolved")
                   and not p.get("resolved_holm", p.get("resolved")) else "")
    holm = f", p (Holm) {p['p_holm']:.3f} over the family of {m}" if m is not None else ""
    return f"{name}: {stats.interval_text(p)}{holm}, {p['reading']}{uncorrected} ({table})."


# ---------------------------------------------------------------------------------------------
# the matched study
# ---------------------------------------------------------------------------------------------


def _read(data_dir: Path, study: str, extra: dict | None = None) -> dict:
    """<data_dir>/<study>.json through the studies' one schema check (studies.slices.read_record): a
    broken or incomplete file stops with its name, the key and what was expected, never "no such finding"."""
    from studies.slices import read_record

    return read_record(data_dir / f"{study}.json", study, extra)


def _matched(data_dir: Path) -> dict:
    return _read(data_dir, "matched")


def matched_pair(rep: dict, T: int, a: str, b: str) -> str:
    from studies import matched
    fam = matched.family(rep)
    p = fam[(T, a, b)]
    return comparison_sentence(f"{_label(a)} minus {_label(b)} at T = {T}, mean lift", p,
                               f"docs/matched.md, T = {T} paired table", p["m"])


def matched_headline(rep: dict) -> str:
    """Which of the matched family's comparisons survive Holm's correction, at the T's run with
    the five seeds a stated finding needs (T's with fewer are left out, and said to be)."""
    from studies import matched
    fam = matched.family(rep)
    m = next(iter(fam.values()))["m"]
    five = sorted(int(T) for T, v in rep["by_T"].items() if len(v["seeds_done"]) >= matched.FIVE)
    fewer = sorted(int(T) for T, v in rep["by_T"].items() if len(v["seeds_done"]) < matched.FIVE)
    kl = [k for k in fam if k[0] in five and k[1] == "mopd_kl"]
    kl_res = [k for k in kl if fam[k]["resolved_holm"]]
    other = [k for k in fam if k[0] in five and k[1] != "mopd_kl" and fam[k]["resolved_holm"]]
    Ts = " and ".join(map(str, five))
    left = "".join(f"; T = {T} ran {len(rep['by_T'][str(T)]['seeds_done'])} and is in no finding" for T in fewer)
    out = f"at matched RL budgets of {Ts} GRPO steps per domain ({matched.FIVE} seeds each{left}), "
    if kl_res:
        out += "MOPD exact KL is resolved against " + "; ".join(
            f"{_label(b)} at {T} steps ({stats.interval_text(fam[(T, a, b)])}, p (Holm) {fam[(T, a, b)]['p_holm']:.3f}; "
            f"{stats.holm_interval_text(fam[(T, a, b)], fam[(T, a, b)]['alpha_holm'])})"
            for T, a, b in kl_res)
    else:
        out += ("no comparison of MOPD exact KL with Mix-RL, RFT or soft labels is resolved after Holm's "
                f"correction over the study's {m} registered comparisons")
    if other:
        out += "; the " + ("one comparison that is" if len(other) == 1 else "comparisons that are") + ": " + "; ".join(
            f"{_label(a)} minus {_label(b)} at {T} steps ({stats.interval_text(fam[(T, a, b)])}, p (Holm) "
            f"{fam[(T, a, b)]['p_holm']:.3f}; {stats.holm_interval_text(fam[(T, a, b)], fam[(T, a, b)]['alpha_holm'])})"
            for T, a, b in other)
    return out


# ---------------------------------------------------------------------------------------------
# the regimes study
# ---------------------------------------------------------------------------------------------


def regimes_decision(data: dict, arm: str, h: str, every: bool) -> str:
    from studies import regimes_arms, regimes_report
    a = {str(k): v for k, v in regimes_arms.ARMS.items()}[arm]
    rep = regimes_report.ArmReport(data, a, seeds=None if every else regimes_report.REGISTERED)
    decided = regimes_report.decisions(rep)[1][h]
    fam = regimes_report.primary_arm2(rep) if a.number == 2 else None
    p = fam[h][0] if fam and h in fam else None
    shown = regimes_report.decisions(rep)[1].get("H1.1", "")
    if a.number != 2 and h in ("H1.2", "H1.3") and shown.startswith("shown (on "):
        d = shown[len("shown (on "):-1].split(", ")[0]
        p = regimes_report.comparison(rep, "mopd_kl" if h == "H1.2" else "rft", "mixrl", d, rep.held[d]["all"])
        h = f"{h} on {d}"
    table = f"docs/regimes.md, arm {arm}'s " + ("5-seed table" if every else "comparison table")
    diff = f"{stats.interval_text(p)} over {p['n']} seeds, " if p is not None else ""
    return f"{h}: {diff}{decided} ({table})."


def _cmp_sentence(name: str, p: dict, table: str, digits: int = 3, p_adj: float | None = None) -> str:
    """A paired comparison read by stats.reading (after the correction when p_adj is given)."""
    n = f" over {p['n']} seeds" if p["n"] >= 2 else ""
    holm = f", p (Holm) {p_adj:.3f}" if p_adj is not None else ""
    return f"{name}: {stats.interval_text(p, digits)}{n}{holm}, {stats.reading(p, p_adj, digits=digits)} ({table})."


def matched_h3(rep: dict, T: int, b: str) -> str:
    from studies import matched
    rows = rep["by_T"][str(T)]["rows"]
    best = max(matched.STUDENTS, key=lambda m: stats.mean_sd([p["lift"]["mean"] for p in rows[m].values()])[0])
    r = matched.cost_ratio(rows, best, b)
    ival = f" [{math.exp(r['lo']):.2f}, {math.exp(r['hi']):.2f}]" if r["n"] >= 2 and not math.isnan(r["half"]) else ""
    return (f"H3 at T = {T}: {_label(best)}'s pipeline FLOPs to {rep['plan']['target']:.0%} of the teachers' val "
            f"lift over {_label(b)}'s, {r['ratio']:.2f}x{ival} over the {r['n']} seeds where both reached it, below "
            f"the critique's {matched.CRITIQUE}x: {matched.below(r)} (docs/matched.md, T = {T} H3 table).")


def matched_norm(rep: dict, T: int, a: str, b: str, part: str = "all") -> str:
    """a - b outside the registered family (uncorrected): the normalised score (part "all"), or the
    mean lift of a pair the family does not hold (part "lift"). Both read the rows the T's paired table
    reads (studies.matched.compared_rows: a complete re-check of b there, else the sweep's)."""
    from studies import matched, study
    p = study.paired_rows(matched.compared_rows(rep["by_T"][str(T)], a, b)[0], a, b, part=part)
    what = "normalised score" if part == "all" else "mean lift"
    return _cmp_sentence(f"{_label(a)} minus {_label(b)} at T = {T}, {what} (outside the registered "
                         "family, uncorrected)", p, f"docs/matched.md, T = {T} " + ("paired table" if part == "all"
                                                                                     else "rows, per seed"))


def matched_h4(rep: dict, m: str) -> str:
    from studies import matched
    five = sorted(int(T) for T, v in rep["by_T"].items() if len(v["seeds_done"]) >= matched.FIVE)
    vals = [stats.mean_sd([p["lift"]["mean"] for p in rep["by_T"][str(T)]["rows"][m].values()])[0] for T in five]
    teach = [matched.teachers_lift(rep["by_T"][str(T)])["mean"] for T in five]
    return (f"{_label(m)}'s mean lift at T = {' and '.join(map(str, five))}: {' and '.join(f'{v:.2f}' for v in vals)}, "
            f"against the teachers' {' and '.join(f'{v:.2f}' for v in teach)} (docs/matched.md, H4 table, "
            "descriptive: no test, the teachers one seed each).")


def regimes_cmp(data: dict, arm: str, a: str, b: str, domain: str, every: bool) -> str:
    from studies import regimes_arms, regimes_report
    ar = {str(k): v for k, v in regimes_arms.ARMS.items()}[arm]
    rep = regimes_report.ArmReport(data, ar, seeds=None if every else regimes_report.REGISTERED)
    p = regimes_report.comparison(rep, a, b, domain, rep.held[domain]["all"])
    table = f"docs/regimes.md, arm {arm}'s " + ("5-seed table" if every else "comparison table")
    return _cmp_sentence(f"{rep.methods[a].label} minus {rep.methods[b].label} on {domain}, all lengths (uncorrected)",
                         p, table)


def _lengths(rep, domain: str, part: str) -> tuple[tuple, str, str]:
    """'held-in' / 'all' / 'held-out', or depths '2' / '2+3'; a ':trace' (or ':words') suffix reads
    that measure instead of the accuracy: (lengths, how the page names them, the measure)."""
    part, _, key = part.partition(":")
    key = key or "acc"
    if part in rep.held[domain]:
        return rep.held[domain][part], part, key
    return tuple(int(x) for x in part.split("+")), f"depth {part.replace('+', ', ')}", key


def _measure(key: str) -> str:
    return {"acc": "", "trace": " trace", "words": " words"}[key]


def regimes_mean(data: dict, arm: str, m: str, domain: str, part: str, every: bool) -> str:
    from studies import regimes_arms, regimes_report
    ar = {str(k): v for k, v in regimes_arms.ARMS.items()}[arm]
    rep = regimes_report.ArmReport(data, ar, seeds=None if every else regimes_report.REGISTERED)
    lengths, where, key = _lengths(rep, domain, part)
    vals = list(rep.per_seed(m, domain, lengths, key).values())
    mu, sd = stats.mean_sd(vals)
    table = f"docs/regimes.md, arm {arm}'s " + ("5-seed table" if every else "accuracy table")
    return (f"{rep.methods[m].label} on {domain}, {where}{_measure(key)}: {mu:.3f} ± {sd:.3f} over {len(vals)} seeds "
            f"({table}, descriptive).")


def regimes_kl(data: dict, arm: str, loss: str, step: int, pos: int) -> str:
    """One cell of arm 2's KL table: the mean over the registered seeds, its median and max."""
    from studies import regimes_arms, regimes_report
    ar = {str(k): v for k, v in regimes_arms.ARMS.items()}[arm]
    rep = regimes_report.ArmReport(data, ar)
    per = rep.runs[f"mopd_{loss}"]
    v = [r["kl_along"][str(step)]["kl"][pos] for r in per.values()
         if r.get("kl_along") and str(step) in r["kl_along"] and len(r["kl_along"][str(step)]["kl"]) > pos]
    sp = stats.spread(v)
    name = {"pg": "MOPD-PG", "topk": "MOPD Top-k", "kl": "MOPD exact KL"}[loss]
    return (f"{name}'s per-token KL at position {pos}, step {step}: mean {sp['mean']:.3f} over {len(v)} seeds, "
            f"median {sp['median']:.3f}, max {sp['max']:.3f} (docs/regimes.md, arm {arm}'s KL table).")


def regimes_kl_mean(data: dict, arm: str, loss: str, step: int) -> str:
    """Arm 2's KL table at one step, mean over its positions of the per-position mean over seeds (what
    "the mean per-token KL along the tracked samples" reads), with the largest seed's value beside it."""
    from studies import regimes_arms, regimes_report
    ar = {str(k): v for k, v in regimes_arms.ARMS.items()}[arm]
    rep = regimes_report.ArmReport(data, ar)
    per = [r["kl_along"][str(step)]["kl"] for r in rep.runs[f"mopd_{loss}"].values()
           if r.get("kl_along") and str(step) in r["kl_along"]]
    cols = [[v[i] for v in per if len(v) > i] for i in range(max(map(len, per)))]
    means = [stats.spread(c)["mean"] for c in cols if c]
    name = {"pg": "MOPD-PG", "topk": "MOPD Top-k", "kl": "MOPD exact KL"}[loss]
    return (f"{name}'s per-token KL at step {step}, mean over the {len(means)} positions of the per-position mean over "
            f"{len(per)} seeds: {sum(means) / len(means):.3f}, largest position {max(means):.3f} (docs/regimes.md, arm "
            f"{arm}'s KL table, descriptive).")


def matched_family(rep: dict) -> str:
    """How many of the registered family survive Holm's correction, and how many are resolved
    only uncorrected."""
    from studies import matched
    fam = matched.family(rep)
    m = next(iter(fam.values()))["m"]
    held = sum(bool(p["resolved_holm"]) for p in fam.values())
    raw = sum(bool(p["resolved"]) and not p["resolved_holm"] for p in fam.values())
    return (f"the matched study registered {m} comparisons; after Holm's correction over them {held} "
            f"{'is' if held == 1 else 'are'} resolved, and {raw} more only uncorrected (docs/matched.md, decisions).")


def matched_decision(rep: dict, h: str) -> str:
    """A decision of the matched page's table; H1 and H2 read only the T's run with the page's five
    seeds (its rule for a stated finding), so a T run with fewer is in neither sentence."""
    from studies import matched
    d = matched.decisions(rep)
    five = [T for T in d["Ts"] if len(rep["by_T"][str(T)].get("seeds_done", [None] * matched.FIVE)) >= matched.FIVE]
    if h == "H1" and five != d["Ts"]:
        res = [T for T in five if d["by_T"][T]["mopd_kl-mixrl"]["resolved"]]
        Ts = " and ".join(map(str, five))
        verdict = ("not contradicted: MOPD exact KL minus Mix-RL is not resolved at T = " + Ts + ", the T's run with "
                   f"{matched.FIVE} seeds, after Holm's correction; not resolved is not a tie (no equivalence margin "
                   "was registered)" if not res else
                   "contradicted at " + ", ".join(f"T = {T} (MOPD exact KL "
                                                  f"{'ahead' if d['by_T'][T]['mopd_kl-mixrl']['diff'] > 0 else 'behind'})"
                                                  for T in res))
        return f"H1: {verdict} (docs/matched.md, decisions table, read with its five-seed rule)."
    if h == "H2" and not {100, 400} <= set(five):
        return (f"H2: not decided by the five-seed rule: it compares T = 100 with T = 400, and not both ran "
                f"{matched.FIVE} seeds (docs/matched.md, decisions table, read with its five-seed rule).")
    return f"{h}: {d[h]} (docs/matched.md, decisions table)."


def matched_cure(rep: dict, T: int, key: str) -> str:
    """One row of the course-setting check at T (studies.matched.cures_decisions: the cure minus exact
    KL on the mean normalised test score, paired by seed, Holm over the cures, H2b.1's rule)."""
    from studies import matched, study
    block = rep["by_T"][str(T)]["cures"]
    if study.unfinished(block["command"], block["seeds_done"]):
        raise ValueError(f"the check at T = {T} is not recorded on every seed it asked for: it has no decision to cite")
    f = matched.cures_decisions(block)[key]
    return (f"the course-setting check at T = {T}, {matched.CURE_LABEL[key]} minus MOPD exact KL, mean normalised "
            f"test score: {stats.interval_text(f)} over {f['n']} seeds, p (Holm) "
            f"{f['p_holm']:.3f} over the {f['m']} cures: {f['decision']} (docs/regimes.md, the course-setting check's "
            "table).")


def regimes_cure(data: dict, arm: str, h: str) -> str:
    """A cures arm's registered decision (studies.regimes_report.decisions_cures, Holm over its family) on
    the seeds that pass its gate; the arm must be recorded in full (a partial arm has no decision)."""
    from studies import regimes_arms, regimes_report
    ar = {str(k): v for k, v in regimes_arms.ARMS.items()}[arm]
    every = regimes_arms.in_variants(ar, regimes_report.ArmReport, data, ar, ar.seeds)
    if not regimes_report.complete(every):
        raise ValueError(f"arm {arm} is not recorded in full: it has no decision to cite")
    rep = regimes_arms.in_variants(ar, regimes_report.tested, data, ar)
    rows, out = regimes_arms.in_variants(ar, regimes_report.decisions_cures, rep)
    what = next((r[2:].split(" | ")[0] for r in rows if r.startswith(f"| {h}: ")), h)   # its row's comparison
    seeds = "" if h == "H2b.2" else (f", seeds {', '.join(map(str, rep.seeds))}: those that pass gate "
                                     f"{ar.gate_every_seed.name}")
    return f"arm {arm}, {what}: {out[h]} (docs/regimes.md, arm {arm}'s comparison table{seeds})."


def regimes_seed(data: dict, arm: str, m: str, domain: str, part: str, seed: int) -> str:
    """One seed's accuracy (or trace): what that seed did, not a finding."""
    from studies import regimes_arms, regimes_report
    ar = {str(k): v for k, v in regimes_arms.ARMS.items()}[arm]
    rep = regimes_report.ArmReport(data, ar, seeds=None)
    lengths, where, key = _lengths(rep, domain, part)
    v = rep.per_seed(m, domain, lengths, key)[seed]
    return (f"seed {seed}'s {rep.methods[m].label} on {domain}, {where}{_measure(key)}: {v:.3f} (docs/regimes.md, "
            f"arm {arm}'s per-seed table; what one seed did, not a finding).")


def results_stage3(data_dir: Path) -> str:
    import mopd_mini as mm
    table = _read(data_dir, "results")["table"]
    names = {"MOPD-PG": "pg", "MOPD-Top-k": "topk", "exact reverse KL": "kl"}
    cells = []
    for label, loss in names.items():
        seeds = sorted(k for k in table["acc"] if k.startswith(f"student_{loss}_s"))
        mu, sd = stats.mean_sd([mm.normalised_scores(table, student=n)["mean"] for n in seeds])
        cells.append(f"{label} {mu:.2f} ± {sd:.2f}")
    return (f"normalised score, mean over both domains, mean ± sample std over {len(seeds)} seeds: "
            + ", ".join(cells) + " (docs/results.md, stage 3's table, descriptive).")


# ---------------------------------------------------------------------------------------------
# the ablations and baselines pages
# ---------------------------------------------------------------------------------------------

_OWN = ("ucmopd_own", "paired")
ABLATION_PAIRS = {   # key: (path in docs/ablations.json's summary, what is compared, the table)
    "origin/pg": (("origin", "losses", "pg", "paired_binding"), "other origin minus same origin, final binding "
                  "accuracy (PG)", "section 1's paired lines"),
    "origin/topk": (("origin", "losses", "topk", "paired_binding"), "other origin minus same origin, final binding "
                    "accuracy (top-k)", "section 1's paired lines"),
    "rounds/from_base": (("rounds", "paired", "round-2 student (from base)"), "round-2 student from the base minus the "
                         "round-1 student, normalised", "section 2's table"),
    "rounds/from_round1": (("rounds", "paired", "round-2 student (from round-1 student)"), "round-2 student from the "
                           "round-1 student minus the round-1 student, normalised", "section 2's table"),
    "rounds/control": (("rounds", "control", "from_round1_minus_control"), "round-2 student from the round-1 student "
                       "minus the 600-step control, normalised", "section 2's table"),
    "rounds/steps": (("rounds", "control", "control_minus_round1"), "the 600-step control minus the 300-step round-1 "
                     "student, normalised", "section 2's table"),
    "ucmopd/two": (("ucmopd", "paired", "two"), "UCMOPD minus MOPD, two teachers, normalised", "section 3's table"),
    "ucmopd/preserve": (("ucmopd", "paired", "preserve"), "UCMOPD minus MOPD, capability preservation",
                        "section 3's table"),
    "own/recall": (_OWN + ("ucmopd minus mopd_rollouts", "recall"), "UCMOPD minus rollout-matched MOPD on recall",
                   "section 4's table"),
    "own/binding": (_OWN + ("ucmopd minus mopd_rollouts", "binding"), "UCMOPD minus rollout-matched MOPD on binding",
                    "section 4's table"),
    "own/recall_plain": (_OWN + ("ucmopd minus mopd", "recall"), "UCMOPD minus plain MOPD (1 rollout) on recall",
                         "section 4's table"),
    "own/binding_plain": (_OWN + ("ucmopd minus mopd", "binding"), "UCMOPD minus plain MOPD (1 rollout) on binding",
                          "section 4's table"),
}
ABLATION_VALUES = {  # key: (path in the summary, index of [mean, sd] or None, digits, what it is, the table)
    "origin/teachers": None,     # rendered by ablation_value below: the two binding teachers, one seed each
    "origin/kl_ratio": (("origin", "initial_kl", "ratio"), "the other-origin teacher's initial per-token KL over the "
                        "same-origin teacher's, on the same samples", "section 1's initial-KL table"),
    "rounds/teachers": (("rounds", "rows", "round-2 teachers", "mean"), "round-2 teachers, normalised against the "
                        "round-1 teachers", "section 2's table"),
    "rounds/from_base": (("rounds", "rows", "round-2 student (from base)", "mean"), "round-2 student from the base, "
                         "normalised", "section 2's table"),
    "rounds/round1": (("rounds", "rows", "round-1 student", "mean"), "round-1 student, normalised", "section 2's table"),
    "rounds/from_round1": (("rounds", "rows", "round-2 student (from round-1 student)", "mean"), "round-2 student from "
                           "the round-1 student, normalised", "section 2's table"),
    "rounds/control": (("rounds", "rows", "round-1 student, twice the steps (control)", "mean"), "the 600-step "
                       "control, normalised", "section 2's table"),
}


def _at(d: dict, path: tuple):
    for k in path:
        d = d[k]
    return d


def ablation_pair(summary: dict, key: str) -> str:
    path, what, table = ABLATION_PAIRS[key]
    return _cmp_sentence(what, _at(summary, path), f"docs/ablations.md, {table}", digits=2)


def ablation_value(summary: dict, key: str) -> str:
    if key == "origin/teachers":
        o, t = summary["origin"], summary["teachers"]
        return (f"the other origin's binding teacher scores {o['other_teacher_binding']:.2f} against the same-origin "
                f"teacher's {t['binding']:.2f} on the test prompts (docs/ablations.md, section 1; one seed each, "
                "descriptive).")
    if key == "own/specialist":
        o, t = summary["ucmopd_own"], summary["teachers"]
        return (f"the binding specialist's recall is {o['specialist']['recall']:.2f} against the recall teacher's "
                f"{t['recall']:.2f} (docs/ablations.md, section 4; descriptive).")
    if key == "own/recovered":
        rec = [summary["ucmopd_own"]["rows"][m]["recall"][0] for m in ("mopd", "mopd_rollouts", "ucmopd")]
        return (f"every arm's recall is between {min(rec):.2f} and {max(rec):.2f} (docs/ablations.md, section 4's "
                "table, mean over seeds; descriptive).")
    path, what, table = ABLATION_VALUES[key]
    mu, sd = _at(summary, path)
    return f"{what}: {mu:.2f} ± {sd:.2f} (docs/ablations.md, {table}, descriptive)."


def ablation_none(summary: dict) -> str:
    """The page's count of resolved paired differences (every pair of ABLATION_PAIRS)."""
    res = [k for k, (path, _, _) in ABLATION_PAIRS.items() if _at(summary, path)["resolved"]]
    n = {_at(summary, path)["n"] for path, _, _ in ABLATION_PAIRS.values()}
    seeds = f"{n.pop()} seeds" if len(n) == 1 else "their seeds"
    count = "none" if not res else f"{len(res)}"
    return (f"{count} of the {len(ABLATION_PAIRS)} paired differences of docs/ablations.md "
            f"{'is' if len(res) < 2 else 'are'} resolved over {seeds}" + (f" ({', '.join(res)})" if res else "") + ".")


def _baselines_family(rep: dict):
    from studies import baselines, study
    order = baselines.ranking(rep)
    best = max(("mopd_pg", "mopd_topk", "mopd_kl"), key=lambda m: baselines.method_stats(rep, m)[0])
    fam = study.family({f"{m}|{ref}": baselines.paired_rows(rep["rows"], m, ref) for m in order
                        for ref in ("mopd_pg", best) if m != ref})
    return order, best, fam


def baselines_pair(rep: dict, m: str, ref: str) -> str:
    _, _, fam = _baselines_family(rep)
    f = fam[f"{m}|{ref}"]
    k = f["n"]
    return (f"{_label(m)} minus {_label(ref)}, mean normalised score: {stats.interval_text(f)} over {k} seeds, "
            f"p (Holm) {f['p_holm']:.3f} over the table's family of {len(fam)}, {f['reading']}"
            + ("; resolved only uncorrected" if f["resolved"] and not f["resolved_holm"] else "")
            + " (docs/baselines.md, \"Which differences are resolved\").")


def baselines_ranking(rep: dict, top: int = 4) -> str:
    from studies import baselines
    order, best, _ = _baselines_family(rep)
    shown = order[:max(top, order.index(best) + 1)]
    return ("the means, descriptive: " + ", ".join(f"{_label(m)} {baselines.method_stats(rep, m)[0]:.2f}" for m in shown)
            + " (docs/baselines.md, its table, mean normalised test score).")


# ---------------------------------------------------------------------------------------------


_SHORTER = (   # (pattern, replacement): the words a short form leaves out; never a number or a verdict
    (re.compile(r" \(uncorrected 95% interval: [^;()]*; (p \(Holm\) [0-9.]+)\)"), r" (\1)"),
    (re.compile(r" \(uncorrected 95% interval: [^;()]*\)"), ""),
    (re.compile(r" over the family of \d+"), ""),
    (re.compile(r" allows differences from (\S+) to "), r" allows \1 to "),
    (re.compile(r"after Holm's correction over the study's (\d+) registered comparisons"), r"after Holm's correction (\1 comparisons)"),
)


def shorten(sentence: str) -> str:
    """The short form of a rendered finding (README's `short/<id>` markers): the same decision and the
    same numbers but the uncorrected interval (the page beside it keeps it), in fewer words."""
    for pattern, repl in _SHORTER:
        sentence = pattern.sub(repl, sentence)
    return sentence


def render(fid: str, data_dir: Path | None = None) -> str:
    """The sentence of finding `fid`, from the committed JSON in `data_dir` (docs/ by default);
    `short/<id>`: the same finding's short form (`shorten`), for the README."""
    data_dir = data_dir or ROOT / "docs"
    if fid.startswith("short/"):
        return shorten(render(fid[len("short/"):], data_dir))
    parts = fid.split("/")
    if parts[0] == "matched":
        rep = _matched(data_dir)
        if parts[1] == "headline":
            return matched_headline(rep)
        if parts[1] == "family":
            return matched_family(rep)
        if parts[1] == "decision":
            return matched_decision(rep, parts[2])
        if parts[1] == "H4":
            return matched_h4(rep, parts[2])
        T = int(parts[1].lstrip("T"))
        if parts[2] == "H3":
            return matched_h3(rep, T, parts[3])
        if parts[2] == "cure":
            return matched_cure(rep, T, parts[3])
        if parts[2] in ("norm", "lift"):
            a, b = parts[3].split("-")
            return matched_norm(rep, T, a, b, "all" if parts[2] == "norm" else "lift")
        a, b = parts[2].split("-")
        return matched_pair(rep, T, a, b)
    if parts[0] == "regimes":
        data = _read(data_dir, "regimes")
        last, _, five = parts[-1].partition("@")
        parts[-1] = last
        if parts[2] == "cmp":
            a, b = parts[3].split("-")
            return regimes_cmp(data, parts[1], a, b, parts[4], bool(five))
        if parts[2] == "cure":
            return regimes_cure(data, parts[1], last.replace("+", " "))
        if parts[2] == "kl":
            return regimes_kl(data, parts[1], parts[3], int(parts[4]), int(parts[5]))
        if parts[2] == "klmean":
            return regimes_kl_mean(data, parts[1], parts[3], int(parts[4]))
        if parts[2] == "seed":
            return regimes_seed(data, parts[1], parts[3], parts[4], parts[5], int(parts[6]))
        if parts[2] == "mean":
            return regimes_mean(data, parts[1], parts[3], parts[4], parts[5], bool(five))
        return regimes_decision(data, parts[1], last, bool(five))
    if parts[0] == "results" and parts[1] == "token_kl":
        from mopd_mini.results_page import token_kl_caption
        path = data_dir / "figures" / "token_kl.json"
        if not path.exists():
            raise SystemExit(f"{path}: missing: the token_kl figure's data (python -m studies.results --figure-only writes it)")
        return token_kl_caption(json.loads(path.read_text()))
    if parts[0] == "results" and parts[1] == "stage3":
        return results_stage3(data_dir)
    if parts[0] == "ablations":
        summary = _read(data_dir, "ablations", {"summary": "mapping"})["summary"]
        if parts[1] == "none":
            return ablation_none(summary)
        key = "/".join(parts[2:] if parts[1] == "value" else parts[1:])
        return ablation_value(summary, key) if parts[1] == "value" else ablation_pair(summary, key)
    if parts[0] == "baselines":
        from studies.baselines import in_use    # a complete re-check's moved rows, as the page shows them
        rep = in_use(_read(data_dir, "baselines"))
        if parts[1] == "ranking":
            return baselines_ranking(rep)
        m, ref = parts[1].split("-")
        return baselines_pair(rep, m, ref)
    raise KeyError(f"unknown finding id {fid!r}")


def fill(text: str, data_dir: Path | None = None, strict: bool = True) -> str:
    """The text with every marked sentence rendered again from the JSON in data_dir (a page's
    command calls it on the page it writes, so a hand-written Reading's findings follow the JSON).
    Not strict: a finding that JSON cannot render (a smoke run's few seeds) says so instead."""
    def one(m):
        try:
            body = render(m["id"], data_dir)
        except (KeyError, ValueError, IndexError, StopIteration) as e:
            if strict:
                raise
            body = f"(not rendered from this JSON: {type(e).__name__} {e})"
        return f"<!-- finding: {m['id']} -->{body}<!-- /finding -->"
    return MARK.sub(one, text)
