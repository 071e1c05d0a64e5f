"""The matched-budget study's page: docs/matched.md's "## Results" section and its figure, rendered
from docs/matched.json (`write`, `results_markdown`): each T's tables, the family's Holm correction
and the decisions (`family`, `decisions`: the registered rules applied), H3's cost ratios, and the
re-check's section (`recheck_sections`). No training.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from statistics import fmean

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from mopd_mini import cost, plots, stats, views  # noqa: E402
from mopd_mini.adapters import atomic_write  # noqa: E402

from . import slices, study  # noqa: E402
from .study import RESULTS  # noqa: E402
from .baselines import DOMAINS, LABEL  # noqa: E402
from .cures import choice_lines, edge_mark, on_edge, teachers_line  # noqa: E402
from tools.provenance import above_header, machine_line  # noqa: E402
from .matched_plan import (COMPARISONS, CRITIQUE, DOCS, FIGURE, FIVE, FULL, MARGINS, METHODS, OFFLINE,  # noqa: E402
                           RECHECK_ESTIMATE, RECHECK_EXPERIMENT, RECHECK_HEADING, RECHECKED, STUDENTS)


def family(rep: dict, override: dict | None = None) -> dict:
    """{(T, a, b): the paired mean-lift comparison with its Holm-adjusted p over the whole family
    (every T of the report, COMPARISONS at each) and its reading} (studies.study.family). Each reads
    `compared_rows` (a complete re-check in the sweep's place); `override`: {(T, a, b): rows} read instead."""
    comp, override = {}, override or {}
    for key, by_T in sorted(rep["by_T"].items(), key=lambda kv: int(kv[0])):
        for a, b in COMPARISONS:
            rows = override.get((int(key), a, b)) or compared_rows(by_T, a, b)[0]
            if a in rows and b in rows:
                comp[f"{a}-{b}@{int(key)}"] = study.paired_rows(rows, a, b, "lift")
    fam = study.family(comp, MARGINS)
    return {(int(k.split("@")[1]), *k.split("@")[0].split("-")): v for k, v in fam.items()}


def cost_ratio(rows: dict, a: str, b: str, key: str = "flops") -> dict:
    """H3: a's cost to reach the target over b's, per seed where both reach it; the geometric mean
    and the 95% t-interval of the log ratio (stats.paired of the logs)."""
    la = {s: math.log(p["reach"][key]) for s, p in rows[a].items() if p.get("reach")}
    lb = {s: math.log(p["reach"][key]) for s, p in rows[b].items() if p.get("reach")}
    p = stats.paired(la, lb)
    return {**p, "ratio": math.exp(p["diff"]) if p["n"] else float("nan"),
            "below_critique": p["n"] >= 2 and not math.isnan(p["hi"]) and p["hi"] < math.log(CRITIQUE)}


def below(r: dict) -> str:
    """H3's column: yes / no by the interval's upper end, n/a where fewer than 2 seeds reached the
    target (no interval to decide on)."""
    if r["n"] < 2 or math.isnan(r["half"]):
        return f"n/a ({r['n']} seed{'s' if r['n'] != 1 else ''} reached it: no interval)"
    return "yes" if r["below_critique"] else "no"


def written_by(rep: dict, by_T: dict) -> str:
    """The command that wrote this T's section: its own, or (a section saved before sections
    recorded one) the report's."""
    return by_T.get("command", rep["command"])


def ran_on(rep: dict, by_T: dict) -> str:
    """The machine that ran this T's section, as written_by finds its command."""
    return machine_line(by_T.get("machine", rep["machine"]))


def teachers_lift(by_T: dict) -> dict:
    """Each teacher's test lift on its own domain (accuracy over the domain's lengths minus the
    base's) and their mean: the cap a distilled student's lift is read against."""
    test = by_T["refs"]["test"]
    out = {d: fmean(test[f"teacher_{d}"][d].values()) - fmean(test["base"][d].values()) for d in DOMAINS}
    return {**out, "mean": fmean(out.values())}


def across_T(rep: dict) -> list[str]:
    """H4's table (descriptive): the teachers' lift and each method's mean lift, T by T."""
    shown = ("mopd_kl", "mopd_topk", "mopd_pg", "mixrl", "rft", "soft", "merge_best")
    lines = ["### Across T (H4, descriptive)", "",
             "Mean test lift over the base (mean ± sample std over the seeds of each T). The teachers are one "
             "seed (0) each, scored on their own domain; \"teachers\" is their mean.", "",
             "| T | seeds | teacher binding | teacher recall | teachers | " + " | ".join(LABEL[m] for m in shown) + " |",
             "| --- | --- | --- | --- | --- | " + " | ".join("---" for _ in shown) + " |"]
    for key, by_T in sorted(rep["by_T"].items(), key=lambda kv: int(kv[0])):
        t = teachers_lift(by_T)
        cells = [study.cell([p["lift"]["mean"] for p in by_T["rows"][m].values()]) for m in shown]
        lines.append(f"| {key} | {len(by_T['seeds_done'])} | {t['binding']:.2f} | {t['recall']:.2f} | {t['mean']:.2f} | "
                     + " | ".join(cells) + " |")
    return lines + [""]


def method_table(rep: dict, by_T: dict, methods: tuple) -> list[str]:
    """A T's (or a check's) table of methods: the chosen setting (marked when still on its grid's
    edge), the lift per domain and its mean, the normalised score, the pipeline FLOPs and the cost to
    reach the target fraction of the teachers' val lift."""
    target = by_T.get("plan", {}).get("target") or rep.get("plan", {}).get("target", FULL.target)
    out = ["| method | chosen | lift binding | lift recall | mean lift | normalised | pipeline FLOPs | "
           f"FLOPs to {target:.0%} of the teachers' lift (val) | wall s to it |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for m in methods:
        per = by_T["rows"][m].values()
        col = lambda f: study.cell([f(p) for p in per])  # noqa: E731
        reached = [p["reach"] for p in per if p.get("reach")]
        to = (f"{fmean(x['flops'] for x in reached):.2e} ({len(reached)}/{len(per)} seeds)" if reached
              else f"not reached (0/{len(per)})")
        wall = f"{fmean(x['seconds'] for x in reached):.0f}" if reached else "—"
        chosen = json.dumps(by_T["chosen"][m]) + edge_mark(by_T, m)
        out.append(f"| {LABEL[m]} | {chosen} | {col(lambda p: p['lift']['binding'])} | "
                   f"{col(lambda p: p['lift']['recall'])} | {col(lambda p: p['lift']['mean'])} | "
                   f"{col(lambda p: p['all']['mean'])} | {fmean(p['pipeline']['flops'] for p in per):.2e} | "
                   f"{to} | {wall} |")
    return out


def results_markdown(rep: dict) -> str:
    """The results section (below the pre-registration, which this never rewrites)."""
    by_Ts = sorted(rep["by_T"].items(), key=lambda kv: int(kv[0]))
    commands = list(dict.fromkeys(written_by(rep, v) for _, v in by_Ts)) or [rep["command"]]
    machines = list(dict.fromkeys(ran_on(rep, v) for _, v in by_Ts)) or [machine_line(rep["machine"])]
    out = [RESULTS, "", "Written by" + (" (each T's section names its own)" if len(commands) > 1 else "") + ":", "",
           "```bash", *commands, "```", "",
           ("Machines: each T's section names its own." if len(machines) > 1 else f"Machine: {machines[0]}.")
           + f" Finished {rep['date']}.", ""]
    for key, by_T in by_Ts:
        rows, seeds = by_T["rows"], by_T["seeds_done"]
        stale = sorted({LABEL[m] for m, per in rows.items() for p in per.values()
                        if cost.count_version_of(p, 0) < cost.COUNT_VERSION})
        out += [f"### T = {key} GRPO steps per domain (seeds {seeds})", "",
                *([f"Written by `{written_by(rep, by_T)}`" + (f", finished {by_T['date']}" if by_T.get("date") else "")
                   + (f", on {ran_on(rep, by_T)}." if len(machines) > 1 else "."),
                   ""] if len(commands) > 1 or len(machines) > 1 else []),
                *study.unfinished(written_by(rep, by_T), seeds),
                *([f"**Mixed ledger**: the costs of {', '.join(stale)} include runs counted by older code "
                   f"(cost ledger below {cost.COUNT_VERSION}); their FLOPs are not comparable with the others'.", ""]
                  if stale else []),
                "Test split, mean ± sample std over seeds (ddof = 1). Lift: mean accuracy over the domain's lengths minus "
                "the base's. Pipeline FLOPs: the method's stage plus the teachers it needs (cost.FORMULA).", "",
                *method_table(rep, by_T, METHODS)]
        fam = family(rep)
        m = next(iter(fam.values()))["m"] if fam else 0
        out += ["", f"Paired by seed, on the mean lift (the primary metric): mean difference ± 95% t half-width "
                f"(uncorrected), the per-seed differences, the paired t-test's p uncorrected and Holm-adjusted over the "
                f"family of {m} pre-listed comparisons (every T), and the reading after the correction, printed with the "
                "interval at Holm's level (the level at which Holm's step-down tests that comparison, "
                "`mopd_mini.stats.holm_levels`: it excludes 0 exactly when the reading is resolved) and the "
                "uncorrected one beside it (no equivalence margin was registered, so an unresolved difference is "
                "\"not resolved\", never \"equal\"). The uncorrected columns say only whether the 95% interval "
                "excludes 0, which is not *resolved* for a comparison of the family. The normalised score's difference "
                "is descriptive (uncorrected).", "",
                "| comparison | mean lift (uncorrected) | per seed | p | p (Holm) | reading (Holm) | normalised (uncorrected) |",
                "| --- | --- | --- | --- | --- | --- | --- |"]
        for a, b in COMPARISONS:
            ab, rechecked = compared_rows(by_T, a, b)
            f, pn = fam[(int(key), a, b)], study.paired_rows(ab, a, b)
            res = lambda p: stats.interval_text(p) + (" (excludes 0)" if p["resolved"] else " (includes 0)")  # noqa: E731
            out.append(f"| {LABEL[a]} minus {LABEL[b]}" + (" (the re-check's, below: fresh teachers)" if rechecked else "")
                       + f" | {res(f)} | "
                       f"{study.seeds_text({x: ab[a][x]['lift']['mean'] - ab[b][x]['lift']['mean'] for x in ab[a] if x in ab[b]})} | {f['p']:.3f} | {f['p_holm']:.3f} | "
                       f"{f['reading']} | {res(pn)} |")
        if len(seeds) < FIVE:
            out += ["", f"**{len(seeds)} seeds at this T**: below the page's five-seed rule, so no comparison of this T "
                    "is stated as a finding anywhere (README, guide, notebooks)."]
        best = max(STUDENTS, key=lambda m: stats.mean_sd([p["lift"]["mean"] for p in rows[m].values()])[0])
        out += ["", f"H3, the cost to reach {rep['plan']['target']:.0%} of the teachers' val lift, {LABEL[best]} (the "
                "MOPD form with the highest mean test lift here) over each offline baseline: geometric mean over the "
                "seeds where both reach it, 95% t-interval of the log ratio as a ratio interval; supported at this T "
                f"when the interval's upper end is below {CRITIQUE}x.", "",
                "| ratio | pipeline FLOPs | stage FLOPs | wall s | seeds | below 14.8x |", "| --- | --- | --- | --- | --- | --- |"]
        for b in OFFLINE:
            r = {k: cost_ratio(rows, best, b, k) for k in ("flops", "stage_flops", "seconds")}
            txt = lambda q: (f"{q['ratio']:.2f}x" + (f" [{math.exp(q['lo']):.2f}, {math.exp(q['hi']):.2f}]"  # noqa: E731
                                                      if not math.isnan(q["half"]) else "")) if q["n"] else "—"
            out.append(f"| {LABEL[best]} / {LABEL[b]} | {txt(r['flops'])} | {txt(r['stage_flops'])} | "
                       f"{txt(r['seconds'])} | {r['flops']['n']} | {below(r['flops'])} |")
        out.append("")
        out += [line for b in RECHECKED if f"recheck_{b}" in by_T for line in recheck_markdown(rep, int(key), b)]
    out += across_T(rep)
    out += decisions_markdown(rep)
    out += ["![lift and normalised score against pipeline FLOPs](figures/matched_cost.png)", ""]
    return "\n".join(out) + "\n"


def decisions(rep: dict) -> dict:
    """The registered rules (the page's "Hypotheses", on the mean lift) applied to the T's run:
    {"H1": ..., "H1'": ..., "H2": ..., "H3": ..., "by_T": {T: {comparison: paired}}}."""
    by_T = {int(k): v for k, v in rep["by_T"].items()}
    Ts = sorted(by_T)
    fam = family(rep)   # every decision reads the Holm-corrected resolution over the family (docs/matched.md)
    comp = {T: {f"{m}-mixrl": {**fam[(T, m, "mixrl")], "resolved": fam[(T, m, "mixrl")]["resolved_holm"]}
                for m in ("mopd_kl", "mopd_pg", "mopd_topk")} for T in Ts}
    out = {"by_T": comp, "Ts": Ts, "family": fam}
    resolved = {T: c["mopd_kl-mixrl"] for T, c in comp.items() if c["mopd_kl-mixrl"]["resolved"]}
    out["H1"] = ("not contradicted: MOPD exact KL minus Mix-RL is not resolved at any T run (" + ", ".join(map(str, Ts))
                 + ") after Holm's correction; not resolved is not a tie (no equivalence margin was registered)"
                 if not resolved else
                 "contradicted at " + ", ".join(f"T = {T} (MOPD exact KL {'ahead' if p['diff'] > 0 else 'behind'})"
                                                for T, p in resolved.items()))
    ahead = all(comp[T][f"{m}-mixrl"]["hi"] < 0 for T in Ts for m in ("mopd_kl", "mopd_pg", "mopd_topk"))
    out["H1'"] = ("supported" if ahead and set(Ts) >= {100, 200, 400} else
                  "not supported" if not ahead else "not decided (not every T has run)")
    if {100, 400} <= set(Ts):
        a, b = comp[100]["mopd_kl-mixrl"], comp[400]["mopd_kl-mixrl"]
        out["H2"] = ("supported" if a["resolved"] and b["resolved"] and (a["diff"] > 0) != (b["diff"] > 0) else
                     "not resolved (signs differ; neither is resolved after Holm's correction)"
                     if (a["diff"] > 0) != (b["diff"] > 0)
                     else "not supported (the same sign at T = 100 and 400)")
    else:
        out["H2"] = "not decided (T = 100 and 400 are both needed)"
    h3 = {}
    for T, v in by_T.items():
        best = max(STUDENTS, key=lambda m: stats.mean_sd([p["lift"]["mean"] for p in v["rows"][m].values()])[0])
        r = cost_ratio(v["rows"], best, "rft")
        h3[T] = (f"not decided ({LABEL[best]} / RFT, {r['n']} seeds reached the target: no interval)" if r["n"] < 2
                 else f"{'supported' if r['below_critique'] else 'not supported'} ({LABEL[best]} / RFT, {r['n']} seeds)")
        if len(v.get("seeds_done", [])) < FIVE and "seeds_done" in v:
            h3[T] += f", a T run with {len(v['seeds_done'])} seeds: below the five-seed rule, not a finding"
    out["H3"] = "; ".join(f"T = {T}: {d}" for T, d in sorted(h3.items())) or "not decided"
    return out


def decisions_markdown(rep: dict) -> list[str]:
    d = decisions(rep)
    txt = lambda p: f"{stats.interval_text(p)}, p (Holm) {p['p_holm']:.3f}: {p['reading']}"  # noqa: E731
    m = next(iter(d["family"].values()))["m"] if d["family"] else 0
    lines = ["### Decisions against the registered hypotheses", "",
             "The rules of \"Hypotheses\" above, applied to the tables above (mean lift, paired by seed, 95% "
             f"t-intervals), with the amended multiplicity rule: a comparison is resolved only when its Holm-adjusted "
             f"p over the family of {m} is below 0.05. H4 is descriptive: read it from the rows across T.", "",
             "H1 and H2 read the first column; H1' is supported only if all three columns are resolved below 0 "
             "(Mix-RL ahead) at every T.", "",
             "| T | seeds | MOPD exact KL minus Mix-RL | MOPD-PG minus Mix-RL | MOPD-Top-k minus Mix-RL |",
             "| --- | --- | --- | --- | --- |"]
    for T in d["Ts"]:
        c = d["by_T"][T]
        lines.append(f"| {T} | {c['mopd_kl-mixrl']['n']} | {txt(c['mopd_kl-mixrl'])} | {txt(c['mopd_pg-mixrl'])} | "
                     f"{txt(c['mopd_topk-mixrl'])} |")
    lines += ["", *(f"* **{h}**: {d[h]}" for h in ("H1", "H1'", "H2", "H3")), ""]
    survive = [(k, v) for k, v in d["family"].items() if v["resolved_holm"]]
    uncorrected = [(k, v) for k, v in d["family"].items() if v["resolved"] and not v["resolved_holm"]]
    lines += ["Resolved after Holm's correction over the family of " + f"{m}: "
              + ("; ".join(f"{LABEL[a]} minus {LABEL[b]} at T = {T}, {stats.interval_text(v)} (p (Holm) {v['p_holm']:.3f}; "
                           f"{stats.holm_interval_text(v, v['alpha_holm'])}"
                           + (f", {v['n']} seeds: below the five-seed rule" if v["n"] < FIVE else "") + ")"
                           for (T, a, b), v in survive) or "none") + ".", ""]
    if uncorrected:
        lines += ["Resolved only uncorrected (each 95% interval alone excludes 0; **not** resolved over the family, "
                  "so not a finding): " + "; ".join(f"{LABEL[a]} minus {LABEL[b]} at T = {T}, {stats.interval_text(v)} "
                                                    f"(p {v['p']:.3f}, p (Holm) {v['p_holm']:.3f}; "
                                                    f"{stats.holm_interval_text(v, v['alpha_holm'])}, which includes 0)"
                                                    for (T, a, b), v in uncorrected) + ".", ""]
    return lines


def figure(rep: dict, folder: Path) -> None:
    """Mean lift and mean normalised score (± sample std over seeds) against whole-pipeline FLOPs,
    log axis, one line per method of FIGURE (the merges as the best one on val) through its
    teacher budgets T (`views.cost_curves`): the
    sample-efficiency picture and the cost argument in one."""
    panels = {"mean accuracy lift over the base": {}, "mean normalised score": {}}
    for m in FIGURE:
        for key, by_T in sorted(rep["by_T"].items(), key=lambda kv: int(kv[0])):
            per = list(by_T["rows"][m].values())
            x = fmean(p["pipeline"]["flops"] for p in per)
            for panel, f in zip(panels, (lambda p: p["lift"]["mean"], lambda p: p["all"]["mean"])):
                panels[panel].setdefault(LABEL[m], []).append((x, *stats.mean_sd([f(p) for p in per]), f"T={key}"))
    fig = views.cost_curves(panels, title="Matched RL budget T, test split, mean ± std over seeds\n"
                            "`python -m studies.matched` (docs/matched.md names each T's command)")
    plots.save(fig, "matched_cost", folder)
    plt.close(fig)


def write(rep: dict, docs: Path = DOCS, source: Path | None = None, allow_shrink: bool = False) -> None:
    """docs/matched.json, the figure, and docs/matched.md's results section (the pre-registration
    above it is kept as committed). Rendered from the JSON at `source` (--render): refused before any
    write if the page would show fewer table rows than the one there (`slices.guard_render`)."""
    page = docs / "matched.md"
    head = above_header(page.read_text(), RESULTS).rstrip() + "\n\n" if page.exists() else "# Matched RL budgets\n\n"
    text = head + results_markdown(rep)
    if source is not None:
        text = slices.guard_render(page, text, source, rep, allow_shrink)
    atomic_write(docs / "matched.json", json.dumps(rep, indent=1, default=str).encode())
    figure(rep, docs / "figures")
    page.write_text(text)


def complete(block: dict) -> bool:
    """A check's block holds every seed its command asked for, and at least the page's five."""
    return not study.unfinished(block["command"], block["seeds_done"]) and len(block["seeds_done"]) >= FIVE


def compared_rows(by_T: dict, a: str, b: str) -> tuple[dict, str | None]:
    """The rows the registered comparison a minus b reads at a T, and where from: a complete re-check
    of b there (`by_T.<T>.recheck_<b>`, holding a too) in place of the sweep's recorded rows (the
    amendment of 2026-12-06), else the sweep's (None)."""
    block = by_T.get(f"recheck_{b}")
    if block and a in block.get("rows", {}) and complete(block):
        return block["rows"], f"recheck_{b}"
    return by_T.get("rows", {}), None


def recheck_markdown(rep: dict, T: int, against: str) -> list[str]:
    """The re-check's section of docs/matched.md's Results (a function of matched.json: its block at T,
    the sweep's recorded rows there beside it, and the family of the other T)."""
    key, a, b = f"recheck_{against}", "mopd_kl", against
    by_T = rep["by_T"][str(T)]
    block = by_T[key]
    rows, seeds, recorded = block["rows"], block["seeds_done"], by_T.get("rows", {})
    used = compared_rows(by_T, a, b)[1] == key
    out = [f"{RECHECK_HEADING} {T}: {LABEL[a]} and {LABEL[b]} on fresh teachers", "",
           f"Written by `{block['command']}`, finished {block['date']}, on {machine_line(block['machine'])}. Its "
           f"registration is this page's amendment of 2026-12-06 ({RECHECKED[b]}); its data is docs/matched.json, "
           f"`by_T.{T}.{key}`, beside the sweep's recorded rows at T = {T}.", "",
           *study.unfinished(block["command"], seeds), *study.spent_line(block, RECHECK_ESTIMATE, "2026-12-06"),
           teachers_line(by_T, block, T, f"trained by this command in its own run folder (runs/{RECHECK_EXPERIMENT}/; in "
                         "slices by its set-up job, kept in docs/matched_inputs/)") + f" {LABEL[a]} and {LABEL[b]} are "
           "both trained on them, each on the sweep's grid by the same runner (bracketed past an edge, before and after "
           "the tie-break), and paired by seed: the same teachers, seeds and test prompts.", "",
           "Test split, mean ± sample std over seeds (ddof = 1), as in the T tables above.", "",
           *method_table(rep, block, (a, b)), "", *choice_lines(block, (a, b), LABEL), ""]
    per = {f"{LABEL[m]}, this re-check": rows[m] for m in (a, b)}
    per.update({f"{LABEL[m]}, the sweep's recorded run": recorded[m] for m in (a, b) if m in recorded})
    out += [f"Per seed, mean test lift (the sweep's recorded rows at T = {T}: descriptive, its own teachers):", "",
            "| method | " + " | ".join(f"seed {s}" for s in seeds) + " |", "| --- | " + " | ".join("---" for _ in seeds) + " |"]
    out += [f"| {label} | " + " | ".join(f"{v[str(s)]['lift']['mean']:.3f}" if str(s) in v else "—" for s in seeds) + " |"
            for label, v in per.items()]
    here = family(rep, {(T, a, b): rows})[(T, a, b)]
    before = family(rep, {(T, a, b): recorded})[(T, a, b)] if a in recorded and b in recorded else None
    txt = lambda f: (f"{stats.interval_text(f)} [{f['lo']:+.3f}, {f['hi']:+.3f}] (n = {f['n']}) | {f['p']:.3f} | "  # noqa: E731
                     f"{f['p_holm']:.3f} | {f['reading']}")
    out += ["", f"{LABEL[a]} minus {LABEL[b]} at T = {T}, on the mean lift (the primary metric), paired by seed: mean "
            "difference ± 95% t half-width [interval], the paired t-test's p, and its Holm adjustment over the registered "
            f"family of {here['m']} with this comparison in the place of the sweep's cell at T = {T} (the amendment of "
            "2026-12-03's rule: resolved only when p (Holm) < 0.05; no equivalence margin was registered, so nothing is "
            "called equal). The sweep's recorded cell is shown beside it.", "",
            "| comparison | mean lift | p | p (Holm) | reading (Holm) |", "| --- | --- | --- | --- | --- |",
            f"| {LABEL[a]} minus {LABEL[b]}, this re-check | {txt(here)} |"]
    if before is not None:
        out.append(f"| {LABEL[a]} minus {LABEL[b]}, the sweep's recorded run | {txt(before)} |")
    norm = study.paired_rows(rows, a, b)
    ratio = cost_ratio(rows, a, b) if all("reach" in p for m in (a, b) for p in rows[m].values()) else None
    out += ["", f"Descriptive, outside the family: the normalised score's difference {stats.interval_text(norm)} "
            f"(n = {norm['n']})" + (f"; {LABEL[a]} / {LABEL[b]} pipeline FLOPs to {rep['plan']['target']:.0%} of the "
            f"teachers' val lift, geometric mean {ratio['ratio']:.2f}x over the {ratio['n']} seeds where both reach it"
            if ratio and ratio["n"] else "") + ". H3 at this T reads the MOPD form with the highest mean lift, which "
            "the re-check does not train again: its row above stands."]
    for m in (a, b):
        if m in recorded:
            d = study.paired_rows({"here": rows[m], "recorded": recorded[m]}, "here", "recorded", "lift")
            out.append("")
            out.append(f"{LABEL[m]} here minus the sweep's recorded {LABEL[m]}, mean lift: {stats.interval_text(d)} "
                       f"(n = {d['n']}; the same grid and seeds, teachers trained again).")
    out += ["", (f"**The registered comparison at T = {T} now reads from this re-check**: {here['reading']} (p (Holm) "
                 f"{here['p_holm']:.3f}); the T = {T} paired table above and the decisions below use it." if used else
                 f"**Not in use**: {len(seeds)} seeds recorded of the amendment's {FIVE} (or of the seeds its command "
                 f"asked for), so the T = {T} paired table and the decisions keep the sweep's recorded cell."), ""]
    return out


def recheck_sections(rep: dict) -> list[str]:
    """Every re-check section of a matched.json (the whole Results page: `results_markdown`)."""
    return [line for key, by_T in sorted(rep.get("by_T", {}).items(), key=lambda kv: int(kv[0])) for b in RECHECKED
            if f"recheck_{b}" in by_T for line in recheck_markdown(rep, int(key), b)]
