"""The regime study's page: docs/regimes.md's "## Results" section and docs/figures/regimes_arm*.png,
rendered from docs/regimes.json (`render`; `python -m studies.regimes --render`): each arm's tables,
gates and decisions (from studies.regimes_report), the hand-written Readings with their marked
findings filled from the JSON, the deviations, and the course-setting check's section (studies.cures).
"""

from __future__ import annotations

import math
from pathlib import Path
from statistics import fmean

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from mopd_mini import stats, views  # noqa: E402
from mopd_mini.domains import get_domains  # noqa: E402

from . import slices, study  # noqa: E402
from .cures import STUCK_STEPS, cures_sections  # noqa: E402
from .findings import fill  # noqa: E402  (the Readings' marked findings, rendered from the JSON)
from .study import RESULTS  # noqa: E402
from tools.provenance import above_header  # noqa: E402
from .regimes_arms import Arm, ARMS, CHOICE_KEY, DOCS, in_variants  # noqa: E402
from .regimes_report import (acc, arm_records, ArmReport, comparison, complete, decisions, decisions_cures,  # noqa: E402
                             FAMILY_NOTE, gate_passing, gate_value, interval, kl_positions, MEASURE_NAMES,
                             MEASURES, metric, MOPD_KEYS, ms, REGISTERED, Store, tested, view)


