"""Finding sentences rendered from the decisions they cite.

A page (README, docs/instructor.md, a notebook's markdown, a docs page's Reading) states a
comparison only inside a marker:

    <!-- finding: matched/T400/mopd_pg-mixrl -->...the sentence...<!-- /finding -->

and the sentence between the two comments is exactly what `render(id)` makes from the study's
committed JSON: the verb from the registered rule's outcome after the study's correction
(resolved / not resolved with the differences the interval allows / equivalent within a
registered margin; supported / refuted for a hypothesis), the numbers from the JSON, the table's
name with them. Hand-written prose around a marker may explain a mechanism; the result itself is
the rendered part. tests/test_findings.py reads the committed pages and fails when a marked
sentence and its JSON disagree.

    python -m tools.findings            # check every marked sentence of the pages against the JSON
    python -m tools.findings --write    # rewrite them from the JSON (after a re-run)
    python -m tools.findings --numbers  # the result text's numbers no source holds, and each page's counts
    python -m tools.findings --ratchet  # freeze those as unreviewed entries of the list (after a prose edit)

The number check (`unheld`, `scan`): every number of a page's result text (`result_text`: README's
results and figure caption, the guide's lectures, misconceptions and projects, every notebook's
markdown, every solutions page, a study page's hand-written Reading), integers and ratios ("3x")
included, is tied to a source it names, at the precision printed: a number of a rendered finding in
its paragraph, a cell of a table row its sentence names (on its page, or a docs page the paragraph
names), a ratio of two numbers its sentence states, a design constant of the configs (a number of
steps, seeds, prompts...; T =, K =, lr), or a phrase of the reviewed list tests/data/number_sources.json
whose source still holds it (another page's passage, a finding rendered from the JSON) or whose reason
says why it is not a result here (a cited paper's value, a registered threshold). A number that names
something (notebook 06, section 2, seed 4, step 300, depth 4) is not read. The same defect in words
(`overclaims`: "bounded by its teacher", "works here", "about as much"...) has its own reviewed list,
tests/data/overclaim_allow.json. The rest of a study page is its registered text, frozen, or rendered
from its JSON, re-rendered byte for byte (tests/studies/test_study_pages.py).

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

import argparse
import functools
import json
import math
import re
import sys
from pathlib import Path

from mopd_mini import stats

ROOT = Path(__file__).resolve().parents[1]
MARK = re.compile(r"<!-- finding: (?P<id>[^ ]+) -->(?P<text>.*?)<!-- /finding -->", re.S)
PAGES = ("README.md", "docs/findings.md", "docs/instructor.md", "docs/matched.md", "docs/regimes.md", "docs/ablations.md",
         "docs/baselines.md", "notebooks/*.ipynb", "notebooks/solutions/*.md")


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
    from studies import regimes
    a = {str(k): v for k, v in regimes.ARMS.items()}[arm]
    rep = regimes.ArmReport(data, a, seeds=None if every else regimes.REGISTERED)
    decided = regimes.decisions(rep)[1][h]
    fam = regimes.primary_arm2(rep) if a.number == 2 else None
    p = fam[h][0] if fam and h in fam else None
    shown = regimes.decisions(rep)[1].get("H1.1", "")
    if a.number != 2 and h in ("H1.2", "H1.3") and shown.startswith("shown (on "):
        d = shown[len("shown (on "):-1].split(", ")[0]
        p = regimes.comparison(rep, "mopd_kl" if h == "H1.2" else "rft", "mixrl", d, rep.held[d]["all"])
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
    from studies import regimes
    ar = {str(k): v for k, v in regimes.ARMS.items()}[arm]
    rep = regimes.ArmReport(data, ar, seeds=None if every else regimes.REGISTERED)
    p = regimes.comparison(rep, a, b, domain, rep.held[domain]["all"])
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
    from studies import regimes
    ar = {str(k): v for k, v in regimes.ARMS.items()}[arm]
    rep = regimes.ArmReport(data, ar, seeds=None if every else regimes.REGISTERED)
    lengths, where, key = _lengths(rep, domain, part)
    vals = list(rep.per_seed(m, domain, lengths, key).values())
    mu, sd = stats.mean_sd(vals)
    table = f"docs/regimes.md, arm {arm}'s " + ("5-seed table" if every else "accuracy table")
    return (f"{rep.methods[m].label} on {domain}, {where}{_measure(key)}: {mu:.3f} ± {sd:.3f} over {len(vals)} seeds "
            f"({table}, descriptive).")


def regimes_kl(data: dict, arm: str, loss: str, step: int, pos: int) -> str:
    """One cell of arm 2's KL table: the mean over the registered seeds, its median and max."""
    from studies import regimes
    ar = {str(k): v for k, v in regimes.ARMS.items()}[arm]
    rep = regimes.ArmReport(data, ar)
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
    from studies import regimes
    ar = {str(k): v for k, v in regimes.ARMS.items()}[arm]
    rep = regimes.ArmReport(data, ar)
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
    """A cures arm's registered decision (studies.regimes.decisions_cures, Holm over its family) on
    the seeds that pass its gate; the arm must be recorded in full (a partial arm has no decision)."""
    from studies import regimes
    ar = {str(k): v for k, v in regimes.ARMS.items()}[arm]
    every = regimes.in_variants(ar, regimes.ArmReport, data, ar, ar.seeds)
    if not regimes.complete(every):
        raise ValueError(f"arm {arm} is not recorded in full: it has no decision to cite")
    rep = regimes.in_variants(ar, regimes.tested, data, ar)
    rows, out = regimes.in_variants(ar, regimes.decisions_cures, rep)
    what = next((r[2:].split(" | ")[0] for r in rows if r.startswith(f"| {h}: ")), h)   # its row's comparison
    seeds = "" if h == "H2b.2" else (f", seeds {', '.join(map(str, rep.seeds))}: those that pass gate "
                                     f"{ar.gate_every_seed.name}")
    return f"arm {arm}, {what}: {out[h]} (docs/regimes.md, arm {arm}'s comparison table{seeds})."


