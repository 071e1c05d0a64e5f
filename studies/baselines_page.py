"""The baselines study's page: docs/baselines.md's report and figures, rendered from
docs/baselines.json (`markdown`, `write`): the ranking and the resolved differences, the close
choices, the cost section, and the re-check of the edge choices (`in_use`: a complete re-check's
rows in the sweep's place, as the page and the findings read them). No training.
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
from tools.provenance import machine_line  # noqa: E402
from .study import cell, fmt_int, paired_rows, scores  # noqa: E402
from .baselines_plan import (AMENDMENT_EDGES, DOCS, DOMAINS, LABEL, MERGES, PAPER, PAPER_NAME, RECHECK_DATE,  # noqa: E402
                             RECHECK_ESTIMATE, RECHECK_EXPERIMENT, RECHECK_EXTEND, RECHECK_HEADING, RECHECK_KEY,
                             RECHECK_METHODS, RECHECK_SEEDS, TRAINED)


def recheck_complete(block: dict) -> bool:
    """Every registered seed recorded (and every seed its command asked for): only then does it decide."""
    done = {int(x) for x in block["seeds_done"]}
    return set(RECHECK_SEEDS) <= done and not study.unfinished(block["command"], block["seeds_done"])


def _plain(x):
    return json.loads(json.dumps(x, default=str))


def same_teachers(rep: dict, block: dict) -> bool:
    """The amendment's test of "the same teachers" (the page's run kept no hash): equal test accuracy at
    every length of both domains, on the same number of test prompts."""
    if block["protocol"]["test_n"] != rep["protocol"]["test_n"]:
        return False
    return all(_plain(block["refs"]["test"][t]) == _plain(rep["refs"]["test"][t]) for t in ("teacher_binding", "teacher_recall"))


def edge_decisions(rep: dict) -> dict:
    """{method: {was, chosen, moved, bracketing, lrs}} of the page's `recheck_edges` (its choices so far):
    the page's rate, the re-check's, whether it moved, and `study.bracketing` of the re-check's choice."""
    block, out = rep[RECHECK_KEY], {}
    for m in RECHECK_METHODS:
        if m in block.get("chosen", {}):
            ch, was = block["chosen"][m], rep["chosen"][m]
            out[m] = {"was": was, "chosen": ch, "moved": not math.isclose(ch, was),
                      "bracketing": study.bracketing(block["grid"][m], ch), "lrs": sorted(g["lr"] for g in block["grid"][m])}
    return out


def in_use(rep: dict) -> dict:
    """The report the page renders: a complete re-check whose choice moved, on the same teachers, puts that
    method's rows, choice, val grid and curves in the page's place (`recheck_in_use` names them); else
    the report as recorded. The findings read it too (tools/findings.py)."""
    block = rep.get(RECHECK_KEY)
    if not block or not recheck_complete(block) or not same_teachers(rep, block):
        return rep
    moved = [m for m, d in edge_decisions(rep).items() if d["moved"]]
    if not moved:
        return rep
    out = {**rep, **{k: dict(rep.get(k, {})) for k in ("rows", "chosen", "grid", "curves")}, "recheck_in_use": moved}
    for m in moved:
        for k in ("rows", "chosen", "grid"):
            out[k][m] = block[k][m]
        if m in block.get("curves", {}):
            out["curves"][m] = block["curves"][m]
    return out


def recheck_mark(rep: dict, m: str) -> str:
    """' (re-check, lr X)' beside a method whose rows are the re-check's, else ''."""
    return f" (re-check, lr {rep['chosen'][m]:g})" if m in rep.get("recheck_in_use", ()) else ""


def tuning_edges(rep: dict, edge: list[str]) -> str:
    """The "Tuning" bullet's sentence on the choices on an edge (`edge`: the methods whose chosen rate is
    at an end of the page's grid), with what the re-check decided once it is complete."""
    block = rep.get(RECHECK_KEY)
    if not block or not recheck_complete(block):
        partial = f" (the re-check of the amendment of {RECHECK_DATE} is partial: its section below)" if block else ""
        return (f"the chosen rate sits on the grid's edge for {', '.join(LABEL[m] for m in edge)}, so their optimum is "
                f"not bracketed{partial}. " if edge else "every chosen rate is inside its grid. ")
    dec = edge_decisions(rep)
    left = [LABEL[m] for m in edge if m not in dec]
    by = {k: [LABEL[m] + (f" (lr {d['chosen']:g})" if k != "bracketed" else "") for m, d in dec.items()
              if d["bracketing"] == k] for k in ("bracketed", "hard limit", "edge")}
    out = (f"the chosen rate sits on the grid's edge for {', '.join(left)}, so their optimum is not bracketed. "
           if left else "")
    said = [f"bracketed the choice of {', '.join(by['bracketed'])}"] if by["bracketed"] else []
    said += [f"left {', '.join(by['hard limit'])} on the hard limit (the ladder's end: no rate past it is tried)"] \
        if by["hard limit"] else []
    said += [f"left {', '.join(by['edge'])} on the grid's edge after its {RECHECK_EXTEND} extensions"] if by["edge"] else []
    return out + (f"{'The' if left else 'the'} re-check of the amendment of {RECHECK_DATE} (its section below) "
                  + "; ".join(said) + ". "
                  if said else "")


