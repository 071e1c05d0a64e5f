"""Every figure that notebooks 03 and 04 draw says what it shows: a title and both axis labels on
every panel, a colour bar that names its value, one colour scale where two maps are compared."""

import pytest

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from mopd_mini import lab, plots  # noqa: E402


def fake_trace(steps=(1, 10, 25)):
    """Tracked records as distill.track writes them: 2 prompts per domain per step, 3 tokens each."""
    out = []
    for s in steps:
        for d, gold in (("binding", "g3"), ("recall", "v25")):
            for i in range(2):
                kl0 = 2.0 / s + 0.1 * i
                out.append({"step": s, "domain": d, "prompt": "...", "answer": gold, "tokens": [gold, ".", "<end>"],
                            "kl": [kl0, 0.01, 0.0], "advantage_raw": [-8.0 / s - i, 0.02, 0.0],
                            "advantage": [max(-5.0, -8.0 / s - i), 0.02, 0.0], "stuck": [False, False, False]})
    return out


def rows(n=8):
    return [{"step": s, "kl": 1 / s, "kl/binding": 1 / s, "kl/recall": 2 / s, "clipped/binding": 0.1, "clipped/recall": 0.2,
             "student_topk_mass/binding": 0.5, "student_topk_mass/recall": 0.6,
             **({"acc/binding/L16": 0.5, "acc/binding/L32": 0.4, "acc/recall/L16": 0.3, "acc/recall/L24": 0.2}
                if s % 4 == 0 else {})} for s in range(1, n + 1)]


def panels(fig):
    """The figure's data axes (colour bars excluded)."""
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]


def colorbars(fig):
    return [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]


def assert_labelled(fig):
    assert panels(fig)
    for ax in panels(fig):
        assert ax.get_title(), "a panel without a title"
        assert ax.get_xlabel(), f"{ax.get_title()!r}: no x label"
        assert ax.get_ylabel(), f"{ax.get_title()!r}: no y label"
    for cax in colorbars(fig):
        assert cax.get_ylabel(), "a colour bar that does not say what it draws"
    plt.close(fig)


def _curves():
    fig, axes = plt.subplots(1, 3)
    plots.curves({"student": rows()}, ["kl/binding", "kl/recall"], ax=axes[0], ylabel="exact reverse KL per token",
                 title="KL to the routed teacher")
    plots.curves({"student": rows()}, ["clipped/binding"], ax=axes[1])      # defaults: the key names the axis
    plots.curves({"student": rows()}, ["acc/binding/L16", "acc/recall/L16"], ax=axes[2], ylabel="greedy accuracy")
    return fig


def _show_history():
    from mopd_mini import widgets
    plt.show = lambda *a, **k: None
    return widgets.show_history({"a": rows(), "b": rows()})


FIGURES = {
    "token_heatmap kl (03)": lambda: plots.token_heatmap(fake_trace(), "kl", steps=(1, 25)),
    "token_heatmap advantage (03)": lambda: plots.token_heatmap(fake_trace(), "advantage_raw", steps=(1,)),
    "step_maps (03's slider)": lambda: plots.step_maps(lab.trace_view(fake_trace(), 10)),
    "curves (03, 04)": _curves,
    "cross_table (03)": lambda: plots.cross_table({"acc": {m: {"binding": {8: 0.3, 16: 0.2}, "recall": {16: 0.5}}
                                                          for m in ("base", "student")}}),
    "gradient_bars (04)": lambda: plots.gradient_bars(lab.categorical_gradients([1.0, 0.0, -1.0], [0.0, 1.0, 0.5], k=2),
                                                      [1.0, 0.0, -1.0], [0.0, 1.0, 0.5]),
    "show_history (04)": _show_history,
}


@pytest.mark.parametrize("name", FIGURES)
def test_every_panel_has_a_title_and_axis_labels(name):
    pytest.importorskip("ipywidgets") if "history" in name else None
    assert_labelled(FIGURES[name]())


def test_a_panel_without_labels_fails_the_check():
    """The check can fail: a bare imshow has no title or labels."""
    fig, ax = plt.subplots()
    ax.imshow([[0, 1]])
    with pytest.raises(AssertionError):
        assert_labelled(fig)


def test_raw_and_clipped_advantage_maps_share_one_colour_scale():
    """One colour means one value: the clipped map drawn on the raw map's scale (lab.trace_scale),
    the colour bar saying so; by default each map would scale to its own maximum (8 vs 5 here)."""
    trace = fake_trace()
    top = lab.trace_scale(trace, ("advantage_raw", "advantage"), steps=(1,))
    assert top == 9.0                                            # |-8 - 1|: the raw map's, not the clip's 5
    figs = [plots.token_heatmap(trace, v, steps=(1,), vmax=top) for v in ("advantage_raw", "advantage")]
    clims = [panels(f)[0].images[0].get_clim() for f in figs]
    assert clims[0] == clims[1] == (-top, top)
    labels = [colorbars(f)[0].get_ylabel() for f in figs]
    assert "before the clip" in labels[0] and "after the clip" in labels[1]
    assert all("±9.00" in lab_ for lab_ in labels)
    own = plots.token_heatmap(trace, "advantage", steps=(1,))
    assert panels(own)[0].images[0].get_clim() == (-5.0, 5.0) and "this map's own" in colorbars(own)[0].get_ylabel()
    for f in (*figs, own):
        plt.close(f)


def test_the_step_maps_keep_their_scale_across_steps():
    trace = fake_trace()
    clims = []
    for step in (1, 10, 25):
        fig = plots.step_maps(lab.trace_view(trace, step))
        clims.append(tuple(ax.images[0].get_clim() for ax in panels(fig)))
        plt.close(fig)
    assert clims[0] == clims[1] == clims[2]
