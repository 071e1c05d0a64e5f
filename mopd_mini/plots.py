"""Plots for the course: readable at a glance, and saved as PNG files for slides.

    accuracy_by_length(table)        accuracy per domain and length, chance and binding floor drawn in
    cross_table(table)               each model (row) on each domain (column): who is good at what
    curves(runs, ["kl/binding"])     training curves, several runs and metrics overlaid
    token_heatmap(trace, "kl")       a completion's sampled tokens coloured by a per-token value
    step_maps(lab.trace_view(...))   notebook 03's step slider: one step's KL and advantage maps
    method_bars, score_vs_cost       notebook 05: normalised score by method; score against cost (log x)
    forgetting, sample_efficiency    Cascade RL forgetting curve; MOPD vs Mix-RL by prompts seen
    merge_sweep                      Param-Merge: normalised score against the merge weights
    initial_kl(summary)              the ablations (notebook 06, docs/ablations.md): initial KL to
    origin_curves(results)           each binding teacher, the KL and accuracy curves of both origins,
    rounds(summary)                  round 1 vs round 2 (normalised against round 1),
    ucmopd(summary)                  UCMOPD vs MOPD per domain with the kept fractions
    regime_lift, regime_cost,        the regime study (notebook 07, docs/regimes.md): lift by domain,
    regime_kl, regime_depth          lift against pipeline FLOPs, arm 2's per-token KL, accuracy by depth
    stuck_gradient(curves, p)        notebook 08: each loss's gradient norm as p_S(wrong) -> 1 (log y)
    save(fig, "name")                PNG under figures/ (or any folder)

Inputs are the plain dicts the library returns (evaluate tables, Run.metrics, Run.trace); these
functions compute nothing that the library does not already log.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from .stats import mean_sd

COLORS = {"base": "#7f7f7f", "teacher_binding": "#1f77b4", "teacher_recall": "#ff7f0e", "student": "#2ca02c"}
FIGURES = Path("figures")


def _color(name: str, i: int) -> str:
    return COLORS.get(name, plt.get_cmap("tab10")(i % 10))


def save(fig, name: str, folder: str | Path = FIGURES) -> Path:
    """Write `fig` as <folder>/<name>.png (150 dpi) and return the path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    fig.savefig(path, dpi=150, bbox_inches="tight")
    return path


def accuracy_by_length(table: dict, title: str = "Greedy accuracy by length"):
    """One panel per domain: accuracy vs length for every model, with chance (1/agents for binding,
    1/N for recall) and the binding floor E[1/w]."""
    acc = table["acc"]
    domains = list(next(iter(acc.values())))
    fig, axes = plt.subplots(1, len(domains), figsize=(5 * len(domains), 3.6), squeeze=False)
    for ax, d in zip(axes[0], domains):
        for i, (name, by_domain) in enumerate(acc.items()):
            Ls = sorted(by_domain[d])
            ax.plot(Ls, [by_domain[d][L] for L in Ls], "o-", color=_color(name, i), label=name)
        Ls = sorted(next(iter(acc.values()))[d])
        chance = [1 / 5] * len(Ls) if d == "binding" else [1 / L for L in Ls]
        ax.plot(Ls, chance, ":", color="black", label="chance")
        if d == "binding" and table.get("floor"):
            ax.plot(Ls, [table["floor"][L] for L in Ls], "--", color="black", label="floor E[1/w]")
        ax.set(title=d, xlabel="length (binding: events; recall: facts)", ylabel="accuracy", ylim=(0, 1.02),
               xticks=Ls)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower left")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def cross_table(table: dict, title: str = "Each model on each domain (mean accuracy over eval lengths)"):
    """Heat map: rows are models, columns are domains, cells the mean accuracy."""
    acc = table["acc"]
    models, domains = list(acc), list(next(iter(acc.values())))
    grid = np.array([[np.mean(list(acc[m][d].values())) for d in domains] for m in models])
    fig, ax = plt.subplots(figsize=(1.8 * len(domains) + 2.5, 0.6 * len(models) + 1.2))
    im = ax.imshow(grid, cmap="Greens", vmin=0, vmax=1)
    for (i, j), v in np.ndenumerate(grid):
        ax.text(j, i, f"{v:.2f}", ha="center", va="center", color="white" if v > 0.6 else "black")
    ax.set(xticks=range(len(domains)), xticklabels=domains, yticks=range(len(models)), yticklabels=models,
           title=title, xlabel="domain", ylabel="model (adapter)")
    fig.colorbar(im, ax=ax, fraction=0.046, label="accuracy")
    fig.tight_layout()
    return fig


