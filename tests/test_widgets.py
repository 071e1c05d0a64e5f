"""The loss lab's widgets show the values the configs hold (notebook 04)."""

import pytest

pytest.importorskip("ipywidgets")
import matplotlib  # noqa: E402

matplotlib.use("Agg")

from mopd_mini import MOPDConfig, widgets  # noqa: E402


def test_the_clip_slider_shows_the_configs_clip():
    slider = widgets.clip_slider()
    assert slider.value == MOPDConfig().clip == 5.0
    assert slider.label == "5"                      # not "5.01", a log slider's nearest step
    assert all(label == f"{value:g}" for label, value in slider.options)


def test_a_clip_off_the_stops_is_shown_as_given():
    slider = widgets.clip_slider(0.3)
    assert slider.value == 0.3 and slider.label == "0.3"
    assert [v for _, v in slider.options] == sorted(v for _, v in slider.options)


def test_the_gradient_panel_draws_with_the_configs_clip():
    """Headless: interact draws once with the slider's value; the slider holds the config's clip."""
    panel = widgets.gradient_panel([1.0, 0.0, -1.0, 0.5], [0.0, 1.0, -0.5, 0.2])
    clip = next(w for w in panel.widget.children if getattr(w, "description", "") == "clip c")
    assert clip.value == 5.0 and clip.label == "5"


def test_the_stuck_slider_spans_half_to_0999_and_draws_headless():
    """Notebook 08's slider: p_S(wrong) from 0.5 to 0.999, its curves start and end there, and the
    interact draws once with the slider's value."""
    assert widgets.STUCK_P[0] == 0.5 and widgets.STUCK_P[-1] == 0.999
    assert list(widgets.STUCK_P) == sorted(widgets.STUCK_P)
    panel = widgets.stuck_slider()
    slider = next(w for w in panel.widget.children if getattr(w, "description", "") == "p_S(wrong)")
    assert (slider.min, slider.max) == (0.5, 0.999) and 0.5 <= slider.value <= 0.999
