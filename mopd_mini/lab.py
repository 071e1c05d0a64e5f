"""The plain functions behind the course's widgets (notebooks 03, 04 and 08).

    categorical_gradients(z_S, z_T, clip=5.0, k=3)   per-logit gradient of every loss form, exactly
    clip_bias_variance(z_S, z_T, clips)              PG's single-sample variance and bias^2 per clip, exactly
    pg_logit_gradient / check_pg_logit_gradient      MOPD-PG's gradient on every logit, -M A/(B' L_b)(e_y - pi_S)
    topk_off_set(z_T, k, off_logits)                 Top-k's blind spot: 0 for a student equal to the
                                                     teacher on its top-k set, whatever it does off it
    short_run(bank, loss="topk", k=8, steps=40)      a short MOPD run, in memory, for overlays
    load_grid() / grid_cell(grid, "pg", clip=0.5)    the precomputed grid of short runs, one cell
    lab_curves(grid, history, "pg", 0.5, 64, True)   what the loss lab draws for a setting
    trace_view(trace, step) / answer_kl(trace)       the step slider's rows and fixed colour scales
    two_step_gradients() / seq_kl_checks(out)        per token or per sequence: the sequence KL's gradient,
                                                     the per-token one and the return-to-go term (04 section 2)
    stuck_gradients(p_wrong, beta=0.5)               each loss's gradient norm on a confidently wrong
                                                     5-token categorical (notebook 08's slider)

All run headless (so a test or a CI notebook run asserts on them); the widgets only wrap them.

The grid (mopd_mini/data/loss_lab_grid.json) is made by

    cd notebooks && python -m mopd_mini.lab --make-grid

in the full mode, with notebook 02's teachers (reloaded from runs/, trained if missing): one short
run per cell of GRID, the runs shared where a knob has no effect on training (PG ignores k and
the correction, Top-k ignores the clip, the exact KL all three; k still sets the logged top-k
masses, logged at the config's k = 64 in a shared run). `grid_config()` is what it was made with;
tests/test_widgets.py checks the file against it (`grid_staleness`).
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

from .config import MOPDConfig, new_values
from .distill import train_student
from .losses import jsd_loss, pg_loss, reverse_kl, forward_kl, topk_reverse_kl

LR = 3e-3
"""the lab's learning rate: 3x notebook 03's 1e-3 (MOPDConfig().lr), so that a 60-step run moves
the student far enough to tell the forms apart; lab runs compare with each other, not with 03's"""
STEPS = 60
"""steps of one short run in the grid (and of the live run in the full mode)"""
GRID = {"clips": [0.5, 2.0, 5.0, None], "ks": [1, 4, 64], "corrections": [True, False]}
FORMS = ("pg", "topk", "kl")
"""the loss forms the lab offers: PG, Top-k and the exact KL (one minimiser; Top-k's only on the
teacher's set), all on the grid"""
"""the grid's axes: PG at each clip (None: no clip), Top-k at each k with and without the
correction, the exact KL once"""
GRID_PATH = Path(__file__).parent / "data" / "loss_lab_grid.json"
KEPT = ("step", "kl", "kl/", "clipped/", "student_topk_mass/", "teacher_topk_mass/", "acc/")
"""the metrics a grid cell keeps (what the lab's figures and tables read)"""


def categorical_gradients(student_logits, teacher_logits, clip: float | None = 5.0, k: int = 3,
                          correction: bool = True) -> dict[str, torch.Tensor]:
    """Gradient of each loss w.r.t. the student's logits at ONE position of a small vocabulary.

    The PG forms are the EXACT expectation over the sampled token (sum_y p_S(y) * the gradient of
    the surrogate at y), so the panel shows what the estimators do on average, free of noise.
    Returns {"exact KL", "PG (no clip)", "PG (clip c)", "top-k", ...}: each a (V,) tensor."""
    z_T = torch.as_tensor(teacher_logits, dtype=torch.float64).view(1, 1, -1)
    V = z_T.shape[-1]
    ones = torch.ones(1, 1, dtype=torch.float64)

    def grad(loss_fn) -> torch.Tensor:
        z_S = torch.as_tensor(student_logits, dtype=torch.float64).view(1, 1, -1).clone().requires_grad_(True)
        loss_fn(z_S).backward()
        return z_S.grad.view(V)

    def expected_pg(c):
        def loss(z_S):
            log_p_S, log_p_T = z_S.log_softmax(-1)[0, 0], z_T.log_softmax(-1)[0, 0]   # (V,)
            return sum(log_p_S[y].exp().detach() * pg_loss(log_p_S[y].view(1, 1), log_p_T[y].view(1, 1), ones, clip=c)[0]
                       for y in range(V))                                           # E_y~p_S[surrogate]
        return loss

    top_ids = z_T.topk(k, dim=-1).indices                                           # (1, 1, k)
    top_logp = z_T.log_softmax(-1).gather(-1, top_ids)
    out = {"exact KL": grad(lambda z: reverse_kl(z, z_T, ones)[0]),
           "PG (no clip)": grad(expected_pg(None)),
           f"PG (clip {clip})": grad(expected_pg(clip))}
    out[f"top-{k}" + ("" if correction else " (no correction)")] = grad(
        lambda z: topk_reverse_kl(z, top_ids, top_logp, ones, correction=correction)[0])
    return out