def curves(runs: dict[str, list[dict]], keys: str | list[str], ylabel: str = "", title: str = "",
           smooth: int = 1, ax=None):
    """Metrics against step: one colour per run, one line style per key (e.g. ["kl/binding",
    "kl/recall"]); `smooth` averages over a trailing window. Rows lacking a key (accuracy between
    evaluations, say) are skipped."""
    keys = [keys] if isinstance(keys, str) else list(keys)
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.6))
    styles = ["-", "--", ":", "-."]
    for i, (label, rows) in enumerate(runs.items()):
        for j, key in enumerate(keys):
            pts = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
            if not pts:
                continue
            steps, vals = map(np.array, zip(*pts))
            if smooth > 1 and len(vals) >= smooth:
                vals = np.convolve(vals, np.ones(smooth) / smooth, mode="valid")
                steps = steps[smooth - 1:]
            parts = [p for p in (label if len(runs) > 1 else "", key if len(keys) > 1 else "") if p]
            ax.plot(steps, vals, styles[j % 4], color=plt.get_cmap("tab10")(i % 10), label=" · ".join(parts) or key)
    ax.set(xlabel="step", ylabel=ylabel or keys[0], title=title or ", ".join(keys))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return ax.figure


VALUE_LABELS = {
    "kl": "exact reverse KL(p_S || p_T) at the position, nats",
    "advantage_raw": "advantage log pi_T(y) - log pi_S(y) before the clip, nats",
    "advantage": "advantage after the clip to [-c, c], nats",
    "kl_grad_norm": "norm of the reverse KL's gradient w.r.t. the logits",
    "student_logprob": "log pi_S(y) of the sampled token",
    "teacher_logprob": "log pi_T(y) of the sampled token",
}
"""what each per-token value of a trace is, for the heat maps' colour bars"""


def token_heatmap(trace: list[dict], value: str = "kl", steps: tuple[int, ...] | None = None,
                  domains=("binding", "recall"), cmap: str | None = None, vmax: float | None = None,
                  title: str | None = None, mark_stuck: bool = True, ax=None, label: str | None = None):
    """Rows: tracked completions (per domain, per recorded step); columns: their sampled tokens,
    each cell coloured by `value` ("kl", "advantage_raw", "advantage", "kl_grad_norm", ...) and
    labelled with the token and the number. KL uses a sequential map; advantages a diverging one
    centred at 0. `vmax` fixes the colour scale (pass the same one to maps that are compared:
    `lab.trace_scale`); by default each map scales to its own largest |value|, and the colour bar
    says which. `mark_stuck`: the tokens the trace flags as stuck (the student confident, the
    teacher rejecting it: `diagnostics.stuck_mask`) get a hatched cyan outline; a trace recorded
    before the flags existed draws without marks. `ax`: draw into it (else a new figure)."""
    steps = steps or sorted({r["step"] for r in trace})
    rows = [r for s in steps for d in domains for r in trace if r["step"] == s and r["domain"] == d]
    width = max(len(r["tokens"]) for r in rows)
    grid = np.full((len(rows), width), np.nan)
    for i, r in enumerate(rows):
        grid[i, : len(r[value])] = r[value]
    signed = value.startswith("adv")
    top = vmax or max(np.nanmax(np.abs(grid)), 1e-3)
    if ax is None:
        fig, ax = plt.subplots(figsize=(1.3 * width + 3, 0.42 * len(rows) + 1.4))
    fig = ax.figure
    im = ax.imshow(grid, cmap=cmap or ("RdBu" if signed else "magma_r"), vmin=-top if signed else 0, vmax=top,
                   aspect="auto")
    for i, r in enumerate(rows):
        for j, tok in enumerate(r["tokens"]):
            v = r[value][j]
            dark = abs(v) > 0.6 * top
            ax.text(j, i, f"{tok.lstrip('▁Ġ')}\n{v:+.2f}" if signed else f"{tok.lstrip('▁Ġ')}\n{v:.2f}",
                    ha="center", va="center", fontsize=7, color="white" if dark else "black")
            if mark_stuck and r.get("stuck", ())[j:j + 1] == [True]:
                ax.add_patch(plt.Rectangle((j - 0.46, i - 0.46), 0.92, 0.92, fill=False, hatch="///",
                                           edgecolor="cyan", linewidth=2, gid="stuck"))
    if mark_stuck and any(any(r.get("stuck", ())) for r in rows):
        ax.plot([], [], "s", mfc="none", mec="cyan", mew=2, label="stuck: p_S(y) high, p_T(y) tiny")
        ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)
    ax.set(xticks=range(width), xticklabels=[f"t{j}" for j in range(width)], yticks=range(len(rows)),
           yticklabels=[f"step {r['step']} · {r['domain']} · gold {r['answer']}" for r in rows],
           xlabel="position in the sampled completion (t0: the first generated token)",
           ylabel="tracked completion",
           title=title or f"per-token {value} of sampled completions")
    scale = f"colour scale {'±' if signed else '0..'}{top:.2f}" + ("" if vmax else ", this map's own")
    fig.colorbar(im, ax=ax, fraction=0.03, label=f"{label or VALUE_LABELS.get(value, value)}\n({scale})")
    if len(fig.axes) <= 2:
        fig.tight_layout()
    return fig


