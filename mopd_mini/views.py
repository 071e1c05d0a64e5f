"""Figures of study results: what the studies' pages draw from their JSON, and what the
notebooks draw from the same JSON (or from their own run of a study's code), so one piece of
plotting code serves both.

    baselines_view(rep)              docs/baselines.json as the figures need it (notebook 05, studies.baselines)
    cost_curves(panels)              the matched-budget figure: every method at every T against its cost
    initial_kl(summary)              the ablations (notebook 06, docs/ablations.md): initial KL to
    origin_curves(results)           each binding teacher, the KL and accuracy curves of both origins,
    rounds(summary)                  round 1 vs round 2 (normalised against round 1),
    ucmopd(summary)                  UCMOPD vs MOPD per domain with the kept fractions
    regime_lift, regime_cost,        the regime study (notebook 07, docs/regimes.md): lift by domain,
    regime_kl, regime_depth          lift against pipeline FLOPs, arm 2's per-token KL, accuracy by depth,
    regime_stuck                     the cures' arms' stuck share per step, method and seed

The course's own plots (accuracy tables, curves, token maps, the baselines' bars) are in
mopd_mini.plots; save a figure with plots.save.
"""

from __future__ import annotations

import math
import textwrap

import matplotlib.pyplot as plt
import numpy as np

from .palette import color as _color
from .stats import mean_sd


def cost_curves(panels: dict, xlabel: str = "whole-pipeline FLOPs (teachers included, log scale)", title: str = ""):
    """One panel per measure, one line per method through its points, each point a budget:
    panels {panel title (the y label): {method: [(cost, value, error, marker label), ...]}}. The
    matched-budget figure (studies.matched): every method at every teacher budget T, against what
    its whole pipeline cost."""
    fig, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 4.6), squeeze=False)
    for ax, (panel, lines) in zip(axes[0], panels.items()):
        for i, (m, points) in enumerate(lines.items()):
            points = sorted(points)
            xs, ys, es = ([p[k] for p in points] for k in range(3))
            ax.errorbar(xs, ys, yerr=[0 if e != e else e for e in es], fmt="o-", color=_color(m, i), capsize=2,
                        lw=1, ms=4, alpha=0.85, label=m)
            for x, y, *_, label in points:
                ax.annotate(label, (x, y), textcoords="offset points", xytext=(3, 3), fontsize=6)
        ax.set_xscale("log")
        ax.axhline(0, color="black", lw=0.6)
        ax.set(xlabel=xlabel, ylabel=panel)
        ax.grid(alpha=0.3, which="both")
    axes[0][-1].legend(fontsize=7, loc="best")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def baselines_view(rep: dict) -> dict:
    """What the figures need from docs/baselines.json (written by `python -m studies.baselines`):
    scores {method: {domain: (mean over seeds, std over seeds)}} on the test split (all evaluated
    lengths); cost panels {stage | pipeline: {method: (mean FLOPs, mean score, std)}}; the val
    curves averaged over seeds {method: (x, mean normalised)} with x = prompts seen (or the second
    stage's step for the cascades, per domain); and the merge grid {how: {setting: {domain: score}}}."""
    def stats(vals):  # (mean, sample std over seeds; 0 with one seed, so no error bar is drawn)
        vals = [v for v in vals if v is not None]
        if not vals:
            return float("nan"), 0.0
        m, sd = mean_sd(vals)
        return m, (0.0 if math.isnan(sd) else sd)

    scores, panels = {}, {"the stage alone": {}, "the whole pipeline (teachers included)": {}}
    for m, per_seed in rep["rows"].items():
        runs = list(per_seed.values())
        scores[m] = {d: stats([r["all"][d]["normalised"] for r in runs]) for d in ("binding", "recall")}
        scores[m]["mean"] = stats([r["all"]["mean"] for r in runs])
        if m != "merge_best":
            for panel, part in zip(panels, ("stage", "pipeline")):
                panels[panel][m] = (float(np.mean([r[part]["flops"] for r in runs])), *scores[m]["mean"])
    curves, forgetting = {}, {}
    for m, per_seed in rep.get("curves", {}).items():
        pts = list(per_seed.values())
        if m.startswith("cascade_"):
            for d in ("binding", "recall"):
                forgetting.setdefault(m, {})[d] = ([p["step"] for p in pts[0]],
                                                   [float(np.mean([c[j][d] for c in pts])) for j in range(len(pts[0]))])
        else:
            curves[m] = ([p["prompts"] for p in pts[0]], [float(np.mean([c[j]["mean"] for c in pts]))
                                                          for j in range(len(pts[0]))])
    merges = {}
    for key, settings in rep.get("grid", {}).items():
        if key.startswith("merge_"):
            merges[key[6:]] = {", ".join(f"{k} {s[k]:g}" for k in ("w", "density") if k in s):
                               {d: s[d] for d in ("binding", "recall", "mean")} for s in settings}
    return {"scores": scores, "cost_panels": panels, "curves": curves, "forgetting": forgetting, "merges": merges}


