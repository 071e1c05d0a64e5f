"""ipywidgets views over the plain functions of `lab` (notebooks 04 and 08).

Each view draws once with its defaults when called, then `interact` re-draws on every change.
An exception inside an `interact` callback is swallowed into the widget, so a headless run
(CI) must call the plain functions directly and assert on their results: notebooks do.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from ipywidgets import Checkbox, Dropdown, FloatSlider, IntSlider, SelectionSlider, interact, interact_manual

from . import lab, plots
from .distill import LOSSES, MOPDConfig

CLIP = MOPDConfig().clip
"""the clip the sliders start at: the trainer's default (the paper's 5)"""
CLIPS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
"""the clip slider's stops: round values over the same 1-2-5 decades a log slider would cover"""


def clip_slider(value: float = CLIP) -> SelectionSlider:
    """A slider over round clip values that shows exactly the value it holds (a log slider's
    step would show 5.01 for 5); a value off the stops is added as a stop of its own."""
    stops = sorted(set(CLIPS) | {float(value)})
    return SelectionSlider(options=[(f"{c:g}", c) for c in stops], value=float(value), description="clip c")


def gradient_panel(student_logits, teacher_logits):
    """Sliders for the clip c and the top-k k, a box for the correction: the per-logit gradient
    of every loss form on one small categorical, recomputed instantly."""
    V = len(student_logits)

    def show(clip=CLIP, k=3, correction=True):
        grads = lab.categorical_gradients(student_logits, teacher_logits, clip=clip, k=k, correction=correction)
        plots.gradient_bars(grads, student_logits, teacher_logits)
        plt.show()

    return interact(show, clip=clip_slider(),
                    k=IntSlider(value=3, min=1, max=V, description="top-k k"),
                    correction=Checkbox(value=True, description="top-k correction"))


def loss_lab(bank, history: dict, steps: int = 40, model: str = "tiny"):
    """Pick a loss form and its knobs, press Run: a short distillation runs (well under a minute
    on a CPU) and its curves are overlaid on every earlier run in `history`."""

    def run(loss="pg", clip=CLIP, k=64, correction=True):
        label = {"pg": f"pg c={clip:g}", "topk": f"top-{k}" + ("" if correction else " naive"), "kl": "exact kl"}[loss]
        history[label] = lab.short_run(bank, steps=steps, model=model, loss=loss, clip=clip, topk=k,
                                       topk_correction=correction).metrics
        show_history(history)

    V = len(bank.tokenizer)
    return interact_manual(run, loss=Dropdown(options=LOSSES, value="pg", description="loss"),
                           clip=clip_slider(),
                           k=IntSlider(value=64, min=1, max=min(V, 256), description="top-k k"),
                           correction=Checkbox(value=True, description="top-k correction"))


def show_history(history: dict):
    """Exact per-token KL and greedy accuracy of every run so far, per domain."""
    fig, axes = plt.subplots(1, 3, figsize=(16, 3.6))
    plots.curves(history, ["kl/binding", "kl/recall"], ax=axes[0], smooth=5, ylabel="exact reverse KL per token",
                 title="KL to the routed teacher")
    plots.curves(history, ["acc/binding/L16", "acc/recall/L16"], ax=axes[1], ylabel="greedy accuracy",
                 title="accuracy at L16")
    plots.curves(history, ["student_topk_mass/binding", "student_topk_mass/recall"], ax=axes[2], smooth=5,
                 ylabel="student mass on the teacher's top-k", title="mass on the top-k set")
    fig.tight_layout()
    plt.show()
    return fig


STUCK_P = tuple(round(1 - 0.5 * 500 ** (-i / 59), 6) for i in range(60))
"""the stuck slider's curve points: p_S(wrong) from 0.5 to 0.999, denser toward 1 (1 - p evenly on a log scale)"""


def stuck_slider(beta: float = 0.5):
    """A slider for p_S(wrong) from 0.5 to 0.999 on the stuck categorical (lab.stuck_logits): the
    gradient norm of the reverse KL, the forward KL and the JSD at `beta`, a dot at the slider's
    value on curves computed once (lab.stuck_curves). Returns the interact; `show(p)` draws one."""
    curves = lab.stuck_curves(STUCK_P, beta=beta)

    def show(p_wrong=0.9):
        plots.stuck_gradient(curves, p_wrong, title=f"the stuck categorical at p_S(wrong) = {p_wrong:.3f}")
        plt.show()

    return interact(show, p_wrong=FloatSlider(value=0.9, min=0.5, max=0.999, step=0.001, readout_format=".3f",
                                              description="p_S(wrong)", continuous_update=False))