def step_maps(view: dict, domains=("binding", "recall")):
    """The step slider's figure (notebook 03): the tracked samples of one step (`lab.trace_view`),
    their per-token KL (left) and advantage before the clip (right), each on the colour scale
    fixed over every tracked step."""
    rows, step = view["rows"], view["step"]
    width = max(len(r["tokens"]) for r in rows)
    from matplotlib.figure import Figure   # off pyplot: the slider draws its steps in a background thread

    fig = Figure(figsize=(2 * (1.3 * width + 3.5), 0.42 * len(rows) + 1.6))
    a, b = fig.subplots(1, 2)
    token_heatmap(rows, "kl", domains=domains, vmax=view["kl_max"], ax=a, title=f"per-token reverse KL, step {step}",
                  label="exact reverse KL, nats (scale fixed over all steps)")
    token_heatmap(rows, "advantage_raw", domains=domains, vmax=view["advantage_max"], ax=b,
                  title=f"advantage before the clip, step {step}",
                  label="log pi_T - log pi_S, nats (scale fixed over all steps)")
    fig.tight_layout()
    return fig


def gradient_bars(grads: dict, student_logits, teacher_logits, title: str = ""):
    """Left: p_S and p_T over a small vocabulary. Right: each loss's gradient per logit (what a
    descent step subtracts; bars of the same sign as "exact KL" push the same way)."""
    import torch

    p_S, p_T = (torch.as_tensor(z, dtype=torch.float64).softmax(-1).numpy() for z in (student_logits, teacher_logits))
    V, n = len(p_S), len(grads)
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 3.6), gridspec_kw={"width_ratios": [1, 2]})
    a.bar(np.arange(V) - 0.2, p_S, 0.4, label="student p_S")
    a.bar(np.arange(V) + 0.2, p_T, 0.4, label="teacher p_T")
    a.set(xlabel="token", ylabel="probability", title="the two distributions", xticks=range(V))
    a.legend(fontsize=8)
    width = 0.8 / n
    for i, (name, g) in enumerate(grads.items()):
        b.bar(np.arange(V) - 0.4 + width * (i + 0.5), np.asarray(g), width, label=name)
    b.axhline(0, color="black", lw=0.5)
    b.set(xlabel="token", ylabel="d loss / d student logit", title=title or "per-logit gradient of each loss form",
          xticks=range(V))
    b.legend(fontsize=8)
    fig.tight_layout()
    return fig