def topk_off_set(teacher_logits, k: int, off_set_logits) -> dict:
    """Top-k's blind spot at ONE position: a student equal to the teacher on the teacher's top-k set
    S (p_S(v) = p_T(v) for v in S, so it puts exactly 1 - m_T off the set) that arranges its
    off-set mass by softmax(`off_set_logits`) over the V - k tokens off S, in id order.

    Returns {"p_S", "p_T": (V,), "teacher top-k mass": m_T, "top-k": the corrected Top-k loss,
    "top-k gradient": the largest |d loss / d logit|, "exact KL": KL(p_S || p_T)}, float64, through
    the library's losses: the Top-k loss and its gradient are 0 whatever the off-set logits, the exact
    KL is not."""
    z_T = torch.as_tensor(teacher_logits, dtype=torch.float64)
    V = len(z_T)
    log_p_T = z_T.log_softmax(-1)
    ids = z_T.topk(k).indices                                                      # (k,) the set S
    off = torch.tensor([v for v in range(V) if v not in set(ids.tolist())])       # (V - k,)
    m_T = log_p_T[ids].exp().sum()
    log_p_S = torch.empty(V, dtype=torch.float64)
    log_p_S[ids] = log_p_T[ids]
    log_p_S[off] = (1 - m_T).log() + torch.as_tensor(off_set_logits, dtype=torch.float64).log_softmax(-1)
    z = log_p_S.clone().view(1, 1, V).requires_grad_(True)
    one = torch.ones(1, 1, dtype=torch.float64)
    loss = topk_reverse_kl(z, ids.view(1, 1, k), log_p_T[ids].view(1, 1, k), one)[0]
    loss.backward()
    return {"p_S": log_p_S.exp(), "p_T": log_p_T.exp(), "teacher top-k mass": m_T.item(), "top-k": loss.item(),
            "top-k gradient": z.grad.abs().max().item(),
            "exact KL": reverse_kl(z.detach(), z_T.view(1, 1, V), one)[0].item()}


def clip_bias_variance(student_logits, teacher_logits, clips=(None, 2.0, 1.0, 0.5, 0.1)) -> list[dict]:
    """MOPD-PG's single-sample gradient at ONE position, -clip(A(y), -c, c) (e_y - p_S) with y ~ p_S,
    against the exact reverse KL's gradient, per clip c (None: no clip), exactly over the V tokens:

        variance = E_y || g_c(y) - E[g_c] ||^2      (the trace of one sample's covariance)
        bias^2   = || E[g_c] - grad KL ||^2          error = variance + bias^2 (one sample's mean squared error)

    Returns one dict per clip: {"clip", "variance", "bias^2", "error", "clipped mass"} (the
    probability that the sampled token's advantage is clipped), float64."""
    z_S = torch.as_tensor(student_logits, dtype=torch.float64)
    z_T = torch.as_tensor(teacher_logits, dtype=torch.float64)
    log_p = z_S.log_softmax(-1)
    p, A = log_p.exp(), z_T.log_softmax(-1) - log_p                                # (V,) p_S, A(y)
    exact = p * (-A - (p * -A).sum())                                              # (V,) p (log p/q - KL)
    score = torch.eye(len(p), dtype=torch.float64) - p                            # (V, V) row y: e_y - p_S
    rows = []
    for c in clips:
        a = A if c is None else A.clamp(-c, c)
        g = -a[:, None] * score                                                    # (V, V) row y: g_c(y)
        mean = (p[:, None] * g).sum(0)                                             # (V,) E[g_c]
        variance = (p * ((g - mean) ** 2).sum(1)).sum().item()
        bias2 = ((mean - exact) ** 2).sum().item()
        rows.append({"clip": c, "variance": variance, "bias^2": bias2, "error": variance + bias2,
                     "clipped mass": 0.0 if c is None else p[A.abs() > c].sum().item()})
    return rows


def pg_logit_gradient(logits, ids, advantage, mask) -> torch.Tensor:
    """The closed form of MOPD-PG's gradient with respect to EVERY logit (notebook 03, step 5):

        dL / dz_btv = - M_bt A_bt / (B' L_b) * ([v = y_bt] - pi_S(v | x, y_b<t))

    with A the (clipped, held constant) advantage, L_b = sum_t M_bt and B' the completions with at
    least one token (losses.masked_mean's weights). logits (B, C, V), ids (B, C), advantage (B, C),
    mask (B, C); returns (B, C, V) in float64."""
    p = logits.detach().double().softmax(-1)                                       # (B, C, V)
    M = mask.detach().double()                                                     # (B, C)
    L = M.sum(1, keepdim=True)                                                     # (B, 1)
    B_prime = int((L > 0).sum())
    weight = M * advantage.detach().double() / (B_prime * L.clamp(min=1))          # (B, C)
    onehot = torch.nn.functional.one_hot(ids, p.shape[-1]).double()                # (B, C, V)
    return -weight[..., None] * (onehot - p)


def check_pg_logit_gradient(grad, logits, ids, advantage, mask, rtol: float = 1e-4) -> float:
    """Assert that `grad` (autograd's dL/dlogits, (B, C, V)) is `pg_logit_gradient`'s closed form on
    every logit, to `rtol` of the largest entry; returns the largest absolute difference. It fails
    for a loss without the stop-gradient, without the 1/B' or 1/L_b weights, or with the sign flipped."""
    want = pg_logit_gradient(logits, ids, advantage, mask)
    diff = (grad.detach().double() - want).abs().max().item()
    scale = want.abs().max().item()
    assert diff <= rtol * scale, (f"autograd's gradient differs from -M A / (B' L_b) (e_y - pi_S) by {diff:.3g} "
                                  f"(largest entry {scale:.3g})")
    return diff


def short_run(bank, steps: int = STEPS, model: str = "tiny", lr: float = LR, **overrides):
    """A short MOPD run kept in memory (no checkpoints), for comparing loss settings side by side.
    The student adapter is re-created fresh every time; returns the Run (metrics, trace).
    The lab trains at 3x the course's learning rate so that a run is done in seconds on a CPU
    (60 steps: about 10 s on the tiny model); compare lab runs with each other, not with 03's."""
    return train_student(bank, replace(lab_config(steps, model, lr), **overrides))