# ---------------------------------------------------------------------------------------------
# the ablations (mopd_mini.ablation_runs.summary gives `summary`; studies/ablations.py the results)
# ---------------------------------------------------------------------------------------------


def _bar(ax, x, cell, **kw):
    """A bar of a (mean, std) cell, with its std as an error bar."""
    mean, sd = cell
    ax.bar(x, mean, yerr=sd, capsize=3, **kw)


def initial_kl(summary: dict, per_seed: list[dict] | None = None):
    """Per-token reverse KL at step 0 from the student (= the base) to the same-origin and to the
    other-origin binding teacher, on the same samples; mean +/- std over seeds (dots: seeds)."""
    kl = summary["origin"]["initial_kl"]
    fig, ax = plt.subplots(figsize=(4.6, 3.6))
    for i, (key, label) in enumerate((("same_origin", "same origin"), ("other_origin", "other origin"))):
        _bar(ax, i, kl[key], color=["#1f77b4", "#d62728"][i], label=label)
        for x in per_seed or []:
            ax.plot(i, x[key], "k.", ms=5)
    ax.set(xticks=[0, 1], xticklabels=["same origin", "other origin"], ylabel="per-token reverse KL at init",
           title=f"binding teacher: other / same = {kl['ratio'][0]:.1f}x")
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return fig


def origin_curves(results: dict, smooth: int = 10):
    """Top: exact KL to the binding teacher per step; bottom: binding accuracy at each evaluation;
    one column per loss, same vs other origin, mean over seeds."""
    runs = [r for seed in results["origin"].values() for r in seed["runs"].values()]
    losses = sorted({r["loss"] for r in runs})
    fig, axes = plt.subplots(2, len(losses), figsize=(5.2 * len(losses), 6.4), squeeze=False)
    for j, loss in enumerate(losses):
        for kind, color in (("same", "#1f77b4"), ("other", "#d62728")):
            group = [r["curve"] for r in runs if r["loss"] == loss and r["origin"] == kind]
            if not group:
                continue
            kl = np.mean([[row["kl/binding"] for row in c] for c in group], axis=0)
            steps = np.array([row["step"] for row in group[0]])
            if smooth > 1 and len(kl) >= smooth:
                kl, steps = np.convolve(kl, np.ones(smooth) / smooth, mode="valid"), steps[smooth - 1:]
            axes[0, j].plot(steps, kl, color=color, label=f"{kind} origin ({len(group)} seeds)")
            acc = [[np.mean([v for k, v in row.items() if k.startswith("acc/binding/")]) for row in c
                    if any(k.startswith("acc/binding/") for k in row)] for c in group]
            ev = [row["step"] for row in group[0] if any(k.startswith("acc/binding/") for k in row)]
            axes[1, j].plot(ev, np.mean(acc, axis=0), "o-", color=color, label=f"{kind} origin")
        axes[0, j].set(yscale="log", xlabel="step", ylabel=f"KL to binding teacher ({smooth}-step mean)",
                       title=f"MOPD-{loss}: KL to the binding teacher")
        axes[1, j].set(xlabel="step", ylabel="binding accuracy (mean over L)", title=f"MOPD-{loss}: binding accuracy")
        for ax in axes[:, j]:
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def rounds(summary: dict):
    """Normalised scores against the ROUND-1 teachers (1.0 = round 1's teacher), per domain and
    their mean, for round 1's student and round 2's teachers and students; the paper's dashed."""
    rows = summary["rounds"]["rows"]
    fig, ax = plt.subplots(figsize=(8.5, 3.8))
    cols = ("binding", "recall", "mean")
    width = 0.8 / len(rows)
    for i, (label, cell) in enumerate(rows.items()):
        for j, c in enumerate(cols):
            _bar(ax, j - 0.4 + width * (i + 0.5), cell[c], width=width, color=plt.get_cmap("tab10")(i),
                 label=label if j == 0 else None)
    for label, value in summary["rounds"]["paper"].items():
        ax.axhline(value, ls="--", lw=1, color="black" if "teacher" in label else "gray")
        ax.text(2.45, value, f"paper: {label.split(' (')[0]} {value}", fontsize=7, va="bottom", ha="right")
    ax.axhline(1.0, color="black", lw=0.5)
    ax.set(xticks=range(3), xticklabels=cols, ylabel="normalised vs round-1 teachers",
           title="multi-round MOPD (1.0 = the round-1 teacher)")
    ax.legend(fontsize=7, loc="lower left")
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return fig