def recheck_section(rep: dict) -> list[str]:
    """The re-check's section of the page (a function of baselines.json as recorded: its `recheck_edges`
    beside the page's own rows); [] without one. Partial until every registered seed is in."""
    block = rep.get(RECHECK_KEY)
    if not block:
        return []
    done, seeds, dec = recheck_complete(block), block["seeds_done"], edge_decisions(rep)
    same = same_teachers(rep, block)
    test = lambda r, t, d: fmean(r["refs"]["test"][t][d].values())  # noqa: E731
    out = [f"{RECHECK_HEADING} (amendment of {RECHECK_DATE})" + ("" if done else ": partial"), "",
           f"Written by `{block['command']}`, finished {block['date']}, on {machine_line(block['machine'])}. Its "
           f"registration is this page's amendment of {RECHECK_DATE} (under Protocol); its data is docs/baselines.json, "
           f"`{RECHECK_KEY}`.", ""]
    if not done:
        out += [f"**Partial**: seeds {seeds} recorded of the registered {list(RECHECK_SEEDS)}. No choice is decided "
                "and nothing else on this page reads it; the same command continues it.", ""]
    out += study.spent_line(block, RECHECK_ESTIMATE, RECHECK_DATE, "on the shared machine it was estimated from")
    out += [f"**Teachers.** Trained by the re-check in its own run folder (runs/{RECHECK_EXPERIMENT}/; in slices by its "
            "set-up job, kept in docs/baselines_inputs/), " + ", ".join(f"{d} {t['steps']} GRPO steps at lr {t['lr']:g}, "
                                                                       f"seed {t['seed']}" for d, t in block["teacher"].items())
            + "; sha256 " + ", ".join(f"{d} {h[:16]}" for d, h in block["teacher_sha256"].items()) + ". Test accuracy, "
            "mean over the lengths, the re-check's against this page's: "
            + "; ".join(f"{d} {test(block, f'teacher_{d}', d):.3f} against {test(rep, f'teacher_{d}', d):.3f}" for d in DOMAINS)
            + ". " + ("**The same teachers** by the amendment's test (equal test accuracy at every length; this page's "
                      "run kept no hash)." if same else "**Other teachers** by the amendment's test (the test accuracies "
                                                         "differ, or were scored on another number of prompts)."), "",
            "Mean normalised val score (seed 0, val "
            f"{block['protocol']['val_n']} prompts a domain and length) at every rate tried; the choice in bold; "
            "[extended]: added by the bracketing.", "",
            "| method | this page (its run) | the re-check | decision |", "| --- | --- | --- | --- |"]
    for m, d in dec.items():
        page = "; ".join((f"**{g['lr']:g}: {g['mean']:.3f}**" if math.isclose(g["lr"], d["was"]) else
                          f"{g['lr']:g}: {g['mean']:.3f}") for g in rep["grid"][m])
        mine = "; ".join((f"**{g['lr']:g}: {g['mean']:.3f}**" if math.isclose(g["lr"], d["chosen"]) else
                          f"{g['lr']:g}: {g['mean']:.3f}") + (" [extended]" if g.get("extended") else "")
                         for g in block["grid"][m])
        where = {"bracketed": "bracketed ({} and {} tried beside it)".format(
                     *(f"{x:g}" for x in (max(x for x in d["lrs"] if x < d["chosen"]),
                                          min(x for x in d["lrs"] if x > d["chosen"])))) if d["bracketing"] == "bracketed"
                 else "", "hard limit": "on its hard limit (the ladder's end: no rate past it is tried)",
                 "edge": f"on the grid's edge after {block['protocol']['max_extend']} extensions"}[d["bracketing"]]
        moved = f"moves from {d['was']:g} to {d['chosen']:g}" if d["moved"] else f"stays at {d['chosen']:g}"
        out.append(f"| {LABEL[m]} | {page} | {mine} | " + (f"{moved}, {where}" if done else
                                                            f"partial, not decided (so far: {moved}, {where})") + " |")
    out += ["", "Mean normalised test score per seed: the re-check's rows at its choice, this page's at its own "
            "(descriptive; paired by seed, the same test prompts" + (")." if same else ", other teachers)."), "",
            "| method | rows | " + " | ".join(f"seed {x}" for x in seeds) + " | re-check minus this page |",
            "| --- | --- | " + " | ".join("---" for _ in seeds) + " | --- |"]
    for m in dec:
        mine, page = block["rows"][m], rep["rows"][m]
        diff = study.paired_rows({"a": mine, "b": page}, "a", "b")
        for who, rows_ in ((f"the re-check (lr {dec[m]['chosen']:g})", mine), (f"this page (lr {dec[m]['was']:g})", page)):
            out.append(f"| {LABEL[m]} | {who} | " + " | ".join(
                f"{rows_[str(x)]['all']['mean']:.3f}" if str(x) in rows_ else "—" for x in seeds)
                + f" | {stats.interval_text(diff) if who.startswith('the re-check') and diff['n'] else ''} |")
    if done:
        out += ["", "**Decision** (the amendment's rule):"]
        for m, d in dec.items():
            if not d["moved"]:
                then = "this page's rows stay (the same rate); the re-check's are beside them above, descriptive"
            elif same:
                then = (f"its rows on this page (the table, the paired differences and their Holm family, the ranking, "
                        f"the figures, the costs, the per-seed accuracies) and its validation grid are the re-check's at lr "
                        f"{d['chosen']:g}, marked \"(re-check, lr {d['chosen']:g})\"")
            else:
                then = "on other teachers, so this page's rows stay; the re-check's are beside them above, descriptive"
            where = {"bracketed": "bracketed", "hard limit": "on its hard limit",
                     "edge": "on the grid's edge after its extensions"}[d["bracketing"]]
            out.append(f"* **{LABEL[m]}**: the choice " + (f"moves ({d['was']:g} to {d['chosen']:g})" if d["moved"] else
                                                          f"does not move ({d['chosen']:g})") + f", {where}; {then}.")
    return out + [""]