def regimes_seed(data: dict, arm: str, m: str, domain: str, part: str, seed: int) -> str:
    """One seed's accuracy (or trace): what that seed did, not a finding."""
    from studies import regimes
    ar = {str(k): v for k, v in regimes.ARMS.items()}[arm]
    rep = regimes.ArmReport(data, ar, seeds=None)
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
        return token_kl_caption(json.loads((data_dir / "figures" / "token_kl.json").read_text()))
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


def pages(root: Path = ROOT) -> list[Path]:
    return sorted({p for pattern in PAGES for p in root.glob(pattern)})


def texts(path: Path) -> list[str]:
    """The page's text (a notebook: each markdown cell's source)."""
    if path.suffix == ".ipynb":
        return [c["source"] if isinstance(c["source"], str) else "".join(c["source"])
                for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "markdown"]
    return [path.read_text()]


def _norm(text: str) -> str:
    return " ".join(text.split())


def check(root: Path = ROOT, data_dir: Path | None = None) -> list[str]:
    """Every marked sentence of the committed pages against its rendering: the disagreements, as
    'page: id: page says ... / the JSON says ...'."""
    bad = []
    for path in pages(root):
        for text in texts(path):
            for m in MARK.finditer(text):
                try:
                    want = render(m["id"], data_dir)
                except (KeyError, ValueError, IndexError) as e:
                    bad.append(f"{path.relative_to(root)}: {m['id']}: no such finding ({e})")
                    continue
                if _norm(m["text"]) != _norm(want):
                    bad.append(f"{path.relative_to(root)}: {m['id']}:\n  page says: {_norm(m['text'])}\n"
                               f"  the JSON says: {want}")
    return bad


def marked(root: Path = ROOT) -> dict[str, list[str]]:
    """{page: [finding ids]} of every page with a marker."""
    out = {}
    for path in pages(root):
        ids = [m["id"] for text in texts(path) for m in MARK.finditer(text)]
        if ids:
            out[str(path.relative_to(root))] = ids
    return out


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