def ucmopd(summary: dict):
    """Per setting: accuracy per domain, MOPD vs UCMOPD (mean +/- std over seeds), with the base
    dotted and UCMOPD's kept fractions in the labels."""
    settings = summary["ucmopd"]["settings"]
    titles = {"two": "two teachers", "preserve": "capability preservation (recall -> base)"}
    fig, axes = plt.subplots(1, len(settings), figsize=(5.6 * len(settings), 3.8), squeeze=False)
    for ax, (setting, rows) in zip(axes[0], settings.items()):
        for i, (method, cell) in enumerate(rows.items()):
            kept = [f"{d[:4]}: kept {cell[f'gg_kept/{d}'][0]:.2f}, masked {cell[f'tef_masked/{d}'][0]:.2f}"
                    for d in ("binding", "recall") if cell.get(f"gg_kept/{d}", (None,))[0] is not None]
            label = method + (f" ({'; '.join(kept)})" if kept else "")
            for j, d in enumerate(("binding", "recall")):
                _bar(ax, j - 0.2 + 0.4 * i, cell[d], width=0.4, color=["#2ca02c", "#9467bd"][i],
                     label=label if j == 0 else None)
        for j, d in enumerate(("binding", "recall")):
            ax.plot([j - 0.4, j + 0.4], [summary["base"][d]] * 2, "k:", label="base" if j == 0 else None)
        ax.set(xticks=[0, 1], xticklabels=["binding", "recall"], ylim=(0, 1.3), ylabel="accuracy (mean over L)",
               yticks=np.linspace(0, 1, 6), title=titles.get(setting, setting))
        ax.legend(fontsize=7, loc="upper left")
        ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# the regime study (notebook 07, docs/regimes.md): drawn from an arm's view, the dict that
# studies.regimes stores in docs/regimes.json["views"][arm] (means and 95% t-intervals over seeds)
# ---------------------------------------------------------------------------------------------


def regime_lift(view: dict, title: str | None = None):
    """One panel per domain: each method's test-accuracy lift over the base, held-in and held-out
    lengths (or depths) side by side, with the 95% t-interval over the seeds as error bars."""
    methods = [k for k in view["methods"] if view["methods"][k]["lift"]]
    fig, axes = plt.subplots(1, len(view["domains"]), figsize=(3.2 + 0.95 * len(methods), 4.2) if
                             len(view["domains"]) == 1 else (2 + 1.6 * len(methods), 4.2), squeeze=False, sharey=True)
    x = np.arange(len(methods))
    for ax, d in zip(axes[0], view["domains"]):
        for j, part in enumerate(("held-in", "held-out")):
            cells = [view["methods"][k]["lift"][d][part] for k in methods]
            if not view["parts"][d][part]:
                continue
            ax.bar(x + 0.4 * j - 0.2, [c["mean"] for c in cells], 0.4, label=f"{part} ({', '.join(map(str, view['parts'][d][part]))})",
                   yerr=[0 if c["half"] != c["half"] else c["half"] for c in cells], capsize=3)
        ax.axhline(0, color="black", lw=0.7)
        ax.set_xticks(x, [view["methods"][k]["label"] for k in methods], rotation=55, ha="right", fontsize=7)
        ax.set_title(f"{d}", fontsize=10)
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("test accuracy minus the base's")
    fig.suptitle(title or f"Arm {view['arm']}: lift over the base, mean and 95% interval over seeds {view['seeds']}",
                 fontsize=9)
    fig.tight_layout()
    return fig