# ---------------------------------------------------------------------------------------------
# the page and the figures
# ---------------------------------------------------------------------------------------------


def method_stats(rep: dict, m: str, part: str = "all", key: str = "mean") -> tuple[float, float, float, int]:
    per = rep["rows"][m]
    vals = [p[part][key] if key == "mean" else p[part][key]["normalised"] for p in per.values()]
    ses = [p[part]["mean_se"] if key == "mean" else p[part][key]["se"] for p in per.values()]
    mu, sd = stats.mean_sd(vals)
    return mu, sd, fmean(ses), len(vals)


def ranking(rep) -> list[str]:
    """Methods by mean normalised test score, best first (nan last)."""
    key = lambda m: -method_stats(rep, m)[0] if not math.isnan(method_stats(rep, m)[0]) else math.inf  # noqa: E731
    return sorted(rep["rows"], key=key)


def markdown(rep: dict) -> str:
    recorded, rep = rep, in_use(rep)        # a complete re-check's moved rows in the page's place (else as recorded)
    P = rep["protocol"]
    seeds = P["seeds_done"]
    out = ["# Baselines: is MOPD worth it?", "",
           "Every number on this page was written by one command, on the machine below:", "",
           "```bash", rep["command"], "```", "", *study.moved_note(rep["command"]),
           f"Machine: {machine_line(rep['machine'])}. Finished {rep['date']} after {rep['elapsed_s'] / 60:.0f} min "
           f"(runs already in runs/baselines/ are reloaded, not retrained). Seeds finished: {seeds}.", "",
           *study.unfinished(rep["command"], P["seeds_done"]),
           "## Protocol", "",
           f"* **Teachers**: one per domain, seed 0, shared by every method and seed: "
           + ", ".join(f"{d} {t['steps']} GRPO steps at lr {t['lr']:g}" for d, t in P["teacher"].items())
           + f" (from `{P['teacher_source']}`).",
           f"* **Budget of every trained method** (the course's MOPD preset): {P['steps']} optimizer steps with {P['per_domain']} prompts per domain "
           f"per step = **{P['steps'] * P['per_domain']} prompts per domain** for MOPD (1 sample each), Mix-RL and the "
           f"second stage of Cascade RL (G = 8 samples each); RFT and soft labels: the teachers sample K = {P['offline_k']} "
           f"completions of {P['offline_prompts']} prompts per domain (temperature 1), and the student trains "
           f"{P['steps']} steps of {2 * P['per_domain']} kept completions. Same LoRA (r 16, alpha 32, all linear), "
           "every adapter from B = 0 (Cascade's second stage from a copy of the first domain's teacher).",
           f"* **Search, identical for every method** (seed 0, val split, {P['val_n']} prompts per domain and length): "
           f"learning rate in {list(P['lrs'])} for each trained method (budget fixed), 3 settings per merge type; "
           "the best mean normalised val score is chosen; that seed-0 run is the seed-0 result.",
           f"* **Test**: {P['test_n']} prompts per domain and length, each method once per seed. Normalised score per domain "
           "= (model - base) / (teacher - base), on the mean accuracy over the domain's lengths.",
           "* **Uncertainty**: each cell is mean ± std over seeds (the sample std, ddof = 1; absent with one seed) and, in "
           "brackets, the binomial standard error of that score from the test sample alone "
           "(sqrt(p(1-p)/n) per length, propagated through the mean and divided by the denominator, which is taken as fixed).",
           "", *AMENDMENT_EDGES, ""]
    # denominators
    refs = rep["refs"]["test"]
    out += ["## Denominators (test)", "", "| domain | base | teacher | denominator |", "| --- | --- | --- | --- |"]
    for d in DOMAINS:
        b, t = fmean(refs["base"][d].values()), fmean(refs[f"teacher_{d}"][d].values())
        out.append(f"| {d} (L {', '.join(map(str, refs['base'][d]))}) | {b:.3f} | {t:.3f} | {t - b:+.3f} |")
    out += ["", "## The table (the paper's Table 2 at course scale)", "",
            f"Normalised score on the test split, seeds {seeds}: mean ± std over seeds (binomial SE).", "",
            "| method | binding | recall | mean | mean at train length 16 | mean held out (b 24, 32; r 24) | paper |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    order = ranking(rep)
    for m in order:
        per = rep["rows"][m].values()
        c = lambda part, key: cell([p[part][key] if key == "mean" else p[part][key]["normalised"] for p in per],  # noqa: E731
                                   [p[part]["mean_se"] if key == "mean" else p[part][key]["se"] for p in per])
        paper = f"{PAPER[m]:.3f} ({PAPER_NAME.get(m, LABEL[m])})" if m in PAPER else "—"
        label = LABEL[m] + (f" = {rep['chosen']['merge_best']['how']}" if m == "merge_best" else "") + recheck_mark(rep, m)
        out.append(f"| {label} | {c('all', 'binding')} | {c('all', 'recall')} | **{c('all', 'mean')}** | "
                   f"{c('train_L', 'mean')} | {c('held_out', 'mean')} | {paper} |")
    out += ["", "Merges of linear, cat and ties are deterministic given the teachers (shared by all seeds), so their "
            "seed std is 0 by construction; dare_ties draws its masks from the seed.", ""]
    # paired differences
    best_mopd = max(("mopd_pg", "mopd_topk", "mopd_kl"), key=lambda m: method_stats(rep, m)[0])
    k = len(seeds)
    out += ["### Which differences are resolved", "",
            "Each method minus MOPD-PG (the paper's default) and minus the best MOPD form here "
            f"({LABEL[best_mopd]}), paired by seed: the mean of the {k} per-seed differences of the mean normalised "
            f"score ± the half-width of its 95% t-interval (t = {stats.t975(k - 1) if k > 1 else float('nan'):.2f} "
            f"with {k} seeds; `mopd_mini.stats.paired`). A difference is **resolved** only when that interval "
            "excludes 0; otherwise it is *not resolved*: these seeds cannot tell the two apart, which is not the same "
            "as showing them equal.", "",
            "Multiplicity (amendment, 2026-12-03): the comparisons of this table are one family; each verdict is "
            "Holm's step-down correction of the paired t-tests' p-values over the whole family (`bench.study.family`), "
            "and a verdict that holds only uncorrected is labelled so. No equivalence margin was registered: nothing "
            "here is called equal. So *resolved* here means p (Holm) below 0.05, which is the same as the interval at Holm's "
            "level (printed in each verdict: the level at which Holm's step-down tests that comparison, "
            "`mopd_mini.stats.holm_levels`) excluding 0; the ± column is the uncorrected 95% interval.", "",
            f"| method | minus MOPD-PG | per seed | verdict | minus {LABEL[best_mopd]} | per seed | verdict |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    fam = study.family({f"{m}|{ref}": paired_rows(rep["rows"], m, ref) for m in order for ref in ("mopd_pg", best_mopd)
                        if m != ref})

    def verdict(p, ref, key=None):
        f = fam.get(key) if key else None
        at = f" ({stats.holm_interval_text(f, f['alpha_holm'], 2)})" if f is not None and f["n"] >= 2 else ""
        if f is not None and f["resolved"] and not f["resolved_holm"]:
            return (f"not resolved after Holm (p (Holm) {f['p_holm']:.2f}{at[1:-1] and '; ' + at[1:-1]}); uncorrected: "
                    + (f"better than {ref}" if p["diff"] > 0 else f"worse than {ref}"))
        if not (f["resolved_holm"] if f is not None else p["resolved"]):
            return "not resolved" + at
        return (f"better than {ref}" if p["diff"] > 0 else f"worse than {ref}") + at

    for m in order:
        cells = []
        for ref in ("mopd_pg", best_mopd):
            if m == ref:
                cells.append("— | — | —")
                continue
            p = paired_rows(rep["rows"], m, ref)
            cells.append(f"{stats.interval_text(p)} | {', '.join(f'{d:+.2f}' for d in p['per_seed'])} | "
                         f"{verdict(p, LABEL[ref], f'{m}|{ref}')}")
        out.append(f"| {LABEL[m]} | " + " | ".join(cells) + " |")
    ranked = ", ".join(f"{LABEL[m]} {method_stats(rep, m)[0]:.2f}" for m in order)
    baselines = [m for m in order if not m.startswith("mopd_")]
    held = {m: fam[f"{m}|{best_mopd}"]["resolved_holm"] for m in baselines}      # after Holm's correction
    better = [LABEL[m] for m in baselines if held[m] and paired_rows(rep["rows"], m, best_mopd)["diff"] > 0]
    worse = [LABEL[m] for m in baselines if held[m] and paired_rows(rep["rows"], m, best_mopd)["diff"] < 0]
    level = [LABEL[m] for m in baselines if not held[m]]
    out += ["", f"**Ranking as measured** (mean normalised test score): {ranked}.", "",
            f"**Against the best MOPD form ({LABEL[best_mopd]}), paired by seed, after Holm's correction: resolved better: "
            f"{', '.join(better) or 'none'}; resolved worse: {', '.join(worse) or 'none'}; not resolved: "
            f"{', '.join(level) or 'none'}.**", ""]
    above = [LABEL[m] for m in TRAINED if method_stats(rep, m)[0] > 1.0]
    t_steps = {t["steps"] for t in P["teacher"].values()}
    rl_ratio = P["steps"] / max(t_steps) if t_steps and None not in t_steps else float("nan")
    edge = [m for m in TRAINED if m in rep["chosen"] and rep["grid"].get(m)
            and rep["chosen"][m] in (min(g["lr"] for g in rep["grid"][m]), max(g["lr"] for g in rep["grid"][m]))]
    out += ["### What this setting can and cannot show", "",
            f"* **The RL budgets are not matched.** Each teacher had {max(t_steps)} GRPO steps x {P['per_domain']} prompts "
            f"x 8 samples = {max(t_steps) * P['per_domain'] * 8:,} samples of its domain; Mix-RL and Cascade RL's second "
            f"stage had {P['steps']} steps = {P['steps'] * P['per_domain'] * 8:,} samples per domain, "
            f"**{rl_ratio:.1f}x** the teachers' RL. So Mix-RL's place against MOPD here mixes the method with a larger "
            "RL budget; a comparison at the same per-domain RL budget is not on this page: it is "
            "[docs/matched.md](matched.md), pre-registered before it ran, whose Results section compares every method "
            "at equal RL budgets (its tables supersede this page's ranking for that question). "
            "A score above 1 means better than that domain's teacher"
            + (f" ({', '.join(above)} here)" if above else "") + ": RL on the reward can get there; a "
            "distilled student is trained to match its teachers, not to pass them, though at these scales a student "
            "has scored above 1 too (docs/matched.md's tables), so the scale is not a cap.",
            f"* The ranking depends on the budget: the same protocol at 50 steps (400 prompts per domain; "
            "`git show 435aea9:docs/baselines.md`) put the weight merges first and MOPD-PG last. The "
            "sample-efficiency figure shows the curves up to this budget.",
            "* The teachers are rank-16 LoRA updates of a 0.36M-parameter base, trained from the same base on two "
            "narrow tasks that do not interfere, each answer three tokens long: none of the conditions under which "
            "MOPD is argued to win (interfering domains, long answers with a sparse reward, teachers built another "
            "way) holds here. The paper's teachers are full fine-tunes of a 30B model on broad domains.",
            f"* Tuning: every method had the same {len(P['lrs'])}-point learning-rate search (trained methods) or "
            f"3-point search (each merge type), on seed 0 with {P['val_n']} val prompts per domain and length; "
            + tuning_edges(recorded, edge)
            + "Teachers are shared across seeds, so the seed std measures the students' training noise only.",
            *close_choices(rep),
            "* docs/results.md trains every MOPD form at the course preset (lr 1e-3, the notebooks' setting), on its "
            "own 200 test prompts per cell; this page trains each at the rate its val search chose. Where the two rates "
            "differ, so do the two pages' MOPD numbers: compare the two tables, not a single number across them.", ""]
    # grids
    out += ["", "## Validation grids (seed 0) and what was chosen", "",
            "Mean normalised score on val (binding, recall); the chosen setting in bold.", ""]
    for m, entries in rep["grid"].items():
        ch = rep["chosen"][m]
        cells = []
        for g in entries:
            setting = f"lr {g['lr']:g}" if "lr" in g else "w " + f"{g['w']:g}" + (f", density {g['density']:g}" if "density" in g else "")
            setting += " [extended]" if g.get("extended") else ""
            hit = (g.get("lr") == ch) if "lr" in g else all(g.get(k) == v for k, v in ch.items())
            txt = f"{setting}: {g['mean']:.2f} ({g['binding']:.2f}, {g['recall']:.2f})"
            cells.append(f"**{txt}**" if hit else txt)
        out.append(f"* {LABEL[m]}{recheck_mark(rep, m)}: " + "; ".join(cells))
    out += [f"* best merge type on val: **{rep['chosen']['merge_best']['how']}**", ""]
    out += recheck_section(recorded)
    # costs
    out += cost_section(rep)
    # figures
    out += ["## Figures", "",
            "![score by method](figures/baselines_scores.png)", "",
            "![score against cost](figures/baselines_cost.png)", "",
            "![cascade forgetting](figures/baselines_forgetting.png)", "",
            "![MOPD against Mix-RL by prompts seen](figures/baselines_efficiency.png)", "",
            "![merge sweep](figures/baselines_merge_sweep.png)", "",
            "## Per-seed test accuracies", "", "| model | seed | " + " | ".join(
                f"{d} L{L}" for d in DOMAINS for L in refs['base'][d]) + " |",
            "| --- | --- |" + " --- |" * sum(len(refs['base'][d]) for d in DOMAINS)]
    for a in ("base", "teacher_binding", "teacher_recall"):
        out.append(f"| {a} | — | " + " | ".join(f"{refs[a][d][L]:.3f}" for d in DOMAINS for L in refs['base'][d]) + " |")
    for m in rep["rows"]:
        for seed, p in rep["rows"][m].items():
            out.append(f"| {LABEL[m]}{recheck_mark(rep, m)} | {seed} | " + " | ".join(f"{p['acc'][d][L]:.3f}" for d in DOMAINS for L in refs['base'][d]) + " |")
    return "\n".join(out) + "\n"