def write(root: Path = ROOT, data_dir: Path | None = None) -> list[str]:
    """Rewrite every marked sentence from the JSON; the pages changed."""
    changed = []
    sub = lambda text: fill(text, data_dir)  # noqa: E731
    for path in pages(root):
        if path.suffix == ".ipynb":
            nb = json.loads(path.read_text())
            before = json.dumps(nb)
            for c in nb["cells"]:
                if c["cell_type"] == "markdown" and isinstance(c["source"], str):
                    c["source"] = sub(c["source"])
            if json.dumps(nb) != before:
                path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
                changed.append(str(path))
        else:
            text = path.read_text()
            new = sub(text)
            if new != text:
                path.write_text(new)
                changed.append(str(path))
    return changed


# ---------------------------------------------------------------------------------------------
# the number check: every number of a sentence that states a result is tied to a source it names
# ---------------------------------------------------------------------------------------------

NUMBER = re.compile(r"(?<![\w.,/$])(?P<sign>[+\-−])?(?P<num>\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?(?:e[+-]?\d+)?)"
                    r"(?P<unit>%|x)?(?![\w]|\.\d|,\d{3})")
_STRIP = (re.compile(r"<!--.*?-->", re.S), re.compile(r"```.*?```", re.S), re.compile(r"`[^`]*`"),
          re.compile(r"\]\([^)]*\)"), re.compile(r"https?://\S+"), re.compile(r"^\s*#.*$", re.M),
          re.compile(r"^\s*\|.*$", re.M), re.compile(r"\b\d{4}-\d{2}-\d{2}\b"), re.compile(r"\b\d{1,2}:\d{2}\b"),
          re.compile(r"arXiv \d+\.\d+"), re.compile(r"^\s*\d+\.\s", re.M), re.compile(r"\[\^?\d+\]"),
          re.compile(r"\$\$.*?\$\$", re.S), re.compile(r"\$[^$\n]+\$"), re.compile(r"(?<![\w.])0\d(?:'s)?\b"),
          re.compile(r"(?<![\w.,+\-−])[01](?![\w.%x,]|-\w)"), re.compile(r"\b\d+-(?!step|seed|prompt)[a-z]+"))
IDS = re.compile(r"\b(?:notebooks?|lectures?|sections?|arms?|seeds?|step|depths?|lengths?|positions?|rounds?|"
                 r"stages?|tables?|issues?|tiers?|projects?|figures?|parts?|exercises?|cells?|questions?|chapters?|"
                 r"lines?|columns?|rows?|levels?|pairs?|phases?|items?|Python|torch|version|layers?|heads?|"
                 r"days?|weeks?|sessions?|the\s+\d\d|epochs? of)[\s-]*(?:[\[({]\s*)?\d+[a-z]?"
                 r"(?:(?:\s*(?:,|-|–|and|or|to|&)\s*)\d+[a-z]?)*", re.I)
"""an integer that names something (notebook 06, section 2, arm 1, seed 4, seeds 0-3, step 300, depth 4,
position 3, stage 3, Table 2): an identifier, not a quantity; not read"""
SETTING = re.compile(r"(?:\b(?:T|K|G|k|c|r|n|w)\s*(?:=|∈)|\b(?:rank|lr|alpha|learning rate|batch(?: size)?|"
                     r"temperature|density|lmbda|beta|budgets? of)\s*(?:=|∈|of)?)\s*[{(\[]?\s*"
                     r"(?P<list>[\d.e+\-]+(?:\s*(?:,|and|or)\s*[\d.e+\-]+)*)", re.I)
UNITS = re.compile(r"^\s*(?:(?:GRPO|RL|optimizer|distillation|training|MOPD)\s+)?(?:steps?|seeds?|prompts?|"
                   r"samples?|completions?|rollouts?|workers?|teachers?|domains?|methods?|cures?|"
                   r"learning rates?)\b", re.I)