def lab_config(steps: int = STEPS, model: str = "tiny", lr: float = LR) -> MOPDConfig:
    """The config of a short run before its loss settings: the model's defaults, `steps` steps at
    `lr`, four evaluations of 32 prompts per length, nothing tracked or saved."""
    return replace(MOPDConfig.for_model(model), steps=steps, lr=lr, eval_every=max(1, steps // 4), eval_n=32,
                   track_steps=(), experiment=None, progress=False, student="lab_student")


# ---------------------------------------------------------------------------------------------
# the precomputed grid of short runs (notebook 04's loss lab)
# ---------------------------------------------------------------------------------------------


def cell_label(loss: str, clip: float | None = 5.0, k: int = 64, correction: bool = True) -> str:
    """A run's name in the lab's legends: "pg c=0.5", "pg no clip", "top-4", "top-4 naive", "exact kl"."""
    if loss == "pg":
        return "pg no clip" if clip is None else f"pg c={clip:g}"
    if loss == "topk":
        return f"top-{k}" + ("" if correction else " naive")
    return "exact kl" if loss == "kl" else loss


def knobs_read(loss: str, clip: float | None = 5.0, k: int = 64, correction: bool = True) -> dict:
    """The MOPDConfig overrides of a lab setting that its loss reads: the clip for PG, the
    correction for Top-k, k always (the teacher's top-k set, and the logged top-k masses). A knob
    the loss ignores is left at its default, which MOPDConfig.check asks (`config.READ_ONLY_WITH`)."""
    knobs = {"loss": loss, "topk": k}
    if loss == "pg":
        knobs["clip"] = clip
    if loss == "topk":
        knobs["topk_correction"] = correction
    return knobs


def grid_settings(grid: dict = GRID) -> list[dict]:
    """One entry per distinct run of the grid: the knobs that change training, the rest shared."""
    cells = [{"loss": "pg", "clip": c} for c in grid["clips"]]
    cells += [{"loss": "topk", "topk": k, "topk_correction": corr} for k in grid["ks"] for corr in grid["corrections"]]
    return cells + [{"loss": "kl"}]


def _jsonable(x):
    return json.loads(json.dumps(x, default=str))


def grid_config() -> dict:
    """What the grid is made with, as JSON holds it: the axes, the student's short-run config (tiny
    model, full mode) and the teachers' configs. The committed file must carry exactly this."""
    from .config import GRPOConfig

    return _jsonable({"grid": GRID, "steps": STEPS, "lr": LR, "student": asdict(lab_config(STEPS, "tiny", LR)),
                      "teachers": {d: asdict(GRPOConfig(domain=d)) for d in MOPDConfig().domains}})


def grid_staleness(grid: dict) -> list[str]:
    """How the grid's config differs from the code's (`grid_config()`), one line per field; empty
    when the grid is current. A trainer field newer than the grid counts at the value it had
    before it existed (`runs.ADDED_FIELDS`, as a resumed run does), so adding a field that keeps
    the old behaviour does not stale the grid."""
    from . import runs

    added = getattr(runs, "ADDED_FIELDS", {})
    made, now = grid["config"], grid_config()
    diffs = [f"{k}: grid {made.get(k)!r}, code {now[k]!r}" for k in ("grid", "steps", "lr") if made.get(k) != now[k]]
    pairs = [("student", made.get("student", {}), now["student"])]
    pairs += [(f"teachers.{d}", made.get("teachers", {}).get(d, {}), now["teachers"][d]) for d in now["teachers"]]
    for name, old, new in pairs:
        old = {**{k: v for k, v in _jsonable(added).items() if k in new}, **old}
        diffs += [f"{name}.{k}: grid {old.get(k, '<absent>')!r}, code {new.get(k, '<absent>')!r}"
                  for k in sorted(set(old) | set(new)) if old.get(k, "<absent>") != new.get(k, "<absent>")]
    return diffs


def _kept(rows: list[dict]) -> list[dict]:
    return [{k: round(v, 5) if isinstance(v, float) else v for k, v in r.items()
             if k == "step" or k == "kl" or k.startswith(KEPT[2:])} for r in rows]


def run_cell(bank, setting: dict, steps: int = STEPS, lr: float = LR) -> list[dict]:
    """One grid cell's metrics: a short run of the tiny model with `setting`, trimmed to KEPT."""
    return _kept(short_run(bank, steps=steps, model="tiny", lr=lr, **setting).metrics)


def make_grid(bank, path: Path | None = GRID_PATH) -> dict:
    """Run every cell of GRID on the teachers in `bank` and write the grid (JSON) to `path`."""
    from . import runs

    if runs.FAST:
        raise SystemExit("the grid is made in the full mode: unset MOPD_FAST (its teachers are the full ones)")
    started, cells = time.perf_counter(), []
    for setting in grid_settings():
        t = time.perf_counter()
        label = cell_label(setting["loss"], setting.get("clip"), setting.get("topk", 64), setting.get("topk_correction", True))
        cells.append({"label": label, **setting, "metrics": run_cell(bank, setting)})
        print(f"{label:14} {time.perf_counter() - t:5.1f} s", flush=True)
    grid = {"config": grid_config(), "seconds": round(time.perf_counter() - started, 1), "cells": cells,
            "made_by": "cd notebooks && python -m mopd_mini.lab --make-grid"}
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(grid, indent=0) + "\n")
    return grid


def load_grid(path: Path = GRID_PATH) -> dict:
    """The committed grid (package data: an installed package has it too)."""
    return json.loads(Path(path).read_text())


def _same(a, b) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and math.isclose(a, b))


def grid_cell(grid: dict, loss: str, clip: float | None = 5.0, k: int = 64, correction: bool = True) -> dict | None:
    """The grid's run for a setting, or None when the grid lacks it. Knobs without effect on the
    loss form are ignored (PG: k and the correction; Top-k: the clip; the exact KL: all)."""
    for cell in grid["cells"]:
        if cell["loss"] != loss:
            continue
        if (loss == "kl" or (loss == "pg" and _same(cell["clip"], clip))
                or (loss == "topk" and cell["topk"] == k and cell["topk_correction"] == bool(correction))):
            return cell
    return None


REFERENCE = ("pg", 5.0, 64, True)
"""the setting every grid view is drawn against: the trainer's defaults"""


def lab_curves(grid: dict, history: dict, loss: str, clip: float | None, k: int, correction: bool) -> tuple[dict, str]:
    """What the loss lab draws for a setting, and a one-line note: the runs in `history` (the
    notebook's and the live ones), the grid's run at the trainer's defaults and the grid's run of
    the setting, if it has one (else the note says to train it live)."""
    curves = dict(history)
    ref = grid_cell(grid, *REFERENCE)
    curves[f"grid · {ref['label']}"] = ref["metrics"]
    cell = grid_cell(grid, loss, clip, k, correction)
    if cell is None:
        note = (f"{cell_label(loss, clip, k, correction)} is not on the grid (clips {GRID['clips']}, k {GRID['ks']}): "
                "train it fresh with the button")
    else:
        curves[f"grid · {cell['label']}"] = cell["metrics"]
        note = f"grid · {cell['label']}: precomputed, {grid['config']['steps']} steps at lr {grid['config']['lr']:g}"
    return curves, note