def stuck_gradient(curves: dict, p_wrong: float | None = None, title: str = ""):
    """Notebook 08: the norm of each loss's gradient w.r.t. the student's logits (log scale) against
    the student's confidence p_S(wrong) in a token the teacher rejects, with the reverse KL's value
    on a second axis. `curves`: lab.stuck_curves' dict ({"p": [...], "KL": [...], loss: [...]});
    `p_wrong` marks one confidence (the slider's) with a dot on every curve."""
    p = np.asarray(curves["p"])
    names = [k for k in curves if k not in ("p", "KL")]
    fig, ax = plt.subplots(figsize=(8, 4))
    for i, name in enumerate(names):
        y = np.asarray(curves[name])
        line, = ax.plot(p, y, lw=2, label=name, color=f"C{i}")
        if p_wrong is not None:
            at = float(np.interp(p_wrong, p, y))
            ax.plot([p_wrong], [at], "o", color=line.get_color())
            ax.annotate(f"{at:.3g}", (p_wrong, at), textcoords="offset points", xytext=(6, 4), fontsize=8,
                        color=line.get_color())
    ax.set_yscale("log")
    ax.set(xlabel="p_S(wrong): the student's probability on the token the teacher rejects",
           ylabel="|| d loss / d student logits ||", title=title or "the gradient as the student grows confident")
    kl = ax.twinx()
    kl.plot(p, curves["KL"], "k:", lw=1, label="reverse KL (value, nats)")
    kl.set_ylabel("reverse KL (nats), dotted")
    if p_wrong is not None:
        ax.axvline(p_wrong, color="grey", lw=0.5)
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# notebook 05: the baselines
# ---------------------------------------------------------------------------------------------


def method_bars(scores: dict, title: str = "Normalised score by method (0 = base, 1 = the domain's teacher)",
                paper: dict | None = None, domains=("binding", "recall", "mean")):
    """Grouped bars: one group per method, one bar per domain (and the mean), error bars.
    scores: {method: {domain: (value, error)}}; `paper`: {method: the paper's figure} drawn as a
    black tick on the mean bar."""
    methods = list(scores)
    width = 0.8 / len(domains)
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(methods) + 2), 3.8))
    x = np.arange(len(methods))
    for j, d in enumerate(domains):
        vals = [scores[m].get(d, (np.nan, 0))[0] for m in methods]
        errs = [scores[m].get(d, (np.nan, 0))[1] for m in methods]
        ax.bar(x - 0.4 + width * (j + 0.5), vals, width, yerr=errs, capsize=2, label=d,
               color=COLORS.get(f"teacher_{d}", "#2ca02c" if d == "mean" else None))
    for i, m in enumerate(methods):
        if paper and paper.get(m) is not None:
            xm = i - 0.4 + width * (len(domains) - 0.5)
            ax.plot([xm - width / 2, xm + width / 2], [paper[m]] * 2, color="black", lw=2,
                    label="the paper (mean)" if i == next(k for k, mm in enumerate(methods) if paper.get(mm) is not None) else None)
    ax.axhline(0, color="black", lw=0.6)
    ax.axhline(1, color="black", lw=0.6, ls="--")
    ax.set(xticks=x, ylabel="normalised score", title=title)
    ax.set_xticklabels(methods, rotation=30, ha="right")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8, ncol=4)
    fig.tight_layout()
    return fig