"""a design constant (300 steps, 5 seeds, 8 prompts, T = 200, lr 1e-3): read from the configs it describes"""
SENTENCE = re.compile(r"(?<=[.!?;])\s+(?=[A-Z*(\[_`])|\n\s*[*-]\s+| ¶ ")


def numbers(text: str) -> list[str]:
    """Every number of a text as printed (sign, digits, % or x kept): decimals, percentages, integers and
    ratios ("3x", "100x"), outside code, link targets, HTML comments, headings, table rows, dates and
    times; an integer glued to a name (L16, Qwen3, H2.1) is not a number."""
    for p in _STRIP:
        text = p.sub(" ", text)
    return [m.group(0) for m in NUMBER.finditer(text)]


def _value(n: str) -> tuple[float, int, bool]:
    """(value, printed decimals, signed) of a printed number; a percentage as printed (17% -> 17)."""
    s = n.replace("−", "-").replace(",", "").rstrip("%x")
    signed = s[0] in "+-"
    body = s.lstrip("+-").split("e")[0]
    return float(s), (len(body.split(".")[1]) if "." in body else 0), signed


def _same(n: str, source: str) -> bool:
    """The printed number n is the source number rounded to n's printed precision (a percentage also
    as a fraction of 1, x100); without a printed sign the sign is not compared."""
    x, d, signed = _value(n)
    try:
        h = _value(source)[0]
    except (ValueError, IndexError):
        return False
    if "e" in n.lower():
        return abs(h - x) <= abs(x) * 1e-9 + 1e-12
    cands = [h] + ([h * 100] if n.endswith("%") and not source.endswith("%") else [])
    for c in cands:
        c, y = (c, x) if signed else (abs(c), abs(x))
        if abs(round(c, d) - y) < 1e-9 or (d == 0 and abs(c - y) < 1e-9):
            return True
    return False


@functools.lru_cache(maxsize=1)
def _config_constants() -> frozenset[float]:
    """The design constants the configs state (mopd_mini/config.py's dataclass defaults; the studies'
    plans, protocols and arms: a field's default, a keyword argument, a module-level constant), read
    from their source (no import, no torch), with the products of two and three of the integers
    (12,800 samples = 200 steps x 8 prompts x 8 samples)."""
    import ast
    vals: set[float] = set()
    for rel in ("mopd_mini/config.py", "studies/matched.py", "studies/baselines.py", "studies/regimes.py",
                "studies/ablations.py", "mopd_mini/results_page.py"):
        tree = ast.parse((ROOT / rel).read_text())
        for node in ast.walk(tree):
            found = []
            if isinstance(node, ast.AnnAssign) and node.value is not None:
                found = [node.value]
            elif isinstance(node, ast.keyword):
                found = [node.value]
            elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id.isupper() for t in node.targets):
                found = [node.value]
            elif isinstance(node, ast.FunctionDef):
                found = list(node.args.defaults)
            for f in found:
                for c in ast.walk(f):
                    if isinstance(c, ast.Constant) and type(c.value) in (int, float):
                        vals.add(float(c.value))
    ints = sorted(v for v in vals if v == int(v) and 1 < v <= 1000)
    prods = {a * b for a in ints for b in ints}
    prods |= {a * b * c for a in ints for b in ints for c in ints if a * b * c <= 10**6}
    return frozenset(vals | prods)


def _key(text: str) -> str:
    """A label or a sentence as the row tie compares them: lower case, '-' as a space (MOPD-PG, MOPD PG)."""
    return " ".join(text.lower().replace("-", " ").split())


def _tables(text: str) -> list[tuple[str, list[str]]]:
    """Every table row of a text as (its label: the first cell, markup and brackets dropped, lower case;
    the numbers of its other cells)."""
    out = []
    for line in text.splitlines():
        if line.lstrip().startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            label = _key(re.sub(r"\s*\(.*?\)|[*_`]", "", cells[0]).replace(" from the sft teacher", ""))
            if len(label) >= 4 and not re.fullmatch(r":?-+:?", cells[0]):
                out.append((label, [m.group(0) for c in cells[1:] for m in NUMBER.finditer(c)]))
    return out