def window_means(rows: list[dict], key: str = "kl", frac: float = 0.2) -> tuple[float, float]:
    """The mean of `key` over the first and over the last `frac` of a run's steps."""
    vals = [r[key] for r in rows if r.get(key) is not None]
    n = max(1, int(len(vals) * frac))
    return sum(vals[:n]) / n, sum(vals[-n:]) / n


def window_se(rows: list[dict], key: str = "kl", frac: float = 0.2) -> float:
    """The within-run standard error of the last `frac` of the steps' mean of `key`: their standard
    deviation over sqrt(n). Steps are treated as independent (they are not quite: consecutive steps
    share the adapter), and it says nothing about another seed: one run's noise, not a seed spread."""
    vals = [r[key] for r in rows if r.get(key) is not None]
    n = max(1, int(len(vals) * frac))
    last = vals[-n:]
    if n < 2:
        return float("nan")
    mean = sum(last) / n
    return (sum((v - mean) ** 2 for v in last) / (n - 1) / n) ** 0.5


def grid_table(grid: dict, key: str = "kl") -> list[tuple[str, float, float]]:
    """(label, first fifth's mean, last fifth's mean) of `key` for every grid cell."""
    return [(c["label"], *window_means(c["metrics"], key)) for c in grid["cells"]]


# ---------------------------------------------------------------------------------------------
# the lessons' checks on a run's metrics (notebooks 02-04), factored so a test can make them fail
# ---------------------------------------------------------------------------------------------


def kl_falls(metrics: list[dict], domains, k: int, factor: float = 0.5) -> dict[str, tuple[float, float]]:
    """{domain: (mean of kl/<d> over the first k steps, over the last k)}; asserts, PER DOMAIN, that the
    last is below `factor` times the first (a sum over the domains could fall while one rises)."""
    out = {}
    for d in domains:
        first = sum(r[f"kl/{d}"] for r in metrics[:k]) / len(metrics[:k])
        final = sum(r[f"kl/{d}"] for r in metrics[-k:]) / len(metrics[-k:])
        out[d] = (first, final)
    for d, (first, final) in out.items():
        assert final < factor * first, f"the KL to the {d} teacher should fall below {factor:g}x its start: {first:.3f} -> {final:.3f}"
    return out


def topk_masses(rows: list[dict], domain: str = "binding", frac: float = 0.2) -> dict[str, float]:
    """A Top-k run's student and teacher mass on the teacher's top-k set, mean of the first and of the
    last `frac` of the steps: {"student first", "student last", "teacher first", "teacher last"}."""
    s = window_means(rows, f"student_topk_mass/{domain}", frac)
    t = window_means(rows, f"teacher_topk_mass/{domain}", frac)
    return {"student first": s[0], "student last": s[1], "teacher first": t[0], "teacher last": t[1]}


def naive_topk_leaves_the_set(corrected: list[dict], naive: list[dict], domain: str = "binding",
                              frac: float = 0.2, drop: float = 0.2, near: float = 0.15) -> dict:
    """Notebook 04's naive Top-k check on two short runs' metrics: the naive student's mass on the
    teacher's top-k set FALLS (by more than `drop`, first fifth to last), and the corrected student's
    ends within `near` of the teacher's own. Comparing only the two gaps would pass with both masses
    rising. Returns both runs' `topk_masses`."""
    c, n = topk_masses(corrected, domain, frac), topk_masses(naive, domain, frac)
    assert n["student last"] < n["student first"] - drop, \
        f"the naive loss should move the student's mass off the set: {n['student first']:.3f} -> {n['student last']:.3f}"
    assert c["teacher last"] - c["student last"] < near, \
        f"the corrected student's mass should end near the teacher's: {c['student last']:.3f} vs {c['teacher last']:.3f}"
    return {"corrected": c, "naive": n}


# ---------------------------------------------------------------------------------------------
# the step slider over a student's tracked samples (notebook 03)
# ---------------------------------------------------------------------------------------------


def trace_scale(trace: list[dict], values, steps=None) -> float:
    """The largest |value| over the trace's records (of `steps`, default all) for every name in
    `values`: ONE colour scale for maps that are compared (raw vs clipped advantage, step vs step)."""
    values = [values] if isinstance(values, str) else list(values)
    return max([abs(x) for r in trace if steps is None or r["step"] in steps for v in values for x in r[v]] + [1e-3])


def trace_view(trace: list[dict], step: int) -> dict:
    """The step slider's data: the records of one tracked step, and the KL's and the advantage's
    colour scales fixed over ALL steps (so a colour means one value wherever the slider is)."""
    rows = [r for r in trace if r["step"] == step]
    if not rows:
        raise KeyError(f"step {step} is not tracked; tracked steps: {sorted({r['step'] for r in trace})}")
    return {"step": step, "rows": rows, "kl_max": trace_scale(trace, "kl"),
            "advantage_max": trace_scale(trace, ("advantage_raw", "advantage"))}


def answer_kl(trace: list[dict]) -> dict[int, dict[str, tuple[float, float]]]:
    """{step: {domain: (mean KL on the first sampled token, on the answer, mean KL on the tokens
    after it)}} over the tracked samples: where the disagreement sits, step by step."""
    out: dict = {}
    for step in sorted({r["step"] for r in trace}):
        for d in sorted({r["domain"] for r in trace}):
            rows = [r for r in trace if r["step"] == step and r["domain"] == d]
            rest = [x for r in rows for x in r["kl"][1:]]
            out.setdefault(step, {})[d] = (sum(r["kl"][0] for r in rows) / len(rows),
                                           sum(rest) / len(rest) if rest else 0.0)
    return out


# ---------------------------------------------------------------------------------------------
# per token or per sequence: a two-step tabular student (notebook 04 section 2)
# ---------------------------------------------------------------------------------------------

