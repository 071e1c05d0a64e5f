"""The stuck student's cures: what the regime study's arms 2b and memory-cures (studies.regimes)
and the matched sweep's course-setting check (studies.matched --cures) share: the registered table of
the cures (`CURES`), jsd's betas, the steps whose stuck share every MOPD record keeps and the per-step
series, and the check's section of docs/regimes.md, rendered from matched.json's `by_T.<T>.cures`
(`cures_sections`; the check's training glue is studies.matched's: `declare_cures`, `summarise_cures`).
"""

from __future__ import annotations

import json
from pathlib import Path
from statistics import fmean

from mopd_mini import stats

from . import slices, study
from .baselines_plan import DOMAINS, LABEL
from .study import RESULTS
from tools.provenance import above_header, machine_line

JSD_BETAS = (0.1, 0.5, 0.9)
"""jsd's beta, chosen on val with its rate (TRL's convention: 0 the forward KL, 1 the reverse KL)"""
STUCK_STEPS = (50, 100, 300)
"""the steps whose stuck share (and off-support mass) every MOPD record keeps, beside the last"""
CURES = (   # key, label, MOPDConfig fields: the cures the amendment registers, beside exact KL
    ("mopd_fkl", "MOPD forward KL (on-policy)", dict(loss="fkl")),
    ("mopd_jsd", "MOPD JSD (beta chosen on val)", dict(loss="jsd")),
    ("mopd_kl_lmbda", "MOPD exact KL, lmbda 0.5 (teacher prefixes)", dict(loss="kl", lmbda=0.5, lmbda_prefix="teacher")),
    ("mopd_topk_support", "MOPD Top-k, support matching", dict(loss="topk", topk_support=True)),
)


def stuck_series(run, domains: tuple) -> dict:
    """Every step's stuck share and off-support mass per domain, and whether the step trained on the
    student's own samples (`on_policy`, 1 unless lmbda < 1 drew an off-policy step): the per-step
    curves, and the share read over on-policy steps only where lmbda < 1 (docs/stuck.md)."""
    rows = [r for r in run.metrics if "step" in r]
    out = {"step": [r["step"] for r in rows], "on_policy": [r.get("on_policy", 1.0) for r in rows]}
    for d in domains:
        out[d] = {"share": [r.get(f"stuck_share/{d}") for r in rows], "off_support": [r.get(f"off_support/{d}") for r in rows]}
    return out


def on_edge(by_T: dict, m: str) -> bool:
    """Whether the chosen learning rate is still at an end of the rates tried (the other keys of
    the setting held at the chosen ones): not bracketed (`study.on_edge`)."""
    chosen = by_T["chosen"][m]
    return isinstance(chosen, dict) and "lr" in chosen and study.on_edge(by_T["grid"][m], chosen)


def edge_mark(by_T: dict, m: str) -> str:
    """The table's mark beside a choice not bracketed: on the grid's edge (the extensions allowed did not
    pass it), or on the LADDER's end, its hard limit, past which no study tries a rate (`study.bracketing`)."""
    chosen = by_T["chosen"][m]
    if not (isinstance(chosen, dict) and "lr" in chosen):
        return ""
    kind = study.bracketing(by_T["grid"][m], chosen)
    if kind == "hard limit":
        return f" **(at the ladder's end, {chosen['lr']:g}: its hard limit, not bracketed)**"
    return " **(on the grid's edge: not bracketed)**" if kind == "edge" else ""


CURES_T = 200                                           # the T the registration names
CURE_FIELDS = {key: fields for key, _, fields in CURES}
"""each cure's MOPDConfig fields (`CURES`: the registration's table of the cures)"""
CURES_METHODS = ("mopd_kl",) + tuple(CURE_FIELDS)
CURE_LABEL = {"mopd_kl": LABEL["mopd_kl"], **{key: label for key, label, _ in CURES}}
CURES_PAGE = "regimes.md"
"""where the check's section is rendered: the page whose amendment registered it (its data is in
matched.json, `by_T.<T>.cures`, beside the sweep's own rows at that T)"""
CURES_HEADING = "### Course-setting check: the cures on binding + recall"