def _cited_pages(para: str, root: Path) -> list[Path]:
    """The docs pages a paragraph names (docs/regimes.md, [ablations.md](ablations.md), results.md)."""
    names = dict.fromkeys(re.findall(r"\b([a-z_]+)\.md\b", para))
    return [root / "docs" / f"{n}.md" for n in names if (root / "docs" / f"{n}.md").exists()]


def result_text(path: Path, root: Path = ROOT) -> list[str]:
    """The paragraphs of a page that state results, which the number check reads: README's results section
    and its figure caption; the guide's lecture plan, misconceptions and projects; every markdown cell of a
    notebook (intro, sections, Summary, reading cells); every solutions page; a study page's hand-written
    Reading (the rest of a study page is its registered text, frozen by tests/studies/test_study_pages.py,
    or rendered from its JSON, which the same test re-renders byte for byte)."""
    rel = str(path.relative_to(root))
    if path.suffix == ".ipynb":
        blocks = texts(path)
    elif rel == "README.md":
        text = path.read_text()
        caption = re.findall(r"^!\[[^\n]*\n\n(.*?)(?:\n\n|\Z)", text, re.M | re.S)
        blocks = [_section(text, "## Results on the tiny default"), *caption]
    elif rel == "docs/instructor.md":
        text = path.read_text()
        blocks = [_section(text, h) for h in ("## Lecture plan", "## Misconceptions", "## Ideas for graded projects")]
    elif rel.startswith("notebooks/solutions/") or rel == "docs/findings.md":
        blocks = [path.read_text()]
    elif rel.startswith("docs/"):
        text = path.read_text()
        blocks = [_section(text, h) for h in re.findall(r"^#+ Reading[^\n]*", text, re.M)] + _reading_blocks(text)
    else:
        blocks = []
    return [p for b in blocks for p in re.split(r"\n\s*\n", b) if p.strip() and not p.startswith("**Time:**")]


def _section(text: str, heading: str) -> str:
    """From the heading line to the next heading of the same or a higher level."""
    level = heading.split(" ")[0]
    lines, out, on = text.splitlines(), [], False
    for line in lines:
        if line.startswith(heading):
            on = True
        elif on and line.startswith("#") and len(line.split(" ")[0]) <= len(level):
            break
        if on:
            out.append(line)
    return "\n".join(out)


def _reading_blocks(text: str) -> list[str]:
    """The hand-written Reading paragraphs of a rendered page: from a '**Reading**' paragraph, the
    bullet paragraphs that follow it."""
    out, paras, on = [], re.split(r"\n\s*\n", text), False
    for para in paras:
        if para.startswith("**Reading**"):
            on = True
            out.append(para)
        elif on and para.lstrip().startswith("* "):
            out.append(para)
        else:
            on = False
    return out


def load_sources(path: Path | None = None) -> list[dict]:
    """The reviewed list of numbers tied by hand (tests/data/number_sources.json): each entry a page, a
    phrase of it (the numbers inside it are covered while the phrase stands as written), and either a
    source to compare with (`quote`: a passage of `source`, another page, with the same numbers in the
    same order) or a `reason` it is not a result of this course (a cited paper's value, a threshold
    registered before a run, a figure's cell label)."""
    path = path or ROOT / "tests" / "data" / "number_sources.json"
    return json.loads(path.read_text())["entries"] if path.exists() else []


def _norm_ws(text: str) -> str:
    return " ".join(text.split())


def quantities(text: str) -> list[str]:
    """The numbers of a text that are quantities: `numbers` less those that name something (IDS)."""
    for p in _STRIP:
        text = p.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    ids = [(m.start(), m.end()) for m in IDS.finditer(text)]
    return [m.group(0) for m in NUMBER.finditer(text) if not any(a <= m.start() < b for a, b in ids)]


