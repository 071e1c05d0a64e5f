"""The study results behind the widgets of notebooks 05b, 06 and 07, and the figures they draw.

    load_view()                                   mopd_mini/data/evidence.json: what the widgets read
    matched_pick(view, T=400, method="mopd_pg")   05b: one comparison with Mix-RL (or RFT, soft labels)
                                                  at every budget T, Holm-adjusted over the family
    origin_pick(view, loss="pg", seed="mean")     06: the KL to the binding teacher, same vs other origin
    depth_pick(view, depth=2, metric="acc")       07: arm 2's per-seed accuracy of every method at a depth
    matched_figure / origin_figure / depth_figure the figure of a pick (title, axis labels, one scale)

The file is package data (an installed package has no docs/), trimmed from the committed study
JSON (docs/matched.json, docs/ablations.json, docs/regimes.json, and docs/baselines.json for 05b's
section 1, under "baselines") by

    python -m tools.course_data

which takes the matched study's paired intervals and Holm-adjusted p from the study's own code
(studies.matched.family), so nothing here recomputes a decision; tests/tools/test_course_data.py checks that
the file is what that command makes from the committed JSON now (not stale).
"""

from __future__ import annotations

import json
from pathlib import Path
from statistics import fmean

VIEW_PATH = Path(__file__).parent / "data" / "evidence.json"
MADE_BY = "python -m tools.course_data"
RIVALS = {"mopd_kl": "mixrl", "mopd_pg": "mixrl", "mopd_topk": "mixrl", "mopd_kl-rft": "rft", "mopd_kl-soft": "soft"}
"""05b's method picker: each entry is one comparison of the matched study's registered family
(`<a>` against Mix-RL, or `<a>-<b>`)"""