def cure_grid(plan, key: str) -> list[dict]:
    """The registered grid (`plan`: studies.matched's Plan): exact KL's (plan.lrs["mopd_kl"], 3 rates
    x3 apart around its course-budget choice) for every cure; jsd's beta from `JSD_BETAS` beside it."""
    lrs = plan.lrs["mopd_kl"]
    if key == "mopd_jsd":
        return [{"lr": lr, "beta": b} for b in JSD_BETAS for lr in lrs]
    return [{"lr": lr} for lr in lrs]


def logged_at(run, prefix: str, steps: tuple = STUCK_STEPS) -> dict:
    """{step: the mean over domains of the run's `<prefix>/<domain>` metric} at the steps of `steps`
    that ran and at the last step (the stuck share, the off-support mass; None where never logged)."""
    rows = {r["step"]: r for r in (run.metrics if run is not None else [])
            if any(k.startswith(prefix + "/") and r[k] is not None for k in r)}
    picked = dict.fromkeys([s for s in steps if s in rows] + ([max(rows)] if rows else []))
    return {str(s): fmean(v for k, v in rows[s].items() if k.startswith(prefix + "/") and v is not None) for s in picked}


def series_of(run, digits: int = 4) -> dict | None:
    """The run's per-step stuck share and off-support mass per domain and `on_policy` per step
    (`stuck_series`, the amendment of 2026-12-05's record), rounded to `digits`."""
    if run is None:
        return None
    r = lambda xs: [None if x is None else round(x, digits) for x in xs]  # noqa: E731
    s = stuck_series(run, DOMAINS)
    return {"step": s["step"], "on_policy": r(s["on_policy"]), **{d: {k: r(v) for k, v in s[d].items()} for d in DOMAINS}}


def cures_decisions(block: dict) -> dict:
    """{cure: cure minus exact KL on the mean normalised test score, paired by seed (95%), Holm over
    the cures (studies.study.family) and the decision by H2b.1's rule (studies.study.decide: decided
    only when p (Holm) < 0.05, then supported iff the interval lies above 0, refuted iff below;
    otherwise not resolved with the differences the interval allows; nothing is called equal)}."""
    rows = block["rows"]
    comp = {k: study.paired_rows(rows, k, "mopd_kl") for k in CURE_FIELDS if k in rows and "mopd_kl" in rows}
    return {k: {**f, "decision": study.decide(f, above=0.0, p_adj=f["p_holm"])} for k, f in study.family(comp).items()}


def teachers_line(by_T: dict, block: dict, T, where: str) -> str:
    """The teachers a check read (`where`: how they came to be), their sha256 and test accuracy, against
    those of the sweep's recorded run at T (the same weights, other weights, or no hash kept there)."""
    mine, theirs = block.get("teacher_sha256", {}), by_T.get("teacher_sha256")
    test = lambda rep, d: fmean(rep["refs"]["test"][f"teacher_{d}"][d].values())  # noqa: E731
    accs = "; ".join(f"{d} {test(block, d):.3f}" + (f" (the sweep's recorded run: {test(by_T, d):.3f})" if "refs" in by_T
                                                   else "") for d in DOMAINS)
    same = (f"the same weights as the sweep's recorded run at T = {T} (sha256 equal)" if theirs and theirs == mine else
            f"other weights than the sweep's recorded run at T = {T} (sha256 differ)" if theirs else
            f"the sweep's recorded run at T = {T} kept no hash of its teachers, so they cannot be shown to be the same")
    return (f"**Teachers.** GRPO, {T} steps, lr 1e-3, seed 0, {where}: sha256 "
            + ", ".join(f"{d} {h[:16]}" for d, h in mine.items()) + f"; {same}. Their test accuracy (mean over the "
            f"lengths): {accs}.")


def _teachers_note(by_T: dict, block: dict, T) -> list[str]:
    """Which teachers the check read against those the sweep's recorded run at T read."""
    return [teachers_line(by_T, block, T, "in this command's run folder (trained by it unless the folder held them)")
            + " So exact KL is trained here again, beside the cures and on "
            "their teachers, on its own grid by the same runner (the sweep's run names: a folder holding the sweep's runs "
            "reloads them), and every cure is paired with that exact KL: the same teachers, seeds and test prompts. The "
            "sweep's recorded exact-KL rows are shown beside it, descriptive.", ""]