def check_sources(entries: list[dict], root: Path = ROOT, data_dir: Path | None = None) -> list[str]:
    """Each reviewed entry still holds: a `quote` (a sentence, or table rows) stands on its `source` page
    and holds each of the phrase's numbers at the phrase's precision; a `finding` (an id, or a list of ids) renders from the
    JSON numbers that hold each of the phrase's; an entry with neither names a `reason`."""
    bad = []
    for e in entries:
        mine = quantities(e["phrase"])
        if "quote" in e:
            src = root / e["source"]
            text = _norm_ws("\n".join(texts(src))) if src.exists() else ""
            if _norm_ws(e["quote"]) not in text:
                bad.append(f"{e['page']}: source {e['source']} no longer says {e['quote']!r}")
                continue
            theirs = [m.group(0) for m in NUMBER.finditer(e["quote"])]   # a table row's cells included
            if not mine or not all(any(_same(a, b) for b in theirs) for a in mine):
                bad.append(f"{e['page']}: {e['phrase']!r} does not hold {e['source']}'s {e['quote']!r}")
        elif "finding" in e:
            ids = e["finding"] if isinstance(e["finding"], list) else [e["finding"]]
            try:
                pool = [n for i in ids for n in numbers(render(i, data_dir))]
            except (KeyError, ValueError, IndexError) as err:
                bad.append(f"{e['page']}: {e['phrase']!r}: its finding does not render ({err})")
                continue
            if not mine or not all(any(_same(a, b) for b in pool) for a in mine):
                bad.append(f"{e['page']}: {e['phrase']!r} is not what {', '.join(ids)} renders: {pool}")
        elif not e.get("reason"):
            bad.append(f"{e['page']}: {e['phrase']!r} has neither a source nor a reason")
    return bad


class Scan:
    """What the number check read on one page: every number of its result text, each either tied (how)
    or not (the problem)."""

    def __init__(self, page: str):
        self.page, self.tied, self.listed, self.constants, self.bad = page, 0, 0, 0, []
        self.unreviewed = 0       # of `listed`: covered by a ratchet entry ('unreviewed: ...'), not a review
        self.where = []           # (the paragraph outside its findings, offset, number) of each problem

    @property
    def scanned(self) -> int:
        return self.tied + self.listed + self.constants + len(self.bad)