TWO_STEP = {"student": (1.0, 0.0, -1.0),
            "offsets": ((0.0, 0.0, 0.0), (0.0, 2.0, 0.0), (0.0, 0.0, 2.0)),
            "teacher_1": (0.0, 1.0, 0.0),
            "teacher_2": ((2.0, 0.0, -2.0), (0.0, 1.0, 0.0), (-2.0, 0.0, 2.0))}
"""the two-step case, V = 3, float64: the student's ONE logit vector z (its only parameters), used at
both positions, shifted at position 2 by a fixed offset row chosen by the first token y_1 (so what
it writes second depends on what it wrote first); the teacher's logits at position 1, and at
position 2 one row per first token"""


def _two_step_tables(z: torch.Tensor, case: dict) -> tuple[torch.Tensor, ...]:
    """log p_S(y1) (V,), log p_S(y2 | y1) (V, V), log p_T(y1), log p_T(y2 | y1), all float64."""
    d = torch.float64
    log_p1 = z.log_softmax(-1)
    log_p2 = (z + torch.tensor(case["offsets"], dtype=d)).log_softmax(-1)
    return (log_p1, log_p2, torch.tensor(case["teacher_1"], dtype=d).log_softmax(-1),
            torch.tensor(case["teacher_2"], dtype=d).log_softmax(-1))


def _grad_z(objective, case: dict) -> torch.Tensor:
    z = torch.tensor(case["student"], dtype=torch.float64, requires_grad=True)
    objective(*_two_step_tables(z, case)).backward()
    return z.grad


def two_step_pg_gradient(advantage_fn, case: dict = TWO_STEP) -> torch.Tensor:
    """The EXACT expected gradient (w.r.t. z) of a PG surrogate on the two-step case: all V^2
    completions as a (V^2, 2) batch, each weighted by its probability under the student,

        g = sum_y pi_S(y) * grad_z [ - sum_t sg(A_t(y)) log pi_S(y_t | y_<t) ],

    with A = advantage_fn(student_logprobs, teacher_logprobs, mask): (V^2, 2) log-probs of the
    sampled tokens (student's with grad), a (V^2, 2) mask of ones, returning (V^2, 2) advantages.
    A sum over the two tokens, not the course's token mean (here a constant factor 1/2)."""
    V = len(case["student"])
    y1, y2 = torch.arange(V).repeat_interleave(V), torch.arange(V).repeat(V)      # (V^2,) every completion

    def surrogate(log_p1, log_p2, log_q1, log_q2):
        s = torch.stack([log_p1[y1], log_p2[y1, y2]], dim=1)                      # (V^2, 2) log pi_S(y_t)
        t = torch.stack([log_q1[y1], log_q2[y1, y2]], dim=1)                      # (V^2, 2) log pi_T(y_t)
        A = advantage_fn(s, t, torch.ones_like(s))
        weight = s.sum(1).exp().detach()                                          # (V^2,) pi_S(y1, y2)
        return -(weight[:, None] * A.detach() * s).sum()
    return _grad_z(surrogate, case)


def per_token_advantage(student_logprobs, teacher_logprobs, mask):
    """MOPD-PG's advantage, A_t = log pi_T(y_t) - log pi_S(y_t): each token's own log ratio."""
    return (teacher_logprobs - student_logprobs) * mask


def two_step_gradients(case: dict = TWO_STEP, samples: int = 200_000, seed: int = 0) -> dict:
    """Per token or per sequence, on the two-step case (float64), w.r.t. the student's logits z:

        "sequence KL"      grad E_{y~pi_S}[KL_1 + KL_2(y_1)], the whole completion's reverse KL
        "per token"        E_{y~pi_S}[grad KL_1 + grad KL_2(y_1)] with the prefix y_1 held fixed: what
                           MOPD-PG (in expectation), Top-k and the exact KL follow
        "return-to-go"     E_{y_1}[grad log pi_S(y_1) KL_2(y_1)]: the second term, the one they drop
        "PG per token"     the exact expectation of MOPD-PG's gradient (two_step_pg_gradient)
        "PG return-to-go"  the same with the advantage A_1 + A_2 at position 1 (the KL still to come)
        "sampled PG per token", "sampled PG return-to-go": means of `samples` single-completion
                           gradients, with "se ..." their standard errors per logit

    The identity: "sequence KL" = "per token" + "return-to-go" = "PG return-to-go"."""
    log_p1, log_p2, log_q1, log_q2 = (t.detach() for t in _two_step_tables(
        torch.tensor(case["student"], dtype=torch.float64), case))
    kl_2 = (log_p2.exp() * (log_p2 - log_q2)).sum(-1)                             # (V,) KL_2 after each y_1

    def kl(lp1, lp2, lq1, lq2):
        return (lp1.exp() * (lp1 - lq1)).sum(), (lp2.exp() * (lp2 - lq2)).sum(-1)

    out = {"sequence KL": _grad_z(lambda *t: (lambda k1, k2: k1 + (t[0].exp() * k2).sum())(*kl(*t)), case),
           "per token": _grad_z(lambda *t: (lambda k1, k2: k1 + (log_p1.exp() * k2).sum())(*kl(*t)), case),
           "return-to-go": _grad_z(lambda *t: (log_p1.exp() * t[0] * kl_2).sum(), case),
           "PG per token": two_step_pg_gradient(per_token_advantage, case),
           "PG return-to-go": two_step_pg_gradient(
               lambda s, t, m: ((t - s) * m).flip(1).cumsum(1).flip(1), case)}
    # sampled: y ~ pi_S; grad_z log pi_S(y_1) = e_{y1} - p_1, grad_z log pi_S(y_2 | y_1) = e_{y2} - p_2(y_1)
    g = torch.Generator().manual_seed(seed)
    p1, p2, V = log_p1.exp(), log_p2.exp(), len(log_p1)
    y1 = torch.multinomial(p1, samples, replacement=True, generator=g)
    y2 = torch.multinomial(p2[y1], 1, generator=g)[:, 0]
    A1, A2 = (log_q1 - log_p1)[y1], (log_q2 - log_p2)[y1, y2]                     # (N,) each token's own
    score1 = torch.nn.functional.one_hot(y1, V).double() - p1                     # (N, V)
    score2 = torch.nn.functional.one_hot(y2, V).double() - p2[y1]                 # (N, V)
    for name, a1 in (("per token", A1), ("return-to-go", A1 + A2)):
        per_sample = -(a1[:, None] * score1 + A2[:, None] * score2)               # (N, V)
        out[f"sampled PG {name}"] = per_sample.mean(0)
        out[f"se PG {name}"] = per_sample.std(0) / samples ** 0.5
    out["KL_2 after y_1"], out["p_S(y_1)"] = kl_2, p1
    return out