def regime_cost(view: dict, title: str | None = None):
    """Mean lift over the arm's domains (all lengths) against each method's whole-pipeline FLOPs
    (the teachers it reads included), log x, 95% intervals over the seeds."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, (k, m) in enumerate(view["methods"].items()):
        c = m.get("mean_lift")
        if not c or not m.get("pipeline_flops"):
            continue
        ax.errorbar([m["pipeline_flops"]], [c["mean"]], yerr=[0 if c["half"] != c["half"] else c["half"]], fmt="o",
                    color=_color(k, i), capsize=3)
        ax.annotate(m["label"], (m["pipeline_flops"], c["mean"]), textcoords="offset points", xytext=(5, 3), fontsize=7)
    ax.set_xscale("log")
    ax.axhline(0, color="black", lw=0.6)
    ax.set(xlabel="whole-pipeline FLOPs (teachers included, log scale)",
           ylabel=f"lift over the base, mean over {', '.join(view['domains'])}")
    ax.grid(alpha=0.3, which="both")
    ax.set_title(title or f"Arm {view['arm']}: what each method buys for its compute (seeds {view['seeds']})", fontsize=9)
    fig.tight_layout()
    return fig


def regime_kl(view: dict, title: str | None = None):
    """Arm 2: MOPD's per-token reverse KL to the teacher along the student's own sample, at the
    first and the last tracked step, one panel per loss form (mean over the tracked prompts and seeds)."""
    kl = view["kl"]
    fig, axes = plt.subplots(1, len(kl), figsize=(3.8 * len(kl), 3.5), squeeze=False, sharey=True)
    for ax, (loss, by_step) in zip(axes[0], kl.items()):
        for step in (min(by_step, key=int), max(by_step, key=int)):
            ys = by_step[step]
            ax.plot(range(len(ys)), ys, marker="o", label=f"step {step}")
        width = max(len(v) for v in by_step.values())
        names = view.get("positions", [])
        ax.set_xticks(range(width), [names[i] if i < len(names) else f"+{i - len(names) + 1}" for i in range(width)],
                      fontsize=7)
        ax.set_title(f"MOPD {loss}", fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("per-token reverse KL to the teacher")
    fig.suptitle(title or f"Where the dense signal lands (arm {view['arm']}, seeds {view['seeds']})", fontsize=9)
    fig.tight_layout()
    return fig


def regime_stuck(view: dict, title: str | None = None):
    """The stuck share per step (p_S(y) > 0.9 and log p_T(y) < -5, docs/stuck.md), one panel per MOPD
    method, one line per seed (dashed: a seed that fails the arm's gate), the warning's threshold
    dotted; gaps where a step has no share (an off-policy step of lmbda < 1). Every recorded seed."""
    st = view["stuck"]
    methods = list(st["methods"])
    cols = min(4, len(methods))
    rows = math.ceil(len(methods) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.3 * cols, 2.9 * rows), squeeze=False, sharex=True, sharey=True)
    for ax, k in zip(axes.flat, methods):
        for i, (seed, s) in enumerate(sorted(st["methods"][k]["seeds"].items(), key=lambda kv: int(kv[0]))):
            y = [np.nan if v is None else v for v in s["share"]]
            ax.plot(s["step"], y, lw=1, color=plt.get_cmap("tab10")(int(seed) % 10),
                    ls="-" if s["passes"] else "--", label=f"seed {seed}" + ("" if s["passes"] else " (fails gate)"))
        ax.axhline(st["threshold"], color="black", lw=0.8, ls=":")
        ax.set_title(textwrap.fill(st["methods"][k]["label"], 34), fontsize=7.5)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(methods):]:
        ax.axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("step", fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel(f"stuck share ({st['domain']})", fontsize=8)
    axes.flat[0].legend(fontsize=6)
    fig.suptitle(title or f"Arm {view['arm']}: the stuck share per step, every seed (dotted: the warning's "
                 f"{st['threshold']:.2f})", fontsize=9)
    fig.tight_layout()
    return fig


def regime_depth(view: dict, title: str | None = None):
    """Accuracy by length (or depth) for every method, mean over the seeds; held-out lengths shaded."""
    fig, axes = plt.subplots(1, len(view["domains"]), figsize=(6.5 * len(view["domains"]), 4), squeeze=False)
    for ax, d in zip(axes[0], view["domains"]):
        for i, (k, m) in enumerate(view["methods"].items()):
            by = m["by_length"].get(d)
            if by:
                Ls = sorted(by, key=int)
                ax.plot([int(L) for L in Ls], [by[L] for L in Ls], marker="o", color=_color(k, i), label=m["label"])
        for L in view["parts"][d]["held-out"]:
            ax.axvspan(L - 0.5, L + 0.5, color="0.9", zorder=0)
        ax.set(xlabel=f"{d}: length / depth (shaded: held out)", ylabel="test accuracy (mean over seeds)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    fig.suptitle(title or f"Arm {view['arm']}: accuracy by length", fontsize=9)
    fig.tight_layout()
    return fig


# every public function (and class method) of this module: its annotated arguments checked at a call from outside
# the package (mopd_mini.validate.guard_public); the package's own calls, e.g. the training loop's, skip the checks
from .validate import guard_public  # noqa: E402

guard_public(globals())
