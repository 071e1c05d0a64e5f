"""ipywidgets views over the plain functions of `lab` (notebooks 03, 04 and 08).

    trace_slider(run.trace)               03: a step slider over the student's tracked samples
    gradient_panel(z_S, z_T)              04: per-logit gradients of every loss, on one categorical
    loss_lab(bank, history)               04: the precomputed grid of short runs, instantly; a
                                          button trains a fresh run (~10 s) for any setting
    stuck_slider()                        08: each loss's gradient norm on a confidently wrong
                                          categorical, p_S(wrong) from 0.5 to 0.999

Each view draws once with its defaults when called, then re-draws on every change.
An exception inside an `interact` callback is swallowed into the widget, so a headless run
(CI) must call the plain functions directly and assert on their results: notebooks do.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
from IPython.display import display
from ipywidgets import (HTML, Button, Checkbox, Dropdown, FloatSlider, HBox, IntSlider, SelectionSlider, VBox,
                        interact, interactive_output)

from . import lab, plots
from .distill import MOPDConfig

CLIP = MOPDConfig().clip
"""the clip the sliders start at: the trainer's default (the paper's 5)"""
CLIPS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
"""the clip slider's stops: round values over the same 1-2-5 decades a log slider would cover"""


NO_CLIP = math.inf
"""the clip slider's "none" stop: PG without a clip"""


def no_none(clip: float) -> float | None:
    """The slider's clip as the trainer takes it: NO_CLIP -> None."""
    return None if clip == NO_CLIP else clip


def clip_slider(value: float = CLIP, no_clip: bool = False) -> SelectionSlider:
    """A slider over round clip values that shows exactly the value it holds (a log slider's
    step would show 5.01 for 5); a value off the stops is added as a stop of its own.
    `no_clip`: a last stop "none", held as NO_CLIP (a selection widget cannot hold None; `no_none`
    turns it back into the trainer's None)."""
    stops = sorted(set(CLIPS) | {float(value)})
    options = [(f"{c:g}", c) for c in stops] + ([("none", NO_CLIP)] if no_clip else [])
    return SelectionSlider(options=options, value=float(value), description="clip c")


def trace_slider(trace: list[dict]):
    """A slider over the tracked steps of a student's trace (`Run.trace`): the per-token KL and
    advantage maps of that step's samples, on colour scales fixed over all steps."""
    steps = sorted({r["step"] for r in trace})

    def show(step=steps[0]):
        plots.step_maps(lab.trace_view(trace, step))
        plt.show()

    return interact(show, step=SelectionSlider(options=steps, value=steps[0], description="step"))


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


def loss_lab(bank, history: dict, steps: int = lab.STEPS, model: str = "tiny", grid: dict | None = None):
    """Pick a loss form and its knobs: the grid's precomputed run of that setting is drawn at once
    (`lab.lab_curves`), over the runs in `history` and the grid's run at the trainer's defaults.
    The button trains a fresh `steps`-step run at lab.LR (about 10 s on a CPU at 60 steps) of any
    setting, on or off the grid, and adds it to `history`."""
    grid = lab.load_grid() if grid is None else grid
    V = len(bank.tokenizer)
    controls = {"loss": Dropdown(options=lab.FORMS, value="pg", description="loss"),
                "clip": clip_slider(no_clip=True),
                "k": IntSlider(value=64, min=1, max=min(V, 256), description="top-k k"),
                "correction": Checkbox(value=True, description="top-k correction")}
    note = HTML()

    def show(loss, clip, k, correction):
        curves, note.value = lab.lab_curves(grid, history, loss, no_none(clip), k, correction)
        show_history(curves)

    out = interactive_output(show, controls)
    button = Button(description=f"train a fresh run: ~10 s ({steps} steps, lr {lab.LR:g})",
                    layout={"width": "max-content"})

    def train(_=None):
        knobs = {name: w.value for name, w in controls.items()}
        knobs["clip"] = no_none(knobs["clip"])
        label = "live · " + lab.cell_label(**knobs)
        note.value = f"training {label} ..."
        history[label] = lab.short_run(bank, steps=steps, model=model, loss=knobs["loss"], clip=knobs["clip"],
                                       topk=knobs["k"], topk_correction=knobs["correction"]).metrics
        with out:
            out.clear_output(wait=True)
            show(**knobs)

    button.on_click(train)
    box = VBox([HBox(list(controls.values())[:2]), HBox(list(controls.values())[2:]), HBox([button, note]), out])
    box.train = train   # the button's action, callable headless
    display(box)        # as interact does: the lab shows itself
    return box


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


def time_redraws(trace: list[dict] | None = None, repeats: int = 3) -> dict[str, float]:
    """Median seconds of one knob change, as a user sees it: the callback a change fires (the
    lookup and the figure) and the figure's PNG, as Jupyter's inline backend makes it. Headless:
    the loss lab over the committed grid with 04's three runs drawn; the step slider over `trace`."""
    import io
    import statistics
    import time

    from . import AdapterBank, load_base

    def show(*_, **__):
        for n in plt.get_fignums():
            plt.figure(n).savefig(io.BytesIO(), format="png", bbox_inches="tight")
        plt.close("all")

    plt.show, out = show, {}
    grid = lab.load_grid()
    bank = AdapterBank(*load_base("tiny"))
    history = {c["label"]: c["metrics"] for c in grid["cells"] if c["label"] in ("pg c=5", "top-64", "exact kl")}
    box = loss_lab(bank, history, grid=grid)
    clip = next(w for row in box.children[:2] for w in row.children if w.description == "clip c")
    times = []
    for v in [0.5, 2.0, NO_CLIP, 5.0] * repeats:
        t = time.perf_counter()
        clip.value = v
        times.append(time.perf_counter() - t)
    out["loss_lab"] = statistics.median(times)
    t = time.perf_counter()
    lab.grid_cell(lab.load_grid(), "pg", 0.5)
    out["grid lookup"] = time.perf_counter() - t
    if trace:
        slider = trace_slider(trace)
        step = next(w for w in slider.widget.children if getattr(w, "description", "") == "step")
        times = []
        for s in [*step.options[1:], step.options[0]] * repeats:
            t = time.perf_counter()
            step.value = s
            times.append(time.perf_counter() - t)
        out["trace_slider"] = statistics.median(times)
    return out


if __name__ == "__main__":   # python -m mopd_mini.widgets [trace.json]: time the widgets' redraws
    import json
    import sys

    import matplotlib

    matplotlib.use("Agg")
    trace = json.loads(open(sys.argv[1]).read()) if len(sys.argv) > 1 else None
    for name, seconds in time_redraws(trace).items():   # the 7-step slider: 21 moves; the lab: 12 changes
        print(f"{name:14} {seconds:.4f} s (median)")


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