def close_choices(rep: dict) -> list[str]:
    """A bullet naming the methods whose val choice beat the runner-up by less than one val standard
    error of a mean normalised score (binomial, at val_n prompts per length): a choice within noise."""
    P, den = rep["protocol"], rep["denominators"]
    if any(not abs(den[d]) > 1e-9 for d in DOMAINS):   # no headroom (a smoke run): no score, no SE
        return []
    # SE of the mean over domains of (accuracy - base) / denominator, at accuracy 0.75, the lengths averaged
    se = 0.5 * math.sqrt(sum((0.75 * 0.25 / (P["val_n"] * len(rep["refs"]["val"]["base"][d]))) / den[d] ** 2
                             for d in DOMAINS))
    close = []
    for m, entries in rep["grid"].items():
        if m not in TRAINED or len(entries) < 2:
            continue
        best, second = sorted((g["mean"] for g in entries), reverse=True)[:2]
        if best - second < se:
            close.append(f"{LABEL[m]} ({best - second:.3f})")
    if not close:
        return []
    return ["* The val search's margin between the chosen setting and the runner-up is below one val standard error "
            f"of the score (about {se:.3f} at {P['val_n']} prompts per length) for " + ", ".join(close)
            + ": those choices are within the val split's noise."]


def cost_means(rep, m, part):
    per = list(rep["rows"][m].values())
    keys = per[0][part].keys()
    return {k: fmean(p[part][k] for p in per) for k in keys}