def scan_page(path: Path, root: Path = ROOT, entries: list[dict] | None = None,
              constants: set | None = None, used: set | None = None) -> Scan:
    """Every number of the page's result text (`result_text`), outside its marked findings (each rendered
    from its JSON and checked by `check`), is tied to a source: a number of a rendered finding in the same
    paragraph; a cell of a table row (on this page, or on a docs page the paragraph names) whose label the
    sentence names; a design constant of the configs (a number followed by steps, seeds, prompts... or after
    T =, K =, lr); or a phrase of the reviewed list (`load_sources`). `used` collects the list's entries that
    covered something."""
    rel = str(path.relative_to(root))
    constants = _config_constants() if constants is None else constants
    mine = [(i, e) for i, e in enumerate(entries or []) if e["page"] == rel]
    out = Scan(rel)
    own_rows = [r for t in texts(path) for r in _tables(t)]
    cited = {}                                            # a cited page's table rows, read once
    for para in result_text(path, root):
        found = [n for m in MARK.finditer(para) for n in numbers(m["text"])]
        outside = MARK.sub(" ¶ ", para)
        for p in _cited_pages(para, root):
            if p not in cited:
                cited[p] = [r for t in texts(p) for r in _tables(t)]
        rows = own_rows + [r for p in _cited_pages(para, root) for r in cited[p]]
        covered = []                                      # spans of the paragraph the reviewed list covers
        for idx, e in mine:
            for m in re.finditer(r"\s+".join(map(re.escape, e["phrase"].split())), outside):
                covered.append((m.start(), m.end(), e.get("reason", "").startswith("unreviewed")))
                if used is not None:
                    used.add(idx)
        stripped = outside
        for p in _STRIP:
            stripped = p.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), stripped)
        ids = [(m.start(), m.end()) for m in IDS.finditer(stripped)]
        settings = [(m.start("list"), m.end("list")) for m in SETTING.finditer(stripped)]
        cuts = [0] + [m.end() for m in SENTENCE.finditer(stripped)] + [len(stripped)]
        flat = outside
        for m in NUMBER.finditer(stripped):
            n, at = m.group(0), m.start()
            inside = lambda spans: any(a <= at < b for a, b, *_ in spans)  # noqa: E731
            if inside(ids):
                continue                                   # an identifier: not a quantity
            x = _value(n)[0]
            if inside(settings) or UNITS.match(stripped[m.end():]):
                if abs(x) in constants:
                    out.constants += 1
                elif inside(covered):
                    out.listed += 1
                    out.unreviewed += all(u for a, b, u in covered if a <= at < b)
                else:
                    out.bad.append(f"{rel}: {n}: a design constant no config states: "
                                   f"...{_norm_ws(flat[max(0, at - 60):at + 40])}...")
                    out.where.append((outside, at, n))
                continue
            kind = lambda c: (c.endswith("x"), "." in c or "e" in c or c.endswith("%"))  # noqa: E731
            # a ratio is held only by a ratio, an integer by an integer, a decimal by a decimal
            if any(kind(f) == kind(n) and _same(n, f) for f in found):
                out.tied += 1
                continue
            k = max(i for i, c in enumerate(cuts) if c <= at)
            sentence = _key(outside[cuts[k]:cuts[min(k + 1, len(cuts) - 1)]])
            if any(label in sentence and any(kind(c) == kind(n) and _same(n, c) for c in cells)
                   for label, cells in rows):
                out.tied += 1
                continue
            if n.endswith("x"):                            # a ratio of two numbers its sentence states
                end = cuts[min(k + 1, len(cuts) - 1)]
                others = [_value(o.group(0))[0] for o in NUMBER.finditer(stripped, cuts[k], end)
                          if o.start() != at and not o.group(0).endswith("x")]
                if any(b and _same(n, repr(a / b)) for a in others for b in others):
                    out.tied += 1
                    continue
            if inside(covered):
                out.listed += 1
                out.unreviewed += all(u for a, b, u in covered if a <= at < b)
                continue
            out.bad.append(f"{rel}: {n}: ...{_norm_ws(flat[max(0, at - 60):at + 40])}...")
            out.where.append((outside, at, n))
    return out


def scan(root: Path = ROOT, entries: list[dict] | None = None, used: set | None = None) -> list[Scan]:
    entries = load_sources() if entries is None else entries
    constants = _config_constants()
    return [scan_page(p, root, entries, constants, used) for p in pages(root)]


def unheld(root: Path = ROOT, entries: list[dict] | None = None) -> list[str]:
    """Every number of a page's result text that no source it names holds and the reviewed list does not
    cover, each as 'page: number: context'; and every reviewed entry whose source no longer holds it."""
    entries = load_sources() if entries is None else entries
    return [b for s in scan(root, entries) for b in s.bad] + check_sources(entries, root)


UNREVIEWED = ("unreviewed: frozen as committed; not yet tied to a source or given a reason. "
              "Any edit of it fails the check; tie it (a finding, a quote) or give its reason, and the list shrinks")


def ratchet(root: Path = ROOT, path: Path | None = None) -> int:
    """Rewrite tests/data/number_sources.json's unreviewed entries from the pages as they stand: the reviewed
    entries (a source, or a reason that is not 'unreviewed: ...') are kept, and every number no source holds
    gets an unreviewed phrase around it. For after a reviewed edit of the pages' prose (`git diff` of the file
    shows what it froze); it is not a review: a number it freezes is not tied to anything. Returns how many
    unreviewed phrases it wrote."""
    path = path or ROOT / "tests" / "data" / "number_sources.json"
    data = json.loads(path.read_text()) if path.exists() else {"entries": []}
    entries = [e for e in data["entries"] if not e.get("reason", "").startswith("unreviewed")]
    added = []
    for s in scan(root, entries):
        spans = {}
        for outside, at, n in s.where:
            a = outside.rfind(" ", 0, max(0, at - 30)) + 1 if at > 30 else 0
            gap = re.search(r"\s", outside[at + len(n) + 12:])
            b = len(outside) if gap is None else at + len(n) + 12 + gap.start()
            spans.setdefault(id(outside), [outside, []])[1].append([a, b])
        for outside, sp in spans.values():
            merged = []
            for a, b in sorted(sp):
                if merged and a <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], b)
                else:
                    merged.append([a, b])
            added += [{"page": s.page, "phrase": " ".join(outside[a:b].split()), "reason": UNREVIEWED} for a, b in merged]
    data["entries"] = entries + added
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    return len(added)


