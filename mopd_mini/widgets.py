"""ipywidgets views over the plain functions of `lab` and `evidence` (notebooks 03-08).

    trace_slider(run.trace)               03: a step slider over the student's tracked samples
    gradient_panel(z_S, z_T)              04: per-logit gradients of every loss, on one categorical
    loss_lab(bank, history)               04: the precomputed grid of short runs, instantly; a
                                          button trains a fresh run (~10 s) for any setting
    matched_picker()                      05b: a budget-and-method picker over the matched study's
                                          paired intervals, Holm-adjusted (mopd_mini/data/evidence.json)
    origin_picker()                       06: the origin study's KL curves, per loss form and seed
    depth_picker()                        07: arm 2's per-seed accuracy of every method, per depth
    stuck_slider()                        08: each loss's gradient norm on a confidently wrong
                                          categorical, p_S(wrong) from 0.5 to 0.999

The pickers (`Picker`) answer a change without re-running matplotlib when they can: each setting's
figure is rendered once, to a PNG at DPI, and kept; a setting seen before is a dictionary lookup
(`Picker.timings` measures the lookup, the draw and the redraw apart). gradient_panel and
stuck_slider redraw through `interact` (their figures are small and every value is new).
An exception inside a callback is swallowed into the widget, so a headless run (CI) must call the
plain functions directly and assert on their results: notebooks do.
"""

from __future__ import annotations

import io
import math
import statistics
import threading
import time
from typing import Callable

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from IPython.display import display
from ipywidgets import (HTML, Button, Checkbox, Dropdown, FloatSlider, HBox, Image, IntSlider, SelectionSlider,
                        ToggleButtons, VBox, interact)

from . import evidence, lab, plots
from .config import MOPDConfig


CLIP = MOPDConfig().clip
"""the clip the sliders start at: the trainer's default (the paper's 5)"""
CLIPS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
"""the clip slider's stops: round values over the same 1-2-5 decades a log slider would cover"""


NO_CLIP = math.inf
"""the clip slider's "none" stop: PG without a clip"""


def no_none(clip) -> float | None:  # no annotation: NO_CLIP is inf, which a float argument may not be
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


DPI = 80
"""the pickers' PNG resolution: a screen's, not a page's (plots.save writes the figures for pages)"""


def png(fig, dpi: int = DPI) -> bytes:
    """The figure as PNG bytes (and closed: a picker's figures are never shown by pyplot)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()


def options(control) -> list:
    """The values a selection control offers."""
    return [o[1] if isinstance(o, tuple) else o for o in control.options]


def every(controls: dict, *names: str) -> Callable[[], list[dict]]:
    """The settings a picker warms: every combination of the named controls' values."""
    import itertools

    return lambda: [dict(zip(names, combo)) for combo in itertools.product(*(options(controls[n]) for n in names))]