def cost_section(rep: dict) -> list[str]:
    P = rep["protocol"]
    out = ["## What each method costs", "",
           f"Mean over the seeds run. Tokens are real tokens (padding not counted). FLOPs estimate: "
           f"`{cost.FORMULA}`; here N = {P['N']:,}, n = {P['n_lora']:,} (the adapter is {P['n_lora'] / P['N']:.0%} of this "
           "tiny base; on Qwen3-1.7B it is about 1%). Attention-score FLOPs, padding, evaluations and checkpointing are not counted. Wall time: the "
           "training steps (and the teachers' sampling) on this CPU, one torch thread per process, evaluations excluded; "
           "the machine ran other jobs too, so times are indicative and the FLOPs are the figure to compare. Under "
           "prefill once (train_student, train_grpo) the sampler's prompt prefill runs with grad and IS the "
           "training forward over the prompt: those tokens are counted as trained, not as sampled prefill.", "",
           "| method | stage: sampled tokens (prefill + generated) | teacher-prefilled | trained | FLOPs | wall s | "
           "whole pipeline FLOPs | whole pipeline wall s |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for m in list(TRAINED) + [f"merge_{h}" for h in MERGES]:
        s, p = cost_means(rep, m, "stage"), cost_means(rep, m, "pipeline")
        out.append(f"| {LABEL[m]}{recheck_mark(rep, m)} | {fmt_int(s.get('cost/sample_prefill_tokens', 0))} + {fmt_int(s.get('cost/generated_tokens', 0))} | "
                   f"{fmt_int(s.get('cost/teacher_prefill_tokens', 0))} | {fmt_int(s.get('cost/trained_tokens', 0))} | "
                   f"{s['flops']:.2e} | {s['seconds']:.1f} | {p['flops']:.2e} | {p['seconds']:.0f} |")
    mo, rf = cost_means(rep, "mopd_pg", "stage"), cost_means(rep, "rft", "stage")
    mp, rp = cost_means(rep, "mopd_pg", "pipeline"), cost_means(rep, "rft", "pipeline")
    rows = P["steps"] * 2 * P["per_domain"]                   # MOPD's sampled completions per run
    completion_len = mo["cost/generated_tokens"] / rows
    prompt_len = (mo["cost/teacher_prefill_tokens"] - mo["cost/generated_tokens"]) / rows  # the teacher reads both
    teacher_share = 1 - mo["flops"] / mp["flops"]
    out += ["", f"**MOPD-PG over RFT** (distillation stage alone): **{mo['flops'] / rf['flops']:.2f}x the FLOPs, "
            f"{mo['seconds'] / rf['seconds']:.2f}x the wall time**; whole pipeline (teachers included): "
            f"{mp['flops'] / rp['flops']:.2f}x FLOPs, {mp['seconds'] / rp['seconds']:.2f}x wall time. "
            "The critique reports 14.8-23.1x the training GPU-hours.", "",
            "Why the FLOPs ratio is so much smaller here, and what that does and does not say. Under this protocol both "
            f"methods train on the same {2 * P['per_domain']} completions a step, so per completion of a P-token prompt and a "
            "C-token answer MOPD pays the training pass (4N per token of P + C), the student's decode (2N per token of C) "
            "and the teacher's prefill (2N per token of P + C), about 6P + 8C (in units of N), and RFT the same training "
            "pass plus its one-off sampling spread over the rows it keeps, about 4.5P + 6C: a ratio near 1.33 "
            f"**whatever the completion length** (here C = {completion_len:.1f} tokens after a P = {prompt_len:.0f}-token "
            "prompt, measured from MOPD-PG's sampler). So the short completions explain why the *wall-time* ratio is "
            "small (decoding, which is slow per token, is nearly absent), not the FLOPs ratio. The critique's "
            "14.8-23.1x is GPU-hours, with separate teacher models, memory-bound decoding of long traces and an SFT "
            "trained at its own tuned budget; here RFT is held to MOPD's rows and steps and its teachers are adapters "
            "on the student's own base (one routed forward, no second model). This page therefore does not test the "
            "critique on its own terms. "
            f"The teachers' own GRPO runs, which both need, are {teacher_share:.0%} of MOPD's whole-pipeline FLOPs.",
            "",
            (f"**One ledger.** The teachers' counters were re-counted on {P['teacher_costs']['recounted']} by "
             f"`{P['teacher_costs']['command']}`: both teachers trained again from scratch by the code that counted "
             "the students (same config and seed; their test accuracies equal the page's to the last prompt), so every "
             "row is counted by one code version. Their wall seconds are from that re-run (a 2-core CPU shared with "
             "other work: indicative only)." if P.get("teacher_costs") else
             "**The ledger is not one code version.** The teachers' counters were recorded by the code before "
             "prefill-once (their prompt prefill counted as sampled as well as trained, every row's prompt trained), "
             "the distillation stages after it, so the teachers' share is overstated; "
             "`python -m studies.baselines --recount-teachers docs/baselines.json` re-counts them."), ""]
    return out + recheck_cost_note(rep)


def recheck_cost_note(rep: dict) -> list[str]:
    """What differs in the cost rows a complete re-check put in the page's place (`in_use`): the cost
    counting's version that counted them (their teachers included) and the machine that timed them."""
    moved = list(rep.get("recheck_in_use", ()))
    if not moved:
        return []
    block = rep[RECHECK_KEY]
    versions = sorted({cost.count_version_of(r, 1) for r in block["rows"][moved[0]].values()})
    teachers = lambda m: fmean(r["pipeline"]["flops"] - r["stage"]["flops"] for r in rep["rows"][m].values())  # noqa: E731
    names = ", ".join(LABEL[m] for m in moved)
    return [f"**The re-check's rows** ({names}, marked) were counted by version {', '.join(map(str, versions))} of "
            f"the cost counting (`mopd_mini.cost.COUNT_VERSION`: it also counts the GRPO steps that train nothing), with "
            f"the re-check's own teachers: their teachers' share of the pipeline is {teachers(moved[0]):.2e} FLOPs against "
            f"{teachers('mopd_pg'):.2e} for the other rows, whose teachers the code before that version counted. Their "
            f"stage columns count the same things as the others'; their whole-pipeline FLOPs are not comparable with "
            f"the other rows' to that difference. Their wall seconds were measured on {block['machine']['cpu']} in "
            f"slices, the others' on {rep['machine']['cpu']}: compare their FLOPs, not their seconds.", ""]


def figures(rep: dict, folder: Path) -> None:
    """The page's five figures, drawn by `mopd_mini.plots` from the view of the results that notebook
    05 draws its own from (`views.baselines_view`): one piece of plotting code for both. A complete
    re-check's moved rows are drawn in the page's place (`in_use`)."""
    rep = in_use(rep)
    view = views.baselines_view(rep)
    made_by = f"`{rep['command']}`, seeds {rep['protocol']['seeds_done']}"
    scores = {LABEL[m]: view["scores"][m] for m in ranking(rep)}                     # best first
    short = {m: LABEL[m].split(" (")[0] for m in LABEL}                           # the crowded cost panels
    panels = {panel: {short[m]: point for m, point in points.items()} for panel, points in view["cost_panels"].items()}
    efficiency = {LABEL[m]: view["curves"][m] for m in ("mopd_pg", "mopd_topk", "mopd_kl", "mixrl") if m in view["curves"]}
    drawn = {
        "baselines_scores": plots.method_bars(scores, paper={LABEL[m]: v for m, v in PAPER.items()},
                                              title=f"Normalised score on test, mean ± std over seeds\n{made_by}"),
        "baselines_cost": plots.score_vs_cost(panels, title=f"Score against cost\n{made_by}"),
        "baselines_efficiency": plots.sample_efficiency(
            efficiency, title=f"MOPD against Mix-RL, val split, mean over seeds\n{made_by}"),
        "baselines_forgetting": plots.forgetting_normalised({LABEL[m]: c for m, c in view["forgetting"].items()},
                                                 title=made_by),
        "baselines_merge_sweep": plots.merge_sweep(view["merges"], title=f"Param-Merge grid on val (seed 0)\n{made_by}"),
    }
    for name, fig in drawn.items():
        plots.save(fig, name, folder)
        plt.close(fig)


def write(rep: dict, docs: Path = DOCS, source: Path | None = None, allow_shrink: bool = False) -> None:
    """The page, the figures and the JSON into `docs`; rendered from the JSON at `source` (--render):
    refused if the page would show fewer table rows than the one there (`slices.guard_render`)."""
    saved = docs / "baselines.json"
    if RECHECK_KEY not in rep and source is None and saved.exists():     # a run of the page keeps the re-check
        kept = json.loads(saved.read_text()).get(RECHECK_KEY)
        rep = {**rep, RECHECK_KEY: kept} if kept else rep
    text = markdown(rep)
    if source is not None:
        text = slices.guard_render(docs / "baselines.md", text, source, rep, allow_shrink)
    figures(rep, docs / "figures")
    (docs / "baselines.md").write_text(text)
    atomic_write(docs / "baselines.json", json.dumps(rep, indent=1, default=str).encode())