def score_vs_cost(panels: dict, xlabel: str = "FLOPs (estimate, log scale)",
                  title: str = "Score against cost: what each method buys per unit of compute"):
    """One panel per cost view, one labelled point per method: x = cost (log axis), y = mean
    normalised score +/- error. panels: {panel title: {method: (cost, score, error)}}; a method
    of cost 0 (a merge, in the stage-only view) is drawn at the left edge, marked "no training"."""
    fig, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 4.2), squeeze=False, sharey=True)
    for ax, (panel, points) in zip(axes[0], panels.items()):
        positive = [c for c, _, _ in points.values() if c > 0]
        floor = min(positive) / 10 if positive else 1.0
        for i, (m, (c, s, e)) in enumerate(points.items()):
            xc = c if c > 0 else floor
            ax.errorbar([xc], [s], yerr=[e], fmt="o", color=_color(m, i), capsize=3)
            ax.annotate(m + (" (no training)" if c <= 0 else ""), (xc, s), textcoords="offset points",
                        xytext=(5, 4), fontsize=8)
        ax.set_xscale("log")
        ax.axhline(1, color="black", lw=0.6, ls="--")
        ax.axhline(0, color="black", lw=0.6)
        ax.set(xlabel=xlabel, title=panel)
        ax.grid(alpha=0.3, which="both")
    axes[0][0].set_ylabel("mean normalised score")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def cost_curves(panels: dict, xlabel: str = "whole-pipeline FLOPs (teachers included, log scale)", title: str = ""):
    """One panel per measure, one line per method through its points, each point a budget:
    panels {panel title (the y label): {method: [(cost, value, error, marker label), ...]}}. The
    matched-budget figure (bench.matched): every method at every teacher budget T, against what
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


def _domain_curve(rows: list[dict], domain: str):
    """(steps, mean accuracy over the domain's logged lengths) from a run's metrics."""
    pts = [(r["step"], np.mean([v for k, v in r.items() if k.startswith(f"acc/{domain}/")]))
           for r in rows if any(k.startswith(f"acc/{domain}/") for k in r)]
    return tuple(map(np.array, zip(*pts))) if pts else (np.array([]), np.array([]))


def forgetting(stages: dict, title: str = "Cascade RL: the first domain during the second stage"):
    """One panel per cascade order. stages: {label: (second-stage metrics, first domain, second
    domain, (first-domain accuracy and second-domain accuracy before the stage))}: solid, the
    first domain (what is forgotten); dashed, the second (what is learned); step 0 is the
    adapter the stage started from."""
    fig, axes = plt.subplots(1, len(stages), figsize=(5.2 * len(stages), 3.6), squeeze=False)
    for ax, (label, (rows, first, second, start)) in zip(axes[0], stages.items()):
        for d, style, s0 in ((first, "o-", start[0]), (second, "s--", start[1])):
            steps, acc = _domain_curve(rows, d)
            ax.plot(np.r_[0, steps], np.r_[s0, acc], style, color=COLORS.get(f"teacher_{d}"),
                    label=f"{d} ({'first' if d == first else 'second'} stage's domain)")
        ax.set(title=label, xlabel="step of the second stage", ylabel="greedy accuracy (mean over lengths)",
               ylim=(0, 1.02))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def sample_efficiency(curves: dict, title: str = "MOPD against Mix-RL at equal prompts per domain",
                      xlabel: str = "training prompts seen per domain", ylabel: str = "mean normalised score", ax=None):
    """Mean normalised score against prompts seen per domain. curves: {label: (prompts, scores)}."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.8))
    fig = ax.figure
    for i, (label, (x, y)) in enumerate(curves.items()):
        ax.plot(x, y, "o-", color=plt.get_cmap("tab10")(i % 10), label=label)
    ax.axhline(1, color="black", lw=0.6, ls="--")
    ax.axhline(0, color="black", lw=0.6)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def forgetting_normalised(curves: dict, title: str = ""):
    """Cascade RL's forgetting from saved results (`baselines_view(...)["forgetting"]`): one panel per
    cascade, each domain's normalised score during the second stage. curves: {cascade: {domain:
    (steps, scores)}}. (`forgetting` draws the same from a live run's accuracies.)"""
    fig, axes = plt.subplots(1, len(curves), figsize=(6 * len(curves), 3.6), squeeze=False)
    for ax, (name, by_domain) in zip(axes[0], curves.items()):
        sample_efficiency(by_domain, title=f"{name}: normalised score during the second stage", ax=ax,
                          xlabel="step of the second stage", ylabel="normalised score (val)")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def merge_sweep(sweep: dict, title: str = "Param-Merge weight sweep",
                domains=("binding", "recall", "mean")):
    """Normalised score per domain against the merge weights. sweep: {how: {label: {domain:
    score}}}, label e.g. "1/1" (w_binding / w_recall); one panel per merge type."""
    xlabel = "weights  w_binding / w_recall" if all("/" in lab for pts in sweep.values() for lab in pts) else "setting"
    fig, axes = plt.subplots(1, len(sweep), figsize=(4.6 * len(sweep), 3.6), squeeze=False, sharey=True)
    for ax, (how, points) in zip(axes[0], sweep.items()):
        labels = list(points)
        for d in domains:
            ax.plot(range(len(labels)), [points[lab][d] for lab in labels], "o-" if d != "mean" else "--",
                    color=COLORS.get(f"teacher_{d}", "black"), label=d)
        ax.set(title=how, xticks=range(len(labels)), xlabel=xlabel)
        ax.set_xticklabels(labels, rotation=30)
        ax.axhline(0, color="black", lw=0.6)
        ax.axhline(1, color="black", lw=0.6, ls=":")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("normalised score")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def baselines_view(rep: dict) -> dict:
    """What the figures need from docs/baselines.json (written by `python -m bench.baselines`):
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
# the ablations (mopd_mini.ablations.summary gives `summary`; bench/ablations.py the results)
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
# bench.regimes stores in docs/regimes.json["views"][arm] (means and 95% t-intervals over seeds)
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