def seq_kl_checks(out: dict, tol: float = 1e-12, se_mult: float = 5.0) -> None:
    """The relationships notebook 04 section 2 asserts, on `two_step_gradients`' output: the two
    terms add up to the sequence KL's gradient; the exact PG expectations equal them (per token and
    with the return-to-go); the sampled PG means lie within `se_mult` standard errors of their exact
    values; and the per-token gradient is NOT the sequence KL's (the dropped term is not zero).
    Raises an AssertionError naming the relation that fails."""
    close = lambda a, b: bool(torch.allclose(a, b, atol=tol, rtol=0))   # noqa: E731
    assert close(out["per token"] + out["return-to-go"], out["sequence KL"]), \
        "sequence-KL gradient = per-token gradient + return-to-go term"
    assert close(out["PG per token"], out["per token"]), "E[PG gradient] = the per-token gradient, prefix fixed"
    assert close(out["PG return-to-go"], out["sequence KL"]), "E[PG with return-to-go] = the sequence KL's gradient"
    for name, exact in (("per token", "per token"), ("return-to-go", "sequence KL")):
        assert ((out[f"sampled PG {name}"] - out[exact]).abs() <= se_mult * out[f"se PG {name}"]).all(), \
            f"the sampled PG ({name}) mean lies within {se_mult:g} standard errors of its exact value"
    assert ((out["sampled PG per token"] - out["sequence KL"]).abs() > se_mult * out["se PG per token"]).any(), \
        "the per-token gradient is not the sequence KL's: PG's samples tell them apart (the return-to-go term is not 0)"


# ---------------------------------------------------------------------------------------------
# the stuck categorical (notebook 08's slider)
# ---------------------------------------------------------------------------------------------

STUCK_TEACHER = (-17.0, 0.0, -5.0, -5.0, -5.0)
"""the teacher's logits on the stuck categorical: token 0 the student's wrong token (relative weight
e^-17, the log-odds the teacher gives arm 2's stuck position), token 1 the right one (about 0.98),
e^-5 on each of three others (the same categorical as bench.stuck_gradient)"""


def stuck_logits(p_wrong: float, n: int = len(STUCK_TEACHER)) -> torch.Tensor:
    """(n,) float64 student logits: p_wrong on token 0 (the wrong one), the rest split evenly."""
    if not 0 < p_wrong < 1:
        raise ValueError(f"p_wrong must be in (0, 1), got {p_wrong}")
    rest = (1 - p_wrong) / (n - 1)
    return torch.tensor([p_wrong] + [rest] * (n - 1), dtype=torch.float64).log()


def stuck_gradients(p_wrong: float, beta: float = 0.5, teacher_logits=STUCK_TEACHER) -> dict:
    """The gradient of each loss w.r.t. the student's logits at one position of the stuck categorical
    (`stuck_logits(p_wrong)` against `teacher_logits`), through the library's own losses and autograd
    in float64. Returns {"p_S": (V,), "p_T": (V,), "KL": the reverse KL's value, "grads": {name: (V,)},
    "norms": {name: float}} for the reverse KL, the forward KL and the generalised JSD at `beta`
    (TRL's convention: beta = 0 is the forward KL, beta = 1 the reverse KL).

    Closed forms (g(v) = d loss / d z_S(v)):
        reverse KL   p_S(v) (log p_S(v) - log p_T(v) - KL(p_S || p_T))        -> 0 as p_S(wrong) -> 1
        forward KL   p_S(v) - p_T(v)                                          -> about sqrt(2)
        JSD_beta     (1 - beta) p_S(v) (log p_S(v) / M(v) - KL(p_S || M)),  M = beta p_T + (1 - beta) p_S:
                     the reverse KL's form against the mixture, so it vanishes as p_S(wrong) -> 1 too
                     (for any beta > 0; M(wrong) stays near 1 - beta, not near p_T(wrong))."""
    z_T = torch.as_tensor(teacher_logits, dtype=torch.float64).view(1, 1, -1)
    z0 = stuck_logits(p_wrong, z_T.shape[-1]).view(1, 1, -1)
    ones = torch.ones(1, 1, dtype=torch.float64)
    forms = {"reverse KL": reverse_kl, "forward KL": forward_kl,
             f"JSD beta={beta:g}": lambda s, t, m: jsd_loss(s, t, m, beta=beta)}
    grads = {}
    for name, loss_fn in forms.items():
        z = z0.clone().requires_grad_(True)
        loss_fn(z, z_T, ones)[0].backward()
        grads[name] = z.grad.view(-1)
    return {"p_S": z0.softmax(-1).view(-1), "p_T": z_T.softmax(-1).view(-1),
            "KL": reverse_kl(z0, z_T, ones)[0].item(), "grads": grads,
            "norms": {k: g.norm().item() for k, g in grads.items()}}


def stuck_curves(p_values, beta: float = 0.5, teacher_logits=STUCK_TEACHER) -> dict:
    """`stuck_gradients` over `p_values`: {"p": [...], "KL": [...], name: [norm, ...] per loss}."""
    rows = [stuck_gradients(p, beta, teacher_logits) for p in p_values]
    out = {"p": list(p_values), "KL": [r["KL"] for r in rows]}
    for name in rows[0]["norms"]:
        out[name] = [r["norms"][name] for r in rows]
    return out


# ---------------------------------------------------------------------------------------------
# notebook 08's stuck run: what tells it from a run that learns, and the recorded copy
# ---------------------------------------------------------------------------------------------