# ---------------------------------------------------------------------------------------------
# the same defect without a number: a result restated in words
# ---------------------------------------------------------------------------------------------

OVERCLAIM = re.compile(r"\b(?:bounded by (?:its|their|the|a) teachers?|capped by (?:its |their |the |a )?teachers?|"
                       r"works here|did not make a worse|(?:did|does|do) no worse|no worse than|about as much|"
                       r"ranking does not turn|(?:did|does|do) as well|as good as|outperform\w*|on par with|"
                       r"beats?|matches its teachers?|the same as (?:its|the) teachers?)\b", re.I)
"""words that state a comparison's outcome without its number or its interval: each needs the rendered
finding instead, or a reason on the reviewed list (tests/data/overclaim_allow.json)"""


def overclaims(root: Path = ROOT, allowed: list[dict] | None = None, used: set | None = None) -> list[str]:
    """Every match of OVERCLAIM in a page's result text (outside its marked findings) that no reviewed entry
    (page, a phrase of it around the words, reason) covers: 'page: words: context'."""
    if allowed is None:
        f = ROOT / "tests" / "data" / "overclaim_allow.json"
        allowed = json.loads(f.read_text())["entries"] if f.exists() else []
    bad = []
    for path in pages(root):
        rel = str(path.relative_to(root))
        mine = [(i, e) for i, e in enumerate(allowed) if e["page"] == rel]
        for para in result_text(path, root):
            outside = MARK.sub(" ¶ ", para)
            covered = []
            for i, e in mine:
                for m in re.finditer(r"\s+".join(map(re.escape, e["phrase"].split())), outside):
                    covered.append((m.start(), m.end()))
                    if used is not None:
                        used.add(i)
            for m in OVERCLAIM.finditer(outside):
                if not any(a <= m.start() < b for a, b in covered):
                    bad.append(f"{rel}: {m.group(0)}: ...{_norm_ws(outside[max(0, m.start() - 80):m.end() + 60])}...")
    return bad


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--write", action="store_true", help="rewrite every marked sentence from the JSON")
    p.add_argument("--numbers", action="store_true", help="list the result text's numbers no source holds and the "
                   "reviewed list (tests/data/number_sources.json) does not cover, then each page's counts")
    p.add_argument("--ratchet", action="store_true", help="freeze the numbers no source holds as unreviewed entries "
                   "of tests/data/number_sources.json (after a reviewed prose edit; not a review)")
    args = p.parse_args(argv)
    if args.ratchet:
        print(f"{ratchet()} unreviewed phrases written to tests/data/number_sources.json")
        return 0
    if args.numbers:
        scans = scan()
        bad = [b for s in scans for b in s.bad] + check_sources(load_sources())
        print("\n".join(bad) or "every number of the result text is tied to a source or on the reviewed list")
        for s in scans:
            print(f"{s.page}: {s.scanned} numbers read, {s.tied} tied to a finding, table or ratio, {s.constants} "
                  f"design constants of the configs, {s.listed - s.unreviewed} on the reviewed list, {s.unreviewed} "
                  f"on its unreviewed ratchet, {len(s.bad)} not held")
        return 1 if bad else 0
    if args.write:
        print("\n".join(write()) or "nothing to change")
        return 0
    bad = check()
    print("\n".join(bad) or f"every marked finding agrees with its JSON ({sum(map(len, marked().values()))} markers)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