class Picker:
    """Controls -> `lookup(**values)` -> `draw(data)` -> a PNG shown in an Image widget. Each
    setting's PNG (and note) is kept under `key(**values)`, so a setting seen before redraws
    without matplotlib. `note(data)` is an optional line above the image. `rows` lays the controls
    out (lists of their names; default one row); `extra` widgets go below them. Display it (it
    shows its `box`), or call `show(**values)` headless: it returns the data the figure drew."""

    def __init__(self, controls: dict, lookup: Callable, draw: Callable, note: Callable | None = None,
                 key: Callable | None = None, rows=None, extra=(), dpi: int = DPI, warm=None):
        self.controls, self.lookup, self.draw, self.describe, self.dpi = controls, lookup, draw, note, dpi
        self.key = key or (lambda **v: tuple(sorted(v.items())))
        self.cache: dict = {}
        self.lock = threading.Lock()
        self.image, self.note = Image(format="png"), HTML()
        rows = rows or [list(controls)]
        self.box = VBox([HBox([controls[n] for n in r]) for r in rows] + list(extra) + [self.note, self.image])
        for w in controls.values():
            w.observe(lambda _: self.update(), names="value")
        self.update()
        self.warming = None
        if warm:   # the other settings drawn in the background while the first is read (draw must not use pyplot)
            self.warming = threading.Thread(target=lambda: [self.render(**{**self.values(), **s}) for s in warm()],
                                            daemon=True)
            self.warming.start()

    def values(self) -> dict:
        return {name: w.value for name, w in self.controls.items()}

    def render(self, **values) -> tuple[bytes, str]:
        """The setting's PNG and note, from the cache or drawn now (and kept)."""
        k = self.key(**values)
        with self.lock:
            if k not in self.cache:
                data = self.lookup(**values)
                self.cache[k] = (png(self.draw(data), self.dpi), self.describe(data) if self.describe else "")
            return self.cache[k]

    def update(self) -> None:
        self.image.value, self.note.value = self.render(**self.values())

    def show(self, **values):
        """Headless: the data the figure of `values` draws (what a test or a notebook asserts on)."""
        return self.lookup(**{**self.values(), **values})

    def _ipython_display_(self):
        display(self.box)

    def timings(self, settings: list[dict], repeats: int = 10) -> dict[str, float]:
        """Median milliseconds over `repeats` changes cycling through `settings` (each a dict of
        control values), in this process: `lookup` (the data for a setting), `draw` (its figure
        and PNG, uncached), `redraw` (a control set to a setting seen before: what a user waits)."""
        def median_ms(fn) -> float:
            out = []
            for i in range(repeats):
                s = settings[i % len(settings)]
                t = time.perf_counter()
                fn(s)
                out.append(time.perf_counter() - t)
            return round(1000 * statistics.median(out), 2)

        def redraw(s):
            for name, v in s.items():
                self.controls[name].value = v
            self.update()

        if self.warming is not None:   # time a picker at rest, not while it draws in the background
            self.warming.join()
        data = {i: self.lookup(**{**self.values(), **s}) for i, s in enumerate(settings)}
        lookup = median_ms(lambda s: self.lookup(**{**self.values(), **s}))
        draw = median_ms(lambda s: png(self.draw(data[settings.index(s)]), self.dpi))
        for s in settings:            # every setting seen once: the cache a user has after one pass
            redraw(s)
        return {"lookup ms": lookup, "draw ms": draw, "redraw ms": median_ms(redraw)}