STUCK_COPY = Path(__file__).parent / "data" / "stuck_seed1"
"""08's stuck run, recorded (`python -m bench.stuck_copy`): its SFT teacher and stuck student as peft
folders, and run.json (the student's chain metrics, warnings, trace, and the provenance)"""
STUCK_KEYS = ("stuck_share", "stuck_tokens", "tokens", "kl", "kl_stuck", "kl_rest", "kl_grad_stuck",
              "kl_grad_rest", "grad_stuck", "grad_rest", "off_support")
"""the per-domain metrics the copy keeps (what 08 reads), as `<key>/<domain>`"""
STUCK_KL_SHARE = 0.5
"""08's test of a stuck run: over the last window, the stuck tokens carry more than this share of the
step's reverse KL (`stuck_evidence`'s kl_share). 08's settings, the last 50 of 150 steps (python -m
bench.stuck_copy): seed 1 (stuck) 0.71, seed 0 (learns) 0.15. The gradient per nat of KL does not tell
them apart: the stuck tokens get 75x (seed 1) and 15x (seed 0) less of it than the rest"""
FALLBACK_ENV = "MOPD_STUCK_FALLBACK"
"""set to 1 to make 08 continue on the recorded copy whatever the live run did (tests, a lecture)"""
# what 08's config may differ in from the copy's without being another run
_NOT_THE_RUN = ("experiment", "progress", "eval_n", "eval_split", "checkpoint_every")


def stuck_metric_rows(metrics: list[dict], domain: str = "chain") -> list[dict]:
    """The metrics rows cut to `step` and STUCK_KEYS for `domain` (what 08 and `stuck_evidence` read)."""
    keys = [f"{k}/{domain}" for k in STUCK_KEYS]
    return [{"step": r["step"], **{k: r[k] for k in keys if k in r}} for r in metrics]


def stuck_evidence(rows: list[dict], window: int = 50, domain: str = "chain") -> dict:
    """Over the last `window` rows: how much of the reverse KL the stuck tokens carry, against how much
    of the reverse KL's gradient they get. Per step, with n_s stuck tokens and n_r others,

        kl_share   = n_s kl_stuck / (n_s kl_stuck + n_r kl_rest)          (0 on a step with no stuck token)
        grad_share = n_s kl_grad_stuck / (n_s kl_grad_stuck + n_r kl_grad_rest)

    Returns their means over the window ("kl_share", "grad_share"), their minimum over the window
    ("kl_share_min"), "steps" (the window's length), "stuck_steps" (steps with a stuck token) and the
    gradient per nat of KL on either kind ("per_nat_stuck", "per_nat_rest", means over the steps with
    a stuck token; None if none). A stuck run: the stuck tokens carry nearly all of the KL on every
    step of the window; a run that learns has steps with no stuck token, where they carry none."""
    tail = rows[-window:]
    kl_share, grad_share, per_nat = [], [], {"stuck": [], "rest": []}
    for r in tail:
        n_s = r[f"stuck_tokens/{domain}"]
        n_r = r[f"tokens/{domain}"] - n_s
        if not n_s:
            kl_share.append(0.0)
            grad_share.append(0.0)
            continue
        kl_s, kl_r = n_s * r[f"kl_stuck/{domain}"], n_r * (r[f"kl_rest/{domain}"] or 0.0)
        g_s, g_r = n_s * r[f"kl_grad_stuck/{domain}"], n_r * (r[f"kl_grad_rest/{domain}"] or 0.0)
        kl_share.append(kl_s / (kl_s + kl_r))
        grad_share.append(g_s / (g_s + g_r))
        per_nat["stuck"].append(r[f"kl_grad_stuck/{domain}"] / r[f"kl_stuck/{domain}"])
        if n_r and r[f"kl_rest/{domain}"]:
            per_nat["rest"].append(r[f"kl_grad_rest/{domain}"] / r[f"kl_rest/{domain}"])
    mean = lambda xs: sum(xs) / len(xs) if xs else None  # noqa: E731
    return {"steps": len(tail), "stuck_steps": sum(1 for r in tail if r[f"stuck_tokens/{domain}"]),
            "kl_share": mean(kl_share), "kl_share_min": min(kl_share) if kl_share else None,
            "grad_share": mean(grad_share),
            "per_nat_stuck": mean(per_nat["stuck"]), "per_nat_rest": mean(per_nat["rest"])}


def fallback_reason(run, depth2_acc: float, window: int = 50, domain: str = "chain",
                    force: bool | None = None) -> str | None:
    """Why 08 must continue on the recorded copy, or None when the live run is stuck as the lesson
    needs: the detector warned on `domain`, the stuck share stayed above the warning's share on every
    one of the last `window` steps, and depth 2's final-answer accuracy is below 0.2. `force` (default:
    the environment variable FALLBACK_ENV set to 1) takes the copy whatever the run did."""
    if force is None:
        force = os.environ.get(FALLBACK_ENV, "") not in ("", "0")
    if force:
        return f"{FALLBACK_ENV} is set: continuing on the recorded copy, whatever the live run did"
    share = [r[f"stuck_share/{domain}"] for r in run.metrics[-window:]]
    threshold = run.config.get("stuck_warn_share", 0.02)
    why = []
    if not any(w.get("kind") == "stuck" and w.get("domain") == domain for w in run.warnings):
        why.append("the detector did not warn")
    if not share or min(share) <= threshold:
        why.append(f"the stuck share fell to {min(share, default=0):.3f} in the last {window} steps")
    if depth2_acc >= 0.2:
        why.append(f"depth 2's accuracy is {depth2_acc:.2f}: the student learned to stop")
    return "; ".join(why) or None