CURES_ESTIMATE = (1.1, 2.6)
"""the check's CPU-hours on a quiet machine as registered (docs/regimes.md, amendment of 2026-12-04)"""


def choice_lines(block: dict, methods: tuple, label: dict) -> list[str]:
    """A check's val choice, one row per method: every setting tried with its val mean normalised score
    (the two-seed mean where the tie-break ran; [extended]: added by the bracketing)."""
    out = [f"The val choice (seed 0, val {block['plan']['val_n']} a length; the runner's: the best mean normalised val "
           "score, bracketed past an edge, a choice within one val SE trained again at seed 1 and made on the two-seed "
           "mean):", "",
           "| method | settings tried: val mean normalised (two-seed mean where the tie-break ran) |", "| --- | --- |"]
    for m in methods:
        if m in block["grid"]:
            keys = set(block["chosen"][m])                 # the setting's keys (an entry has the scores beside them)
            out.append(f"| {label[m]} | " + "; ".join(
                ", ".join(f"{k} {g[k]:g}" for k in g if k in keys) + f": {g['mean']:.3f}"
                + (f" ({g['mean2']:.3f})" if "mean2" in g else "") + (" [extended]" if g.get("extended") else "")
                for g in block["grid"][m]) + " |")
    return out


def cures_markdown(by_T: dict, T) -> list[str]:
    """The check's section (a function of matched.json's `by_T.<T>`: its `cures` block and, for the
    descriptive columns, the sweep's recorded rows at that T)."""
    block = by_T["cures"]
    rows, seeds, plan = block["rows"], block["seeds_done"], block["plan"]
    mean = lambda m, f: study.cell([f(p) for p in rows[m].values()])  # noqa: E731
    out = [f"{CURES_HEADING} at T = {T}", "",
           f"Written by `{block['command']}`, finished {block['date']}, on {machine_line(block['machine'])}. Its "
           "registration is this page's \"Course-setting check\" (amendment of 2026-12-03); its data is docs/matched.json, "
           f"`by_T.{T}.cures`, beside the matched sweep's own rows at T = {T} (docs/matched.md's protocol: teachers {T} "
           f"GRPO steps, MOPD {plan['student_steps']} steps x {plan['per_domain']} prompts a domain, test "
           f"{plan['test_n']} a length).", "",
           *study.unfinished(block["command"], seeds), *study.spent_line(block, CURES_ESTIMATE, "2026-12-04"), *_teachers_note(by_T, block, T),
           "Test split, mean ± sample std over seeds (ddof = 1). Normalised: (method - base) / (teacher - base) per "
           "domain, the decision's score; lift: accuracy over the domain's lengths minus the base's. Stuck share: the "
           "detector's (docs/stuck.md) at the last step, mean over the domains. Stage FLOPs: the method's own (for lmbda "
           "0.5 the teachers' generation included).", "",
           "| method | chosen (val, seed 0) | normalised binding | normalised recall | mean normalised | mean lift | "
           "stuck share, last step | stage FLOPs |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    last = lambda p, k: list(p[k].values())[-1] if p.get(k) else float("nan")  # noqa: E731
    for m in CURES_METHODS:
        if m not in rows:
            continue
        chosen = json.dumps(block["chosen"][m]) + edge_mark(block, m)
        out.append(f"| {CURE_LABEL[m]} | {chosen} | {mean(m, lambda p: p['all']['binding']['normalised'])} | "
                   f"{mean(m, lambda p: p['all']['recall']['normalised'])} | {mean(m, lambda p: p['all']['mean'])} | "
                   f"{mean(m, lambda p: p['lift']['mean'])} | {mean(m, lambda p: last(p, 'stuck_share'))} | "
                   f"{fmean(p['stage']['flops'] for p in rows[m].values()):.2e} |")
    out += ["", *choice_lines(block, CURES_METHODS, CURE_LABEL)]
    recorded = by_T.get("rows", {}).get("mopd_kl", {})
    out += ["", "Per seed, mean normalised test score" + (" (the last row: the sweep's recorded exact KL at this T, "
            "descriptive)" if recorded else "") + ":", "",
            "| method | " + " | ".join(f"seed {s}" for s in seeds) + " |", "| --- | " + " | ".join("---" for _ in seeds) + " |"]
    per = {m: {str(s): p["all"]["mean"] for s, p in rows[m].items()} for m in CURES_METHODS if m in rows}
    if recorded:
        per["recorded"] = {str(s): p["all"]["mean"] for s, p in recorded.items()}
    for m, v in per.items():
        label = "MOPD exact KL, the sweep's recorded run" if m == "recorded" else CURE_LABEL[m]
        out.append(f"| {label} | " + " | ".join(f"{v[str(s)]:.3f}" if str(s) in v else "—" for s in seeds) + " |")
    dec = cures_decisions(block)
    diffs = lambda k: {s: rows[k][s]["all"]["mean"] - rows["mopd_kl"][s]["all"]["mean"]  # noqa: E731
                       for s in rows[k] if s in rows["mopd_kl"]}
    out += ["", f"Each cure minus exact KL (trained here), on the mean normalised test score, paired by seed: mean "
            f"difference ± 95% t half-width [interval], the paired t-test's p and its Holm adjustment over the family of "
            f"{len(dec)} (the cures). Rule (H2b.1's): a row is decided only when p (Holm) < 0.05, then supported iff the "
            "interval lies above 0, refuted iff below; otherwise not resolved, with the differences its interval allows. "
            "No equivalence margin was registered: nothing is called equal.", "",
            "| comparison | difference | per seed | p | p (Holm) | rule | decision |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for k, f in dec.items():
        out.append(f"| {CURE_LABEL[k]} minus {CURE_LABEL['mopd_kl']} | {stats.interval_text(f)} [{f['lo']:+.3f}, "
                   f"{f['hi']:+.3f}] (n = {f['n']}) | {study.seeds_text(diffs(k))} | {f['p']:.3f} | "
                   f"{f['p_holm']:.3f} | supported iff above 0; refuted iff below 0 | {f['decision']} |")
    if recorded:
        r = study.paired_rows({"here": rows["mopd_kl"], "recorded": recorded}, "here", "recorded")
        same = block.get("teacher_sha256") and block.get("teacher_sha256") == by_T.get("teacher_sha256")
        out += ["", f"Descriptive, outside the family: exact KL here minus the sweep's recorded exact KL, "
                f"{stats.interval_text(r)} (n = {r['n']}; the same method, grid and seeds, "
                + ("on the same teachers)." if same else "on teachers trained again).")]
    out += ["", "Decisions: " + "; ".join(f"**{CURE_LABEL[k]}** {f['decision']}" for k, f in dec.items()) + ".", ""]
    return out


def cures_sections(rep: dict) -> list[str]:
    """Every T's check section of a matched.json (none: no T has a `cures` block)."""
    return [line for key, by_T in sorted(rep.get("by_T", {}).items(), key=lambda kv: int(kv[0])) if "cures" in by_T
            for line in cures_markdown(by_T, int(key))]


def splice(text: str, section: list[str]) -> str:
    """docs/regimes.md with the check's section in its Results: in place of the one there (from its
    heading to the next heading of its level or above), else before "### Arm 3", else at the end.
    Nothing above "## Results" changes (a page without one gets it)."""
    head = above_header(text, RESULTS)
    lines = text[len(head):].splitlines() or [RESULTS, ""]
    start = next((i for i, line in enumerate(lines) if line.startswith(CURES_HEADING)), None)
    if start is None:
        start = end = next((i for i, line in enumerate(lines) if line.startswith("### Arm 3")), len(lines))
    else:
        end = next((j for j in range(start + 1, len(lines)) if lines[j].startswith(("### ", "## "))
                    and not lines[j].startswith(CURES_HEADING)), len(lines))
    return head + "\n".join(lines[:start] + section + lines[end:]).rstrip() + "\n"


def render_cures(rep: dict, out: Path, source: Path | None = None, allow_shrink: bool = False) -> None:
    """The `cures` blocks' sections into out/regimes.md's Results (the page that registered the check).
    Rendered from the JSON at `source` (--render --cures): refused before it writes if regimes.md would
    show fewer table rows (`slices.guard_render`)."""
    page = out / CURES_PAGE
    text = splice(page.read_text() if page.exists() else "# The regime study\n\n", cures_sections(rep))
    if source is not None:
        text = slices.guard_render(page, text, source, rep, allow_shrink)
    page.write_text(text)