def _figure(size):
    """A figure and its axes, off pyplot (a widget draws them in a background thread; pyplot is not
    thread-safe, and an inline backend would show a figure pyplot holds at a cell's end)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=size)
    return fig, fig.subplots()


def load_view(path: Path = VIEW_PATH) -> dict:
    """The committed view (package data)."""
    return json.loads(Path(path).read_text())


# ---------------------------------------------------------------------------------------------
# 05b: the matched study's paired comparisons
# ---------------------------------------------------------------------------------------------


def rival_pair(key: str) -> tuple[str, str]:
    """A picker entry as (a, b): "mopd_pg" -> ("mopd_pg", "mixrl"); "mopd_kl-rft" -> ("mopd_kl", "rft")."""
    a, _, b = key.partition("-")
    return a, b or RIVALS[key]


def matched_pick(view: dict, T: int, method: str) -> dict:
    """The comparison `method` (a RIVALS key) at every budget of the study, the picked T marked:
    {"a", "b", "label", "T", "m", "five", "rows": [{T, diff, lo, hi, half, per_seed, p, p_holm,
    resolved_holm, alpha_holm, lo_holm, hi_holm, reading, n, picked}], "picked": the picked T's row}
    (lo, hi: the uncorrected 95% interval; lo_holm, hi_holm: the interval at Holm's level)."""
    a, b = rival_pair(method)
    m = view["matched"]
    rows = [{**c, "T": int(t), "picked": int(t) == int(T)} for t, by in sorted(m["by_T"].items(), key=lambda kv: int(kv[0]))
            for key, c in by.items() if key == f"{a}-{b}"]
    picked = next((r for r in rows if r["picked"]), None)
    if picked is None:
        raise KeyError(f"T = {T} is not in the matched study; it ran T = {[r['T'] for r in rows]}")
    return {"a": a, "b": b, "label": f"{m['labels'][a]} minus {m['labels'][b]}", "T": int(T), "m": m["m"],
            "five": m["five"], "rows": rows, "picked": picked}


def told_apart(view: dict, method: str) -> list[int]:
    """The budgets T at which `method` is told apart from its rival after Holm's correction, from a
    T run with the page's five seeds (the answer to 05b's question)."""
    pick = matched_pick(view, min(int(t) for t in view["matched"]["by_T"]), method)
    return [r["T"] for r in pick["rows"] if r["resolved_holm"] and r["n"] >= pick["five"]]


def matched_figure(pick: dict, ax=None):
    """The picked comparison at every T: its interval at Holm's level (the level at which Holm's
    step-down over the family tests it, `stats.holm_levels`; it excludes 0 exactly when the
    comparison is resolved after the correction) as the wide bar, the uncorrected 95% interval as
    the thin bar beside it, the per-seed differences as dots; red where resolved after Holm, the
    picked T drawn bold."""
    fig, ax = (_figure((6.4, 3.6)) if ax is None else (ax.figure, ax))
    for i, r in enumerate(pick["rows"]):
        colour = "tab:red" if r["resolved_holm"] else ("0.45" if r["n"] >= pick["five"] else "0.75")
        holm = [[r["diff"] - r["lo_holm"]], [r["hi_holm"] - r["diff"]]]
        ax.errorbar(i, r["diff"], yerr=holm, fmt="o", ms=9 if r["picked"] else 6, capsize=6,
                    lw=2.5 if r["picked"] else 1.2, color=colour, mfc=colour if r["resolved_holm"] else "white")
        ax.errorbar(i - 0.12, r["diff"], yerr=r["half"], fmt="none", capsize=2, lw=0.8, color=colour, alpha=0.6)
        ax.scatter([i + 0.18] * len(r["per_seed"]), r["per_seed"], s=10, color=colour, zorder=3)
        ax.annotate(f"p (Holm) {r['p_holm']:.3f}\n{r['n']} seeds", (i, r["hi_holm"]), textcoords="offset points",
                    xytext=(0, 6), ha="center", fontsize=7)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(range(len(pick["rows"])), [f"T = {r['T']}" for r in pick["rows"]])
    ax.set_xlim(-0.6, len(pick["rows"]) - 0.4)
    ax.set_xlabel("GRPO steps per domain of the teachers and Mix-RL (the matched RL budget)")
    ax.set_ylabel(f"{pick['label']}\nmean test lift, paired by seed", fontsize=8)
    p = pick["picked"]
    ax.margins(y=0.25)   # room above the intervals for their labels (the reading is in the note above)
    ax.set_title(f"T = {p['T']}: {p['diff']:+.3f}; at Holm's level ({100 * (1 - p['alpha_holm']):.4g}%) "
                 f"[{p['lo_holm']:+.3f}, {p['hi_holm']:+.3f}], uncorrected 95% [{p['lo']:+.3f}, {p['hi']:+.3f}]\n"
                 f"(wide: Holm's level over the family of {pick['m']}, red if it excludes 0; thin: uncorrected 95%; "
                 f"pale: under {pick['five']} seeds)", fontsize=7)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# 06: the origin study's KL curves
# ---------------------------------------------------------------------------------------------


def origin_pick(view: dict, loss: str, seed: str = "mean") -> dict:
    """The per-step KL to the binding teacher of the same-origin and the other-origin student
    (`loss` "pg" or "topk"), of one seed or the mean over the seeds: {"loss", "seed", "steps",
    "same", "other", "first", "last": {origin: mean over the first / last 20% of the steps}}."""
    o = view["origin"]
    seeds = o["seeds"] if seed == "mean" else [str(seed)]
    curves = {origin: [o["curves"][s][loss][origin] for s in seeds] for origin in ("same", "other")}
    mean = {k: [fmean(vals) for vals in zip(*v)] for k, v in curves.items()}
    n = max(1, len(mean["same"]) // 5)
    return {"loss": loss, "seed": seed, "seeds": seeds, "steps": list(range(1, len(mean["same"]) + 1)), **mean,
            "first": {k: fmean(v[:n]) for k, v in mean.items()}, "last": {k: fmean(v[-n:]) for k, v in mean.items()}}


def origin_figure(pick: dict, ax=None, ymax: float | None = None):
    """The two students' KL to their binding teacher step by step (a 10-step moving mean), on one
    y scale for every pick (`ymax`)."""
    fig, ax = (_figure((6.4, 3.4)) if ax is None else (ax.figure, ax))
    for origin, colour in (("same", "tab:blue"), ("other", "tab:orange")):
        ys, k = pick[origin], 10
        smooth = [fmean(ys[max(0, i - k + 1):i + 1]) for i in range(len(ys))]
        ax.plot(pick["steps"], smooth, color=colour,
                label=f"{origin} origin: {pick['first'][origin]:.3f} -> {pick['last'][origin]:.3f} (first/last fifth)")
    ax.set(xlabel="student step", ylabel="per-token reverse KL to its binding teacher\n(10-step moving mean)",
           ylim=(0, ymax) if ymax else None)
    who = "mean over seeds " + ", ".join(pick["seeds"]) if pick["seed"] == "mean" else f"seed {pick['seed']}"
    ax.set_title(f"MOPD-{'PG' if pick['loss'] == 'pg' else 'Top-k'}, binding prompts, {who}", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# 07: arm 2's per-seed accuracy by depth
# ---------------------------------------------------------------------------------------------


def depth_pick(view: dict, depth: int, metric: str = "acc") -> dict:
    """Arm 2's test `metric` ("acc": the final answer, "trace": the prefix trace, the whole trace right as a
    prefix, which a right trace that keeps going passes) at chain depth
    `depth`, per method and seed: {"depth", "metric", "held_out", "registered": seeds of the
    registered study, "methods": {method: {"label", "per_seed": {seed: value}, "mean"}}}."""
    a = view["regimes"]
    key = str(depth)
    if key not in a["depths"]:
        raise KeyError(f"depth {depth} is not in arm 2's tables; depths {a['depths']}")
    methods = {m: {"label": r["label"], "per_seed": {s: v[metric][key] for s, v in r["seeds"].items()}}
               for m, r in a["methods"].items()}
    for r in methods.values():
        r["mean"] = fmean(v for s, v in r["per_seed"].items() if int(s) in a["registered"])
    return {"depth": int(depth), "metric": metric, "held_out": int(depth) in a["held_out"],
            "registered": a["registered"], "methods": methods}


def depth_figure(pick: dict, ax=None):
    """Every method's per-seed value at the picked depth (dots; hollow: the seeds beyond the
    registered ones, the 5-seed check) and the mean over the registered seeds (a bar), 0 to 1."""
    fig, ax = (_figure((7.2, 3.6)) if ax is None else (ax.figure, ax))
    names = list(pick["methods"])
    for i, m in enumerate(names):
        r = pick["methods"][m]
        ax.barh(i, r["mean"], color="0.85")
        seeds = list(r["per_seed"])   # one scatter per method: a figure of few artists draws fast
        ax.scatter(list(r["per_seed"].values()), [i + (int(s) - 2) * 0.12 for s in seeds], s=22, zorder=3,
                   c=["tab:blue" if int(s) in pick["registered"] else "white" for s in seeds], edgecolors="tab:blue")
    ax.set_yticks(range(len(names)), [pick["methods"][m]["label"] for m in names], fontsize=7)
    ax.invert_yaxis()
    what = "final-answer accuracy" if pick["metric"] == "acc" else "prefix trace (whole trace right as a prefix)"
    ax.set(xlim=(-0.03, 1.03), xlabel=f"test {what} (dots: seeds; bar: mean over seeds {pick['registered']})",
           ylabel="method (arm 2)")
    ax.set_title(f"chain depth {pick['depth']} ({'held out' if pick['held_out'] else 'trained'}): {what}, "
                 "per seed (hollow: the 5-seed check's extra seeds)", fontsize=8)
    ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    return fig


# every public function (and class method) of this module: its annotated arguments checked at a call from outside
# the package (mopd_mini.validate.guard_public); the package's own calls, e.g. the training loop's, skip the checks
from .validate import guard_public  # noqa: E402

guard_public(globals())