def recorded_stuck(bank, cfg_teacher=None, cfg_stuck=None, folder: Path = STUCK_COPY):
    """Load 08's recorded stuck run into `bank` under the adapter names the notebook uses (the
    teacher's and the student's, replacing any live ones), and return it as a `runs.Run` in memory
    (metrics cut to STUCK_KEYS, warnings, trace; `.provenance` says how it was made). With the
    notebook's configs given, refuses a copy recorded with other settings (the seed, the steps, the
    loss...: another run), naming the fields."""
    from .runs import Run

    record = json.loads((folder / "run.json").read_text())
    for cfg, name in ((cfg_teacher, "sft_teacher"), (cfg_stuck, "mopd_kl")):
        saved = new_values(json.loads((folder / name / "config.json").read_text()))  # loss "sft" recorded: "ce"
        if cfg is not None:
            now = asdict(cfg)
            differs = sorted(k for k in set(saved) | set(now) if k not in _NOT_THE_RUN
                             and json.loads(json.dumps(now.get(k))) != saved.get(k))
            if differs:
                raise ValueError(f"the recorded copy's {name} was made with other settings: "
                                 + ", ".join(f"{k} {saved.get(k)!r} (now {now.get(k)!r})" for k in differs))
    teacher = json.loads((folder / "mopd_kl" / "config.json").read_text())["teachers"]
    names = {"sft_teacher": cfg_teacher.name if cfg_teacher is not None else "sft_teacher",
             "mopd_kl": cfg_stuck.student if cfg_stuck is not None else "mopd_kl"}
    if cfg_stuck is not None and cfg_stuck.teachers != teacher:
        raise ValueError(f"the recorded copy's student reads the teachers {teacher}, the notebook's {cfg_stuck.teachers}")
    for name, as_name in names.items():
        bank.load(as_name, folder / name)
    run = Run(None, json.loads((folder / "mopd_kl" / "config.json").read_text()), metrics=record["metrics"],
              trace=record["trace"], warnings=record["warnings"])
    run.provenance = record["provenance"]
    return run


def main(argv=None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m mopd_mini.lab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--make-grid", action="store_true", help="run the loss lab's grid and write it (full mode)")
    parser.add_argument("--out", type=Path, default=GRID_PATH, help=f"where the grid goes (default {GRID_PATH})")
    args = parser.parse_args(argv)
    if not args.make_grid:
        parser.print_help()
        return
    from . import runs

    if runs.FAST:  # before the teachers load: the CI mode's would be the wrong ones
        raise SystemExit("the grid is made in the full mode: unset MOPD_FAST (its teachers are the full ones)")
    torch.set_num_threads(1)
    from . import AdapterBank, load_base
    from .config import GRPOConfig
    from .grpo import train_grpo

    base, tokenizer = load_base("tiny")
    bank = AdapterBank(base, tokenizer)
    for d in MOPDConfig().domains:
        train_grpo(bank, GRPOConfig.for_model("tiny", domain=d, progress=False))
    grid = make_grid(bank, args.out)
    print(f"{len(grid['cells'])} runs in {grid['seconds']} s -> {args.out}")

def kl_on_answer_token(by_step: dict, share: float = 0.1) -> dict[str, tuple[float, float]]:
    """Notebook 03's check on `answer_kl`'s table ({step: {domain: (KL on t0, KL after it)}}): PER
    DOMAIN, the tokens after the answer token carry less than `share` of the answer token's KL (means
    over the tracked steps). A sum over the domains would pass with one domain's KL off the answer
    token, hidden by the other's larger t0 KL. Returns {domain: (mean KL on t0, mean KL after it)}."""
    domains = sorted({d for per_domain in by_step.values() for d in per_domain})
    out = {}
    for d in domains:
        rows = [per_domain[d] for per_domain in by_step.values() if d in per_domain]
        out[d] = (sum(a for a, _ in rows) / len(rows), sum(b for _, b in rows) / len(rows))
    for d, (on_t0, after) in out.items():
        assert after < share * on_t0, (f"on {d}, the tokens after the answer token should carry less than "
                                        f"{share:g} of its KL: t0 {on_t0:.4f}, after {after:.4f}")
    return out


# ---------------------------------------------------------------------------------------------
# notebook 04's exact-arithmetic asserts, as checks a test can make fail (the clip's table, Top-k's zero)
# ---------------------------------------------------------------------------------------------


def clip_table_checks(table: list[dict], n: int = 16) -> dict:
    """Notebook 04 section 1's asserts on `clip_bias_variance`'s rows (loosest clip first): a tighter
    clip lowers the variance of one sample's gradient and raises its bias^2 (monotone down the rows),
    and for a mean of `n` samples (error variance / n + bias^2) the lowest error has no bias (an
    unclipped or non-binding estimator). Returns {"one sample": the clip of the lowest one-sample
    error, "mean of n": the clip of the lowest n-sample error}; raises an AssertionError naming the
    relation that fails."""
    variances, biases = [r["variance"] for r in table], [r["bias^2"] for r in table]
    assert all(a >= b - 1e-12 for a, b in zip(variances, variances[1:])), \
        f"a tighter clip lowers the variance: {[round(v, 3) for v in variances]}"
    assert all(a <= b + 1e-12 for a, b in zip(biases, biases[1:])), \
        f"a tighter clip raises the bias: {[round(b, 3) for b in biases]}"
    best_n = min(table, key=lambda r: r["variance"] / n + r["bias^2"])
    assert best_n["bias^2"] < 1e-12, \
        f"over {n} samples an unclipped (or non-binding) estimator has the lowest error, not clip {best_n['clip']}"
    return {"one sample": min(table, key=lambda r: r["error"])["clip"], f"mean of {n}": best_n["clip"]}


def topk_blind_spot_check(r: dict, min_kl: float = 0.04, tol: float = 1e-12) -> None:
    """Notebook 04 section 3's assert on one `topk_off_set` result: the corrected Top-k loss and its
    gradient are 0 (a student equal to the teacher on the set) while the exact reverse KL is above
    `min_kl`: Top-k's zero is not the reverse KL's. It fails where nothing is left to arrange off the
    set (k = V - 1: the student equal to the teacher on the set IS the teacher)."""
    assert r["top-k"] < tol and r["top-k gradient"] < tol, \
        f"the student equals the teacher on the set, so the Top-k loss and its gradient are 0: {r['top-k']:.2e}, {r['top-k gradient']:.2e}"
    assert r["exact KL"] > min_kl, \
        f"Top-k's zero is not the reverse KL's: the exact KL there should exceed {min_kl:g}, got {r['exact KL']:.3g}"


# every public function of this module checks its annotated arguments when called from outside the package
# (mopd_mini.validate.guard_public); the package's own calls, e.g. the training loop's, skip the checks
from .validate import guard_public  # noqa: E402

guard_public(globals())


if __name__ == "__main__":
    main()