def trace_slider(trace: list[dict]) -> Picker:
    """A slider over the tracked steps of a student's trace (`Run.trace`): the per-token KL and
    advantage maps of that step's samples, on colour scales fixed over all steps."""
    steps = sorted({r["step"] for r in trace})
    controls = {"step": SelectionSlider(options=steps, value=steps[0], description="step")}
    return Picker(controls, lambda step: lab.trace_view(trace, step), plots.step_maps, warm=every(controls, "step"))


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
    setting, on or off the grid, and adds it to `history`. Settings that draw the same runs share
    one cached image (a knob without effect on the form changes nothing)."""
    grid = lab.load_grid() if grid is None else grid
    V = len(bank.tokenizer)
    controls = {"loss": Dropdown(options=lab.FORMS, value="pg", description="loss"),
                "clip": clip_slider(no_clip=True),
                "k": IntSlider(value=64, min=1, max=min(V, 256), description="top-k k"),
                "correction": Checkbox(value=True, description="top-k correction")}
    button = Button(description=f"train a fresh run: ~10 s ({steps} steps, lr {lab.LR:g})",
                    layout={"width": "max-content"})
    status = HTML()

    def lookup(loss, clip, k, correction):
        return lab.lab_curves(grid, history, loss, no_none(clip), k, correction)

    def key(loss, clip, k, correction):
        cell = lab.grid_cell(grid, loss, no_none(clip), k, correction)
        return (cell["label"] if cell else lab.cell_label(loss, no_none(clip), k, correction), tuple(history))

    picker = Picker(controls, lookup, lambda data: show_history(data[0], show=False), note=lambda data: data[1],
                    key=key, rows=[["loss", "clip"], ["k", "correction"]], extra=[HBox([button, status])],
                    warm=lambda: [{"loss": c["loss"], "clip": c.get("clip") or NO_CLIP, "k": c.get("topk", 64),
                                   "correction": c.get("topk_correction", True)} for c in grid["cells"]])

    def train(_=None):
        knobs = {name: w.value for name, w in controls.items()}
        knobs["clip"] = no_none(knobs["clip"])
        label = "live · " + lab.cell_label(**knobs)
        status.value = f"training {label} ..."
        history[label] = lab.short_run(bank, steps=steps, model=model, **lab.knobs_read(**knobs)).metrics
        status.value = f"trained {label}"
        picker.update()

    button.on_click(train)
    box = picker.box
    box.train, box.picker, box.note = train, picker, picker.note   # the button's action, callable headless
    display(box)        # as interact does: the lab shows itself
    return box


def show_history(history: dict, show: bool = True):
    """Exact per-token KL and greedy accuracy of every run so far, per domain."""
    fig = plt.figure(figsize=(16, 3.6)) if show else Figure(figsize=(16, 3.6))   # a picker's: off pyplot
    axes = fig.subplots(1, 3)
    plots.curves(history, ["kl/binding", "kl/recall"], ax=axes[0], smooth=5, ylabel="exact reverse KL per token",
                 title="KL to the routed teacher")
    plots.curves(history, ["acc/binding/L16", "acc/recall/L16"], ax=axes[1], ylabel="greedy accuracy",
                 title="accuracy at L16")
    plots.curves(history, ["student_topk_mass/binding", "student_topk_mass/recall"], ax=axes[2], smooth=5,
                 ylabel="student mass on the teacher's top-k", title="mass on the top-k set")
    fig.tight_layout()
    if show:
        plt.show()
    return fig


# ---------------------------------------------------------------------------------------------
# the pickers over the studies' results (notebooks 05b, 06, 07): mopd_mini/data/evidence.json
# ---------------------------------------------------------------------------------------------


def matched_picker(view: dict | None = None, T: int = 400, method: str = "mopd_kl") -> Picker:
    """05b: pick a budget T and a comparison of the matched study's registered family: its paired
    interval at Holm's level at every T (the uncorrected 95% one beside it, thinner), the picked one
    bold, red where Holm's correction resolves it (the Holm-level interval excludes 0)."""
    view = evidence.load_view() if view is None else view
    Ts = sorted(int(t) for t in view["matched"]["by_T"])
    labels = view["matched"]["labels"]
    options = [(f"{labels[a]} minus {labels[b]}", key) for key in evidence.RIVALS for a, b in [evidence.rival_pair(key)]]
    controls = {"T": ToggleButtons(options=[(f"T = {t}", t) for t in Ts], value=T, description="budget"),
                "method": Dropdown(options=options, value=method, description="comparison",
                                   layout={"width": "max-content"})}
    return Picker(controls, lambda T, method: evidence.matched_pick(view, T, method), evidence.matched_figure,
                  warm=every(controls, "T", "method"),
                  note=lambda p: f"<b>{p['label']}</b> at T = {p['T']}: {p['picked']['reading']} "
                                 f"(p {p['picked']['p']:.3f} uncorrected, {p['picked']['p_holm']:.3f} Holm; "
                                 f"{p['picked']['n']} seeds)")


def origin_picker(view: dict | None = None) -> Picker:
    """06: pick MOPD's loss form and a seed (or their mean): the same-origin and the other-origin
    student's KL to its binding teacher, on one y scale for every pick."""
    view = evidence.load_view() if view is None else view
    seeds = view["origin"]["seeds"]
    top = max(x for per in view["origin"]["curves"].values() for c in per.values() for x in c.values() for x in x)
    controls = {"loss": ToggleButtons(options=[("MOPD-PG", "pg"), ("MOPD-Top-k", "topk")], value="pg",
                                      description="loss"),
                "seed": ToggleButtons(options=[("mean", "mean")] + [(f"seed {s}", s) for s in seeds], value="mean",
                                      description="seed")}
    return Picker(controls, lambda loss, seed: evidence.origin_pick(view, loss, seed),
                  lambda p: evidence.origin_figure(p, ymax=min(top, 1.2)), warm=every(controls, "loss", "seed"),
                  note=lambda p: "KL, first fifth -> last fifth: same origin "
                                 f"{p['first']['same']:.3f} -> {p['last']['same']:.3f}, other origin "
                                 f"{p['first']['other']:.3f} -> {p['last']['other']:.3f}")