def accuracy_table(rep: ArmReport) -> list[str]:
    lines = []
    n = next(r["n"] for per in rep.runs.values() for rec in per.values() for r in rec["test"])
    for d, parts in rep.held.items():
        L = lambda p: ", ".join(map(str, parts[p]))  # noqa: E731
        lines += [f"**{d}** (test, {n} prompts a length; held-in depths/lengths {L('held-in')}, held-out {L('held-out')}): "
                  "accuracy, absolute lift over the base, normalised score (lift / the teacher's lift, where that "
                  "is above 0.10 at every seed), mean ± sample std over the seeds", "",
                  "| method | seeds | acc held-in | acc held-out | acc all | lift held-in | lift held-out | lift all | "
                  "normalised all |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for k, m in rep.methods.items():
            if k not in rep.runs:
                why = "failed at its budget" if k in rep.failed else "not run"
                lines.append(f"| {m.label} | 0 ({why}) | | | | | | | |")
                continue
            cells = [ms(rep.per_seed(k, d, parts[p])) for p in ("held-in", "held-out", "all")]
            cells += [ms(rep.lift(k, d, parts[p])) if k != "base" else "" for p in ("held-in", "held-out", "all")]
            norm = rep.normalised(k, d, parts["all"]) if k != "base" else None
            lines.append(f"| {m.label} | {len(rep.runs[k])} | " + " | ".join(cells) + f" | {ms(norm) if norm else ''} |")
        lines.append("")
    return lines


def depth_table(rep: ArmReport) -> list[str]:
    arm = rep.arm
    dom = get_domains(arm.domains)
    keys = ["acc"] + (["trace", "steps", "hops", "words"] if "chain" in dom else []) + \
        (["map"] if "conflict" in dom else []) + (["copy"] if "memory" in dom else [])
    cols = [(d, L) for d, x in dom.items() for L in x.eval_lengths]
    lines = ["By length (test, mean over the seeds run): acc is the domain's metric; for chain trace (the prefix trace: the "
             "whole trace right as a prefix, which a right trace that keeps going passes), steps (`trace_steps`), hops (`chain_steps`), words (the answer's length in words; a depth-L gold trace has L + 1); conflict map (says the memorised value); memory copy "
             "(says a context value).", "",
             "| method | measure | " + " | ".join(f"{d} {L}" for d, L in cols) + " |",
             "| --- | --- |" + " --- |" * len(cols)]
    for k, m in rep.methods.items():
        if k not in rep.runs:
            continue
        for key in keys:
            vals = []
            for d, L in cols:
                v = [acc(r, d, (L,), key) for r in rep.runs[k].values()]
                v = [x for x in v if not math.isnan(x)]
                vals.append(f"{fmean(v):.2f}" if v else "")
            if any(vals):
                lines.append(f"| {m.label} | {key} | " + " | ".join(vals) + " |")
    return lines + [""]


def cost_table(rep: ArmReport) -> list[str]:
    lines = ["Cost per seed (mean over the seeds run; `mopd_mini.cost`: the method's own stage, and its pipeline with "
             "the teachers it reads; FLOPs by cost.FORMULA), and wall time of the job (training, reloading what it "
             "reads, evaluating).", "",
             "| method | generated tokens | teacher prefill tokens | trained tokens | stage FLOPs | pipeline FLOPs | "
             "train s | job wall s |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for k, m in rep.methods.items():
        per = rep.runs.get(k)
        if not per or m.trainer == "base":
            continue

        def mean(f):
            return fmean(f(s, r) for s, r in per.items())
        c = lambda kind: mean(lambda s, r: r["cost"].get(f"cost/{kind}", 0))  # noqa: E731
        lines.append(f"| {m.label} | {c('generated_tokens'):,.0f} | {c('teacher_prefill_tokens'):,.0f} | "
                     f"{c('trained_tokens'):,.0f} | {mean(lambda s, r: rep.costs(k, s)[0]['flops']):.2e} | "
                     f"{mean(lambda s, r: rep.costs(k, s)[1]['flops']):.2e} | "
                     f"{mean(lambda s, r: r['train_seconds']):.0f} | {mean(lambda s, r: r['wall_seconds']):.0f} |")
    return lines + [""]


def markdown(data: dict, arm: Arm, figures: list[str]) -> list[str]:
    rep = ArmReport(data, arm, seeds=arm.seeds)
    title = f"### Arm {arm.number}: {arm.title}"
    if not rep.runs:
        return [title, "", "**Not run**: no job of this arm finished (docs/regimes.json holds none).", ""]
    if arm.grids:
        return cures_markdown(data, arm, figures)
    lines = head_lines(data, arm, rep)
    g = rep.gate
    if g:
        tries = "; ".join(f"{t['adapter']} ({t['steps']} steps): {t['val']:.3f}" for t in g["tries"])
        lines += [f"**Gate {g['name']}** (seed 0, val, {g['domain']} at {', '.join(map(str, g['lengths']))}, "
                  f">= {g['threshold']:.2f}): {tries}: **{'passed' if g['passed'] else 'failed'}**"
                  + (" ; every try failed, so the registered fall-back ran (SFT-on-gold adapters; the interference "
                     "test is SFT on gold, each domain alone against both at once)." if g.get("fallback") else "."), ""]
        lines += gate_check_by_seed(data, arm)
    merges = {k.split("|")[1]: v for k, v in data["merges"].items() if k.startswith(f"{arm.number}|")}
    if merges:
        lines += ["Merge weights chosen on val at seed 0 (mean val accuracy over the domains; conflict has no headroom, "
                  "so the normalised score cannot choose): " + "; ".join(
                      f"{k} w = {v['w']:g} (val " + ", ".join(f"{w}: {a:.3f}" for w, a in v["val"].items()) + ")"
                      for k, v in merges.items()), ""]
    lines += accuracy_table(rep) + depth_table(rep)
    rows, out = decisions(rep)
    lines += ["Pre-registered comparisons: paired per-seed differences, mean ± 95% t half-width [interval] "
              "(`mopd_mini.stats.paired`, t = 4.30 with 3 seeds), on test accuracy (the mean over the lengths named).",
              "", FAMILY_NOTE.format(names=", ".join(k for k in out["family"])), "",
              *study.DecisionRows.HEAD, *rows, "",
              "Decisions against the hypotheses as registered (from the table above, after Holm's correction): "
              + "; ".join(f"**{h}** {v}" for h, v in out.items() if h != "family") + ".", ""]
    lines += five_seed_check(data, arm, out)
    if arm.number == 2:
        lines += per_seed_table(data, arm)
    lines += READING.get(arm.number, [])
    lines += cost_table(rep)
    if arm.number == 2 and "mopd_kl" in rep.runs:
        lines += kl_table(rep)
    lines += [f"![arm {arm.number}](figures/{f})" for f in figures] + [""]
    return lines


def head_lines(data: dict, arm: Arm, rep: ArmReport) -> list[str]:
    """An arm's section up to its tables: title, commands, machine, what finished, what failed."""
    inv = data["invocations"].get(str(arm.number), [])
    lines = [f"### Arm {arm.number}: {arm.title}", ""]
    for i in inv:
        if i["wall_seconds"] is not None:
            took = f"{i['wall_seconds'] / 60:.1f} min"
        else:   # stopped before its end: the time to the last job it finished
            ends = [r["finished_at"] for per in rep.runs.values() for r in per.values()
                    if r.get("finished_at", 0) >= i["started"]]
            took = f"stopped before its end; its last job finished after {(max(ends) - i['started']) / 60:.1f} min" \
                if ends else "stopped before its end, no job finished"
        lines.append(f"*Command:* `{i['command']}` ({i['date']}, {took}, seeds {', '.join(map(str, i['seeds']))})  ")
    if inv:
        lines.append(f"*Machine:* {inv[-1]['machine']}")
    for s in data.get("slices", {}).get(str(arm.number), []):   # the time-boxed slices (run_sliced)
        lines.append(f"*Slice:* `{s['command']}` ({s['date']}, {s['wall_seconds'] / 60:.1f} min, {s['finished']} jobs "
                     f"finished, {s['stopped']} stopped at its deadline; {s['machine'].split(';')[0]})  ")
    if arm.grids:                   # what the jobs cost, to set against the registered estimate (Budget above)
        recs = arm_records(data, arm)
        spent = {sec: sum(r.get("wall_seconds") or 0.0 for k, r in recs.items() if k.startswith(sec + "|")) / 3600
                 for sec in ("choices", "runs")}
        if recs:
            lines.append(f"*Spent:* {sum(spent.values()):.2f} CPU-h in {len(recs)} recorded jobs (each job's wall "
                         f"time on one core: the val choice {spent['choices']:.2f}, the seeds {spent['runs']:.2f}), "
                         "against the estimate in the budget table above  ")
    expected = [(k, s) for k in rep.methods for s in arm.seeds]
    missing = [f"{k} seed {s}" for k, s in expected if s not in rep.runs.get(k, {}) and s not in rep.failed.get(k, {})]
    lines += ["", f"Finished: {sum(len(v) for v in rep.runs.values())} of {len(expected)} (method, seed) jobs of "
              f"the registered {len(arm.seeds)} seeds." + (f" **Not finished** (absent from every table below): "
                                                          f"{', '.join(missing)}." if missing else ""), ""]
    for k, per in rep.failed.items():
        for seed, r in sorted(per.items()):
            lines += [f"**{rep.methods[k].label}, seed {seed}, failed at its registered budget** (the trainer "
                      f"refused; no result): {r['failed']}", ""]
    return lines


def setting_text(setting: dict) -> str:
    return ", ".join(f"{k} {v:g}" for k, v in sorted(setting.items())) or "as registered"


def choice_table(data: dict, arm: Arm) -> list[str]:
    """Every gridded method's chosen setting and its grid on val (study.choose's record)."""
    rec = data["choices"].get(str(arm.number))
    if rec is None:
        return []
    lines = [f"Settings chosen on val by the study runner (seed 0; a two-seed mean where the tie-break trained seed 1; "
             f"* an extension past the grid's edge; recorded {rec.get('date', '')}, {rec.get('machine', '')}):", "",
             "| method | chosen | val score of each setting tried |", "| --- | --- | --- |"]
    for k, chosen in rec["chosen"].items():
        tried = "; ".join(f"{setting_text({x: g[x] for x in g if x in ('lr', 'beta')})}: {g['mean']:.3f}"
                          + (f" (two seeds {g['mean2']:.3f})" if "mean2" in g else "") + ("*" if g.get("extended") else "")
                          for g in rec["grid"].get(k, []))
        lines.append(f"| {k} | {setting_text(chosen)} | {tried} |")
    if rec.get("refused"):
        lines += ["", "Refused by the trainer (scored 0 in the choice): " + "; ".join(f"{k}: {v}" for k, v in rec["refused"].items())]
    return lines + [""]


def cures_markdown(data: dict, arm: Arm, figures: list[str]) -> list[str]:
    """Arm 2b's or memory-cures' section: the choice, the gate on every seed, by depth, per seed,
    the stuck shares, the decisions (Holm over the registered family), the costs, the figures."""
    every = ArmReport(data, arm, seeds=arm.seeds)
    g = arm.gate_every_seed
    values, passing = gate_passing(data, arm)
    d = arm.domains[0]
    dom = get_domains(arm.domains)[d]
    lines = head_lines(data, arm, every) + choice_table(data, arm)
    lens = dom.eval_lengths
    cols = [(key, x) for key in MEASURES.get(d, ("acc",)) for x in lens] + ([("words", lens[0])] if d == "chain" else [])
    if not complete(every):          # partial, on purpose: the records so far, no decision, interval or figure
        return lines + ["**Partial** (the arm runs in slices, `python -m studies.regimes --status` says what is left): "
                        "until every registered seed of every method is recorded this section shows the records so "
                        "far and nothing read from them: no mean, no interval, no decision, no figure.", "",
                        *gate_line(g, values, None, every), *per_seed_table_rows(every, d, cols, passing, g)]
    rep = tested(data, arm)
    lines += gate_line(g, values, rep, every)
    lines += [f"By length (test, the mean over the seeds that pass the gate; {d} compared at "
              f"{', '.join(map(str, arm.compared))}, held out {', '.join(map(str, dom.held_out)) or 'none'}):", "",
              "| method | measure | " + " | ".join(f"{d} {x}" for x in lens) + " |", "| --- | --- |" + " --- |" * len(lens)]
    for k, m in rep.methods.items():
        for key in MEASURES.get(d, ("acc",)):
            vals = [rep.per_seed(k, d, (x,), key) for x in lens]
            if k in rep.runs:
                lines.append(f"| {m.label} | {MEASURE_NAMES[key]} | " + " | ".join(
                    ms(v) if v else "" for v in vals) + " |")
    lines += ["", *per_seed_table_rows(every, d, cols, passing, g)]
    lines += ["", f"The stuck detector per MOPD method and seed (p_S(y) > 0.9 and log p_T(y) < -5; at steps "
              f"{', '.join(map(str, STUCK_STEPS))} and the last: the share (its mean over the 10 steps ending there); "
              "off: the off-support mass; '-' where the run has no such step):", "",
              "| method | seed | " + " | ".join(f"step {x}" for x in STUCK_STEPS) + " | last | last step |",
              "| --- | --- |" + " --- |" * (len(STUCK_STEPS) + 2)]
    for k in MOPD_KEYS:
        if k in every.runs:
            lines += study.stuck_rows(every.methods[k].label, {s: r.get("stuck") for s, r in every.runs[k].items()},
                                      STUCK_STEPS, d)
    rows, out = decisions_cures(rep)
    lines += ["", f"Pre-registered comparisons over the seeds that pass gate {g.name} (paired per-seed differences, mean ± "
              f"95% t half-width [interval], `mopd_mini.stats.paired`). Family: {', '.join(out['family'])}, Holm's "
              "step-down (`mopd_mini.stats.holm`) of the paired t-test against 0; a row is decided only when its Holm-"
              "adjusted p is below 0.05. No equivalence margin was registered: nothing is called equal.", "",
              *study.DecisionRows.HEAD, *rows, "",
              "Decisions against the hypotheses as registered: "
              + "; ".join(f"**{h}** {v}" for h, v in out.items() if h != "family") + ".", ""]
    lines += cost_table(rep) if rep.runs else []
    if any(f.endswith("_stuck.png") for f in figures):
        lines += ["The stuck-share figure draws each MOPD record's per-step series (`stuck_series`): one panel per "
                  "method, one line per recorded seed, dashed where the seed fails the gate; the dotted line is the "
                  "warning's share; gaps are off-policy steps of lmbda < 1, which have no share. It is descriptive: "
                  "the registered reading of the share is H2b.2's above.", ""]
    lines += [f"![arm {arm.number}](figures/{f})" for f in figures] + [""]
    return lines


def gate_line(g: study.Gate, values: dict, rep: ArmReport | None, every: ArmReport) -> list[str]:
    """The gate read on every recorded seed, and (`rep`: the tested report) the seeds it leaves."""
    tested_ = ("" if rep is None else f" Seeds tested: {', '.join(map(str, rep.seeds)) or 'none'}"
               + (" (fewer than 3: every hypothesis is descriptive)." if len(rep.seeds) < 3 else "."))
    return [f"**Gate {g.name} on every seed** ({every.methods[g.method].label} on val, "
            f"{MEASURE_NAMES[metric(every.arm)] if g.domain in CHOICE_KEY else 'accuracy'} "
            f"at each of {', '.join(map(str, g.lengths))}, >= {g.threshold:.2f}; a failing seed is excluded from every "
            f"test, all its methods): " + ("; ".join(study.gate_lines(g, values)) or "no seed recorded yet") + "." + tested_, ""]


def per_seed_table_rows(every: ArmReport, d: str, cols: list, passing, g: study.Gate) -> list[str]:
    """The per-seed table (test): every recorded seed of every method, a seed that fails the gate marked."""
    lines = ["Per seed (test, every recorded seed; a seed that fails the gate is marked and excluded from the "
             "tests): " + ", ".join(f"{MEASURE_NAMES[key]} at {x}" for key, x in cols) + ".", "",
             "| method | seed | " + " | ".join(f"{MEASURE_NAMES[key]} {x}" for key, x in cols) + " |",
             "| --- | --- |" + " --- |" * len(cols)]
    for k, m in every.methods.items():
        for seed, r in sorted(every.runs.get(k, {}).items()):
            mark = "" if seed in passing else f" (fails {g.name})"
            lines.append(f"| {m.label} | {seed}{mark} | " + " | ".join(
                f"{v:.3f}" if not math.isnan(v := acc(r, d, (x,), key)) else "" for key, x in cols) + " |")
    return lines + [""]


def five_seed_check(data: dict, arm: Arm, registered: dict) -> list[str]:
    """The comparisons again over every recorded seed, when there are more than the registered 3
    (the matched study's rule: five seeds before a comparison is stated as a finding in a notebook summary or
    the README). The registered decisions above stay those of seeds 0, 1, 2."""
    rep = ArmReport(data, arm, seeds=None)
    extra = [s for s in rep.seeds if s not in REGISTERED]
    if not extra:
        return []
    complete = [k for k in rep.methods if set(rep.runs.get(k, {})) >= set(rep.seeds)]
    rows, out = decisions(rep)
    if arm.number != 2:   # the registered run's H1.2 / H1.3 comparisons, descriptive here if H1.1 is not shown again
        shown = [d for d in arm.domains if f"on {d}" in registered["H1.1"]
                 and f"on {d}" not in out["H1.1"]]
        for d in shown:
            for a, b in (("mopd_kl", "mixrl"), ("mopd_pg", "mixrl"), ("mopd_topk", "mixrl"), ("rft", "mixrl"),
                         ("mopd_kl", "rft"), ("mopd_kl", arm.teacher_of[d])):
                rows.append(f"| (the registered H1.2 / H1.3 comparisons, descriptive) {rep.methods[a].label} minus "
                            f"{rep.methods[b].label} on {d} | {interval(comparison(rep, a, b, d, rep.held[d]['all']))} "
                            "| descriptive | descriptive |")
    t = stats.t975(len(rep.seeds) - 1)
    per_seed = []
    if arm.number != 2:
        per_seed = ["Test accuracy per seed (all lengths), the methods those comparisons read:", "",
                    *study.seed_header(["method", "domain"], rep.seeds)]
        for d in arm.domains:
            for k in (arm.teacher_of[d], "mixrl", "mopd_kl", "mopd_pg", "mopd_topk", "rft"):
                per_seed.append(study.seed_row([rep.methods[k].label, d], rep.per_seed(k, d, rep.held[d]["all"]), rep.seeds))
        per_seed.append("")
    return [f"**The {len(rep.seeds)}-seed check** (seeds {', '.join(map(str, rep.seeds))}; seeds "
            f"{', '.join(map(str, extra))} added after the registered run, by the same command with `--seeds "
            f"{' '.join(map(str, rep.seeds))}`; methods with every seed: {len(complete)} of {len(rep.methods)}): the "
            f"same comparisons and rules, t = {t:.2f}. The registered decisions are those above.", "",
            *study.DecisionRows.HEAD, *rows, "",
            f"Decisions with {len(rep.seeds)} seeds: " + "; ".join(f"**{h}** {v}" for h, v in out.items()
                                                                  if h != "family") + ".", "",
            *per_seed]


def gate_check_by_seed(data: dict, arm: Arm) -> list[str]:
    """The gate's value on every recorded seed (the registration checks seed 0 only): the gate's
    method's val accuracy at the gate's lengths, each seed marked passed or failed."""
    rep = ArmReport(data, arm, seeds=None)
    g = arm.gate
    per = rep.runs.get(g.method, {})
    if len(per) < 2:
        return []
    vals = {s: gate_value(r, g) for s, r in sorted(per.items())}
    failed = [s for s, v in vals.items() if v < g.threshold]
    return [f"The gate's value on every seed (registered on seed 0 only; the same measure, {rep.methods[g.method].label} "
            f"on val {g.domain} at {', '.join(map(str, g.lengths))}): "
            + ", ".join(f"seed {s} {v:.3f} ({'passes' if v >= g.threshold else '**fails**'})" for s, v in vals.items())
            + (f". **Seed(s) {', '.join(map(str, failed))} fail the gate**: their results below come from a "
               f"{rep.methods[g.method].label.split(' (')[0]} the gate would not have passed, and a mean over seeds "
               "that includes them is not a reading of the gated method." if failed else ".") , ""]


def per_seed_table(data: dict, arm: Arm) -> list[str]:
    """Arm 2's per-seed values where a mean over seeds hides one seed: held-in accuracy, depth 2's
    accuracy, trace and words (a right trace that does not stop scores 0), depth 5's accuracy."""
    rep = ArmReport(data, arm, seeds=None)
    cols = [("held-in acc", (2, 3), "acc"), ("depth 2 acc", (2,), "acc"), ("depth 2 trace", (2,), "trace"),
            ("depth 2 words", (2,), "words"), ("depth 4 acc", (4,), "acc"), ("depth 5 acc", (5,), "acc")]
    lines = ["Per seed (test, every recorded seed; the means above can hide one seed): " + ", ".join(c for c, _, _ in cols)
             + ". A depth-2 gold trace has 3 words; a right trace written past its period scores trace 1 and acc 0.",
             "", *study.seed_header(["method", "measure"], rep.seeds)]
    for k in ("sft_teacher", "mopd_kl", "sft_traces", "rft", "sft_gold"):
        if k not in rep.runs:
            continue
        for name, lengths, key in cols:
            lines.append(study.seed_row([rep.methods[k].label, name], rep.per_seed(k, "chain", lengths, key), rep.seeds))
    return lines + [""]


def kl_table(rep: ArmReport) -> list[str]:
    P = kl_positions(rep)
    lines = ["MOPD's per-token reverse KL to the SFT teacher along the student's own sample (the trainer's 4 tracked "
             "depth-2 test prompts, sampled at each tracked step; at each position the mean over the seeds, with the "
             "median and the maximum over the seeds beside it: mean (median, max); a mean far above its median is one "
             "seed's value averaged). On a depth-2 gold trace position 0 is the start node, 1 the first hop, 2 the "
             "answer, 3 the period, 4 the end of turn; a cell past 4 exists only where the student wrote a longer "
             "completion.", "",
             "| loss | step | " + " | ".join(f"pos {i}" for i in range(P)) + " |", "| --- | --- |" + " --- |" * P]
    for loss in ("pg", "topk", "kl"):
        per = rep.runs.get(f"mopd_{loss}", {})
        steps = sorted({int(s) for r in per.values() if r.get("kl_along") for s in r["kl_along"]})
        for st in steps:
            cells = []
            for i in range(P):
                v = [r["kl_along"][str(st)]["kl"][i] for r in per.values()
                     if r.get("kl_along") and str(st) in r["kl_along"] and len(r["kl_along"][str(st)]["kl"]) > i]
                sp = stats.spread(v)
                cells.append(f"{sp['mean']:.3f} ({sp['median']:.3f}, {sp['max']:.3f})" if v else "")
            lines.append(f"| {loss} | {st} | " + " | ".join(cells) + " |")
    return lines + [""]


def figures(v: dict, arm: Arm, folder: Path, draw: bool = True) -> list[str]:
    """The arm's figures, drawn by mopd_mini.views from its view(): lift by domain, lift against
    pipeline FLOPs; for the cures' arms the stuck share per method and seed; for arm 2 accuracy by
    depth and the per-token KL early and late. `draw=False`: their names only (nothing drawn)."""
    if not v["methods"]:
        return []
    drawn = [(views.regime_lift, "lift"), (views.regime_cost, "cost")]
    if v.get("stuck", {}).get("methods"):
        drawn.append((views.regime_stuck, "stuck"))
    if arm.number == 2:
        drawn.append((views.regime_depth, "depth"))
        if v["kl"]:
            drawn.append((views.regime_kl, "kl"))
    if draw:
        folder.mkdir(parents=True, exist_ok=True)
    return [_save(fig(v), folder, f"regimes_arm{arm.number}_{name}.png") if draw else f"regimes_arm{arm.number}_{name}.png"
            for fig, name in drawn]


def _save(fig, folder: Path, name: str) -> str:
    fig.savefig(folder / name, dpi=110)
    plt.close(fig)
    return name


READING = {   # hand-written for the recorded runs (2026-12-02; re-read 2026-12-03 against the per-seed rows and
    # Holm's correction); each sentence names its table. Sentences marked "not a finding" say what seeds did.
    2: ["**Reading** (hand-written for the runs recorded on 2026-12-02, re-read 2026-12-03, from this arm's tables; "
        "the decisions are the Holm-corrected ones of the comparison table, and a sentence marked *not a finding* "
        "says what particular seeds did):",
        "",
        "* The SFT teacher is right at the trained depths on seeds 0-3 (0.980-1.000 held-in, per-seed table) and at "
        "neither held-out depth (0.003 ± 0.004 over seeds 0-2, chain accuracy table); by length it writes 1.99 words "
        "at depth 4, where a depth-4 trace has 5 (by-length table). Seed 4's SFT teacher is at 0.485 held-in and "
        "fails gate G2 on val (0.495 against 0.80, gate line), which was checked on seed 0 only: the 5-seed check "
        "includes a seed whose teacher the gate would have stopped (*not a finding*: what seed 4 did).",
        "* At depth 4 the teacher scores 0.00 and every student built from it or from the gold but MOPD-PG is at "
        "0.00-0.01 (by-length table), so the depth-4 rows of H2.2 and H2.3 compare near-zero accuracies: their "
        "\"supported\" by the rule is descriptive, not a finding. MOPD-PG's +0.090 there is its 0.09 at depth 4, below "
        "the 0.20 chance level H2.1 uses.",
        "* GRPO writes about one word at every depth (words 1.00-1.11, by-length table) and scores 0.12-0.17 at "
        "every depth: on the final-answer reward it learned to answer without the trace, and after Holm's correction "
        "<!-- finding: regimes/2/H2.1 -->x<!-- /finding -->",
        "* MOPD exact KL's seeds do different things (per-seed table; *not a finding*): seeds 0 and 3 match the "
        "teacher at the trained depths and score 0.00 at depths 4 and 5; seed 1 writes the right depth-2 trace and "
        "does not stop (trace 1.00, acc 0.00, 6 words at depth 2), so the by-length table's depth-2 \"acc 0.66, trace "
        "1.00\" is seed 1's over-running averaged with two seeds that stop; seed 1 also writes the full path at depth "
        "5 (0.875), so the \"depth 5 is a one-lookup shortcut\" reading does not hold for it; seed 2 reaches 0.380 at "
        "depth 5; seed 4 follows its failed-gate teacher (0.460 held-in). <!-- finding: regimes/2/H2.2 -->x<!-- "
        "/finding --> <!-- finding: regimes/2/H2.3 -->x<!-- /finding -->",
        "* At the period (position 3): <!-- finding: regimes/2/kl/kl/300/3 -->x<!-- /finding --> The max is seed "
        "1's, averaged into the mean (median far below it): late in training the KL is near 0 at every position for "
        "seeds 0 and 2, and at the period seed 1's is large, the stop decision behind its depth-2 acc 0.00 (*not a "
        "finding*). MOPD Top-k scores 0.000 at every depth on every seed and MOPD-PG 0.128 ± 0.017 overall (chain "
        "accuracy table), each at the one preset learning rate: the loss forms and their rate are confounded, so "
        "these rows do not say which form suits the task.",
        "* Off-policy SFT on the teacher's sampled traces reaches 0.975 ± 0.026 held-in (chain accuracy table) at "
        "0.82x MOPD exact KL's pipeline FLOPs (4.29e+11 against 5.24e+11, cost table). No registered hypothesis "
        "compares the two: this is not a finding that it did as well as MOPD.",
        "* The 5-seed check, after Holm's correction: <!-- finding: regimes/2/H2.1@5 -->x<!-- /finding --> <!-- "
        "finding: regimes/2/H2.2@5 -->x<!-- /finding --> <!-- finding: regimes/2/H2.3@5 -->x<!-- /finding --> Its "
        "seed 4 fails gate G2.",
        ""],
    1: ["**Reading** (hand-written for the runs recorded on 2026-12-02, re-read 2026-12-03, from this arm's tables):",
        "",
        "* <!-- finding: regimes/1/H1.1 -->x<!-- /finding --> Mix-RL minus each teacher: <!-- finding: "
        "regimes/1/cmp/mixrl-teacher_conflict/conflict -->x<!-- /finding --> <!-- finding: "
        "regimes/1/cmp/mixrl-teacher_memory/memory -->x<!-- /finding --> What the tables do show is the memory "
        "teacher losing conflict: 0.056 ± 0.029 against the base's 0.994 (conflict accuracy table), while Mix-RL, "
        "trained on both, keeps conflict at 1.000 ± 0.001 and reaches 0.494 ± 0.305 on memory against the memory "
        "teacher's 0.564 ± 0.166 (memory accuracy table). Seed 2's memory teacher fails gate G1 on val (0.325 "
        "against 0.50, gate line), which was checked on seed 0 only.",
        "* MOPD exact KL and RFT score as their teachers do on each domain's accuracy table (conflict 1.000, memory "
        "0.564 ± 0.167 and 0.567 ± 0.165 against the memory teacher's 0.564 ± 0.166; both accuracy tables); no "
        "comparison with the teacher or margin was registered for them, so this is the tables' means, not a "
        "finding that they reach it; MOPD Top-k scores 0.000 on memory and MOPD-PG 0.105 ± 0.032 (memory "
        "accuracy table). H1.2 and H1.3 are not tested (their rule needs H1.1 shown).",
        "* The merges lose conflict: linear 0.470 ± 0.072, cat 0.841 ± 0.023 (conflict accuracy table; merge linear "
        "minus teacher_conflict -0.530 ± 0.180, comparison table).",
        ""],
}
READING["1b"] = [
    "**Reading** (hand-written for the runs recorded on 2026-12-02, re-read 2026-12-03, from this arm's tables; "
    "the registered 3-seed decisions are Holm-corrected over the arm's family of 4):",
    "",
    "* With the registered 3 seeds, after Holm's correction: <!-- finding: regimes/1b/H1.1 -->x<!-- /finding --> "
    "<!-- finding: regimes/1b/cmp/mixrl-teacher_memory/memory -->x<!-- /finding --> <!-- finding: "
    "regimes/1b/H1.2 -->x<!-- /finding --> <!-- finding: regimes/1b/cmp/mopd_kl-mixrl/recall -->x<!-- /finding "
    "--> <!-- finding: regimes/1b/H1.3 -->x<!-- /finding --> RFT is above Mix-RL on memory and below it on "
    "recall: <!-- finding: regimes/1b/cmp/rft-mixrl/recall -->x<!-- /finding --> <!-- finding: "
    "regimes/1b/cmp/mopd_kl-rft/memory -->x<!-- /finding --> By the amended rule that is not \"the simple method "
    "did as well\".",
    "* The 5-seed check does not confirm the interference: <!-- finding: "
    "regimes/1b/cmp/mixrl-teacher_memory/memory@5 -->x<!-- /finding --> <!-- finding: regimes/1b/H1.1@5 -->x<!-- "
    "/finding --> So the 3-seed H1.1 and H1.2 decisions above are not findings. The per-seed table shows why: "
    "the memory teacher's own RL run reached 0.180 on seed 3 (0.372-0.674 on the others) while Mix-RL reached "
    "0.627 there, and the gate line shows seeds 2 and 3's memory teachers failing gate G1 on val (0.325 and "
    "0.185 against 0.50; the gate was checked on seed 0 only). MOPD exact KL is within 0.02 of its memory "
    "teacher on every seed (per-seed table; the interval of the difference allows -0.008 to +0.012, 5-seed "
    "table). What these runs measure is how often each RL run learns the memorised map, not a resolved cost of "
    "training the two domains together.",
    "* At 5 seeds MOPD-PG and MOPD-Top-k are below Mix-RL on memory (descriptive, uncorrected: <!-- finding: "
    "regimes/1b/cmp/mopd_pg-mixrl/memory@5 -->x<!-- /finding --> <!-- finding: "
    "regimes/1b/cmp/mopd_topk-mixrl/memory@5 -->x<!-- /finding -->): Top-k scores 0.000 on memory on every seed "
    "(per-seed table), at the one preset rate.",
    "* On recall, <!-- finding: regimes/1b/cmp/mixrl-teacher_recall/recall@5 -->x<!-- /finding --> The merges "
    "lose recall (cat -0.305 ± 0.135 against the recall teacher, 5-seed table, descriptive).",
    ""]

DEVIATIONS = [
    "**Deviation notes** (where the runs differ from, or had to settle what is not fixed by, the registration above):", "",
    "* *Merges, chosen on val at seed 0*: the registration names bench.baselines' grid (w = 0.5, 1.0, 1.5 for "
    "linear and cat); bench.baselines chose by the mean normalised score, which conflict (no headroom: its teacher "
    "cannot beat a base at 0.98-1.00) leaves undefined, so the choice here is the mean val accuracy over the two "
    "domains (ties to the w nearer 1).",
    "* *Arm 1 under its fall-back* (gate G1 failing twice, if it does): MOPD, RFT and the merges read the SFT-on-gold "
    "adapters as the domains' teachers (the registration builds \"both domains' adapters\" that way and does not "
    "name other teachers), and Mix-RL is reported at its last budget (400 steps) beside the SFT interference test.",
    "* *Arm 1's second pair* (recall against memory, registered to run once if H1.1 is not shown on the first pair) "
    "is `python -m studies.regimes --arm 1b`: the same table of methods, budgets and gate G1 (its memory teacher is "
    "retrained in its own run folder, the same config and seeds as arm 1's). *Arm 3* is not run. Each arm's section "
    "says which of its jobs finished.",
    "* *The trainers' periodic evaluations are off* (`eval_every = 0`): every number below is the one evaluation "
    "after training (greedy, test 200 and val 100 prompts per length, seed-0 prompts), as registered.",
    "* *A method the trainer refuses at its registered budget* (RFT with no correct teacher sample) is recorded as "
    "failed, with the trainer's message, not retuned.", ""]


def render(out: Path, page_from: Path | None = None, allow_shrink: bool = False) -> Path:
    """Rewrite the page's Results section (every arm, arm 2 first: the order they run) and the figures.
    The JSON is checked first (`slices.read_record`); nothing is written (page, figures, "views") if the
    page would show fewer table rows than the one in `out`, or "views" would hold fewer values, unless
    `allow_shrink` (`slices.guard_render`)."""
    store = out / "regimes.json"
    slices.read_record(store, "regimes")
    with slices.rendering(store):
        return _render(out, page_from, allow_shrink)


def _render(out: Path, page_from: Path | None, allow_shrink: bool) -> Path:
    data = Store(out / "regimes.json").read()
    source = out / "regimes.md" if (out / "regimes.md").exists() else (page_from or DOCS / "regimes.md")
    text = source.read_text()
    head = above_header(text, RESULTS).rstrip() + "\n\n"
    body = [RESULTS, "",
            "Written by `python -m studies.regimes` from docs/regimes.json (every finished (arm, method, seed) job); "
            "nothing above this section changed. Every sentence here that states an outcome names the table it "
            "comes from; the decisions are the registered rules applied to the comparison tables.", ""]
    body += DEVIATIONS
    shown = [a for a in (2, 1, "1b") if a != "1b" or ArmReport(data, ARMS[a]).runs]   # the second pair runs only
    shown += [a for a in ("2b", "memory-cures") if ArmReport(data, ARMS[a], seeds=None).runs]   # if H1.1 is not shown
    drawn = [a for a in shown if not ARMS[a].grids or complete(ArmReport(data, ARMS[a], seeds=ARMS[a].seeds))]
    views = {str(a): in_variants(ARMS[a], view, data, ARMS[a]) for a in drawn}              # on the first; the cures'
    figs = {a: figures(views[str(a)], ARMS[a], out / "figures", draw=False) if a in drawn else [] for a in shown}
    for a in shown:                                # the cures' arms once they ran (partial: no view, no figure)
        body += in_variants(ARMS[a], markdown, data, ARMS[a], figs[a])
    body += cures_sections(slices.read_record(out / "matched.json", "matched-cures")) if (out / "matched.json").exists() else []
    body += ["### Arm 3: capacity", "", "**Not run**: it was registered to run after arms 1 and 2, and the sessions "
             "that ran them spent the rest of their CPU on the matched-budget study (docs/matched.md) and on arm 1b's "
             "5-seed check. Its registration above stands for a later run.", ""]
    page = out / "regimes.md"
    text = fill(head + "\n".join(body).rstrip() + "\n", out, strict=False)
    shrunk = {k: list(v) for k, v in data.items() if k == slices.SHRINK}   # the renders told to shrink, said again
    text = slices.guard_render(page, text, out / "regimes.json", shrunk, allow_shrink,
                               {"views": (data.get("views"), views)})
    for a in drawn:
        figures(views[str(a)], ARMS[a], out / "figures")
    with Store(out / "regimes.json").edit() as stored:   # what the figures draw, for notebook 07
        stored["views"] = views
        stored.update(shrunk)
    page.write_text(text)
    return page
