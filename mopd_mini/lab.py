"""The loss lab's plain functions: what the widgets in notebook 04 call.

    categorical_gradients(z_S, z_T, clip=5.0, k=3)   per-logit gradient of every loss form, exactly
    short_run(bank, loss="topk", k=8, steps=40)      a short MOPD run, in memory, for overlays

Both run headless with their defaults (so a test or a CI notebook run asserts on them); the
widgets only wrap them.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from .distill import MOPDConfig, train_student
from .losses import pg_loss, reverse_kl, topk_reverse_kl


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
