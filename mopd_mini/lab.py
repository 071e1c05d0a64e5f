"""The loss lab's plain functions: what the widgets in notebook 04 call.

    categorical_gradients(z_S, z_T, clip=5.0, k=3)   per-logit gradient of every loss form, exactly
    short_run(bank, loss="topk", k=8, steps=40)      a short MOPD run, in memory, for overlays
    stuck_gradients(p_wrong, beta=0.5)               each loss's gradient norm on a confidently wrong
                                                     5-token categorical (notebook 08's slider)

Both run headless with their defaults (so a test or a CI notebook run asserts on them); the
widgets only wrap them.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from .distill import MOPDConfig, train_student
from .losses import jsd_loss, pg_loss, reverse_kl, soft_label_kl, topk_reverse_kl


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


def short_run(bank, steps: int = 60, model: str = "tiny", lr: float = 3e-3, **overrides):
    """A short MOPD run kept in memory (no checkpoints), for comparing loss settings side by side.
    The student adapter is re-created fresh every time; returns the Run (metrics, trace).
    The lab trains at 3x the course's learning rate so that a run is done in seconds on a CPU
    (60 steps: about 10 s on the tiny model); compare lab runs with each other, not with 03's."""
    cfg = replace(MOPDConfig.for_model(model), steps=steps, lr=lr, eval_every=max(1, steps // 4), eval_n=32, track_steps=(),
                  experiment=None, progress=False, student="lab_student")
    return train_student(bank, replace(cfg, **overrides))


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
    forms = {"reverse KL": reverse_kl, "forward KL": soft_label_kl,
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
