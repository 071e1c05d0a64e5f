"""Plots for the course: readable at a glance, and saved as PNG files for slides.

    accuracy_by_length(table)        accuracy per domain and length, chance and binding floor drawn in
    cross_table(table)               each model (row) on each domain (column): who is good at what
    curves(runs, ["kl/binding"])     training curves, several runs and metrics overlaid
    token_heatmap(trace, "kl")       a completion's sampled tokens coloured by a per-token value
    step_maps(lab.trace_view(...))   notebook 03's step slider: one step's KL and advantage maps
    method_bars, score_vs_cost       notebook 05: normalised score by method; score against cost (log x)
    forgetting, sample_efficiency    Cascade RL forgetting curve; MOPD vs Mix-RL by prompts seen
    merge_sweep                      Param-Merge: normalised score against the merge weights
    stuck_gradient(curves, p)        notebook 08: each loss's gradient norm as p_S(wrong) -> 1 (log y)
    save(fig, "name")                PNG under figures/ (or any folder)

Inputs are the plain dicts the library returns (evaluate tables, Run.metrics, Run.trace); these
functions compute nothing that the library does not already log. The figures of the studies'
results (baselines_view, cost_curves, the ablations' and the regime study's) are in mopd_mini.views;
their old names here still work for one release, with a DeprecationWarning.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from . import deprecation
from .palette import COLORS
from .palette import color as _color

FIGURES = Path("figures")


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
    the student's confidence p_S(wrong) in a token the teacher rejects, drawn as 1 - p_S(wrong) on a
    log axis that grows confident to the right (so the reverse KL's fall, about (1 - p_S) times the
    KL, is a straight line), with the reverse KL's value on a second axis. `curves`: lab.stuck_curves' dict ({"p": [...], "KL": [...], loss: [...]});
    `p_wrong` marks one confidence (the slider's) with a dot on every curve."""
    p = np.asarray(curves["p"])
    x = 1.0 - p
    names = [k for k in curves if k not in ("p", "KL")]
    fig, ax = plt.subplots(figsize=(8, 4))
    for i, name in enumerate(names):
        y = np.asarray(curves[name])
        line, = ax.plot(x, y, lw=2, label=name, color=f"C{i}")
        if p_wrong is not None:
            at = float(np.interp(p_wrong, p, y))
            ax.plot([1.0 - p_wrong], [at], "o", color=line.get_color())
            ax.annotate(f"{at:.3g}", (1.0 - p_wrong, at), textcoords="offset points", xytext=(6, 4), fontsize=8,
                        color=line.get_color())
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.invert_xaxis()                      # the student grows confident to the right
    ax.set(xlabel="1 - p_S(wrong), log scale: the student's probability off the token the teacher rejects "
                  "(confident to the right)",
           ylabel="|| d loss / d student logits ||", title=title or "the gradient as the student grows confident")
    kl = ax.twinx()
    kl.plot(x, curves["KL"], "k:", lw=1, label="reverse KL (value, nats)")
    kl.set_ylabel("reverse KL (nats), dotted")
    if p_wrong is not None:
        ax.axvline(1.0 - p_wrong, color="grey", lw=0.5)
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# notebook 05: the baselines
# ---------------------------------------------------------------------------------------------


def method_bars(scores: dict, title: str = "Normalised score by method (0 = base, 1 = the domain's teacher)",
                paper: dict | None = None, domains=("binding", "recall", "mean"),
                paper_label: str = "the paper's Qwen3-30B-A3B, 3 other domains: another model's score"):
    """Grouped bars: one group per method, one bar per domain (and the mean), error bars.
    scores: {method: {domain: (value, error)}}; `paper`: {method: the paper's figure} drawn as a
    black tick on the mean bar, labelled `paper_label` (the paper's model and domains are not these:
    the tick is a reference, not a score of this setting)."""
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
                    label=paper_label if i == next(k for k, mm in enumerate(methods) if paper.get(mm) is not None) else None)
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


MOVED_TO_VIEWS = ("baselines_view", "cost_curves", "initial_kl", "origin_curves", "rounds", "ucmopd",
                  "regime_lift", "regime_cost", "regime_kl", "regime_depth")
"""the figures of study results, now in mopd_mini.views: their old names here warn for one release"""


__getattr__ = deprecation.old_names(__name__, {name: f"mopd_mini.views:{name}" for name in MOVED_TO_VIEWS})


# every public function (and class method) of this module: its annotated arguments checked at a call from outside
# the package (mopd_mini.validate.guard_public); the package's own calls, e.g. the training loop's, skip the checks
from .validate import guard_public  # noqa: E402

guard_public(globals())