def depth_picker(view: dict | None = None) -> Picker:
    """07: pick a chain depth and a measure: arm 2's per-seed value of every method there."""
    view = evidence.load_view() if view is None else view
    depths = [int(d) for d in view["regimes"]["depths"]]
    controls = {"depth": ToggleButtons(options=[(f"depth {d}", d) for d in depths], value=depths[0],
                                       description="depth"),
                "metric": ToggleButtons(options=[("final answer", "acc"), ("prefix trace", "trace")], value="acc",
                                        description="measure")}
    return Picker(controls, lambda depth, metric: evidence.depth_pick(view, depth, metric), evidence.depth_figure,
                  warm=every(controls, "depth", "metric"))


def time_redraws(trace: list[dict] | None = None, repeats: int = 10) -> dict[str, dict]:
    """Each picker's `timings` (median ms of the lookup, the draw and the cached redraw) on the
    committed data: the loss lab over the grid with 04's three runs drawn, the three study pickers,
    and the step slider over `trace` if given."""
    from . import AdapterBank, load_base

    display_ = globals()["display"]
    globals()["display"] = lambda *a, **k: None
    try:
        grid = lab.load_grid()
        bank = AdapterBank(*load_base("tiny"))
        history = {c["label"]: c["metrics"] for c in grid["cells"] if c["label"] in ("pg c=5", "top-64", "exact kl")}
        out = {"loss_lab (04)": loss_lab(bank, history, grid=grid).picker.timings(
            [{"clip": v} for v in (0.5, 2.0, NO_CLIP, 5.0)], repeats)}
    finally:
        globals()["display"] = display_
    out["matched_picker (05b)"] = matched_picker().timings(
        [{"T": t, "method": m} for t in (100, 200, 400) for m in ("mopd_kl", "mopd_pg")], repeats)
    out["origin_picker (06)"] = origin_picker().timings(
        [{"loss": "pg", "seed": s} for s in ("mean", "0", "1", "2")], repeats)
    out["depth_picker (07)"] = depth_picker().timings([{"depth": d} for d in (2, 3, 4, 5)], repeats)
    if trace:
        steps = sorted({r["step"] for r in trace})
        out["trace_slider (03)"] = trace_slider(trace).timings([{"step": s} for s in steps], repeats)
    return out


STUCK_P = tuple(round(1 - 0.5 * 500 ** (-i / 59), 6) for i in range(60))
"""the stuck slider's curve points: p_S(wrong) from 0.5 to 0.999, denser toward 1 (1 - p evenly on a log scale)"""


def stuck_slider(beta: float = 0.5):
    """A slider for p_S(wrong) from 0.5 to 0.999 on the stuck categorical (lab.stuck_logits): the
    gradient norm of the reverse KL, the forward KL and the JSD at `beta`, a dot at the slider's
    value on curves computed once (lab.stuck_curves). It opens at 0.99, past the point (near 0.92 on
    this categorical) where the reverse KL's gradient falls below the forward KL's: the lesson's point
    shows at once. Returns the interact; `show(p)` draws one."""
    curves = lab.stuck_curves(STUCK_P, beta=beta)

    def show(p_wrong=0.99):
        plots.stuck_gradient(curves, p_wrong, title=f"the stuck categorical at p_S(wrong) = {p_wrong:.3f}")
        plt.show()

    return interact(show, p_wrong=FloatSlider(value=0.99, min=0.5, max=0.999, step=0.001, readout_format=".3f",
                                              description="p_S(wrong)", continuous_update=False))

# every public function of this module checks its annotated arguments when called from outside the package
# (mopd_mini.validate.guard_public); the package's own calls, e.g. the training loop's, skip the checks
from .validate import guard_public  # noqa: E402

guard_public(globals())


if __name__ == "__main__":   # python -m mopd_mini.widgets [trace.json]: time the widgets' redraws
    import json
    import sys

    import matplotlib

    matplotlib.use("Agg")
    trace = json.loads(open(sys.argv[1]).read()) if len(sys.argv) > 1 else None
    for name, t in time_redraws(trace).items():
        print(f"{name:22} " + "  ".join(f"{k} {v:8.2f}" for k, v in t.items()))

