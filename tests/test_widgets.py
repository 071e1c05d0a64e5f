"""The loss lab's widgets show the values the configs hold (notebook 04); the study pickers of
notebooks 05b, 06 and 07 offer the settings of the committed evidence view."""

import pytest

pytest.importorskip("ipywidgets")
import matplotlib  # noqa: E402

matplotlib.use("Agg")

from mopd_mini import MOPDConfig, evidence, widgets  # noqa: E402


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


# ---------------------------------------------------------------------------------------------
# notebook 03's step slider: the data function behind it
# ---------------------------------------------------------------------------------------------

from mopd_mini import lab  # noqa: E402
from tests.test_plots import fake_trace  # noqa: E402


def test_the_step_view_holds_one_steps_samples_on_scales_fixed_over_all_steps():
    trace = fake_trace((1, 10, 25))
    views = [lab.trace_view(trace, s) for s in (1, 10, 25)]
    assert all({r["step"] for r in v["rows"]} == {v["step"]} and len(v["rows"]) == 4 for v in views)
    assert len({(v["kl_max"], v["advantage_max"]) for v in views}) == 1          # one scale, whatever the step
    assert views[0]["kl_max"] == max(x for r in trace for x in r["kl"]) == 2.1
    assert views[0]["advantage_max"] == 9.0                                     # the raw advantage's, not the clip's
    with pytest.raises(KeyError, match="tracked steps: \\[1, 10, 25\\]"):
        lab.trace_view(trace, 7)


def test_answer_kl_splits_the_first_token_from_the_rest():
    kl = lab.answer_kl(fake_trace((1, 10)))
    assert kl[1]["binding"] == pytest.approx((2.05, 0.005))                     # mean of 2.0 and 2.1; of 0.01, 0, 0.01, 0
    assert kl[10]["recall"][0] == pytest.approx(0.25) and kl[10]["recall"][0] < kl[1]["recall"][0]


def test_the_step_slider_offers_the_tracked_steps_and_draws_each_once():
    slider = widgets.trace_slider(fake_trace((1, 10, 25)))
    step = slider.controls["step"]
    assert list(step.options) == [1, 10, 25] and step.value == 1
    slider.warming.join()                                     # every step drawn in the background
    assert set(slider.cache) == {(("step", s),) for s in (1, 10, 25)}
    first = slider.image.value
    step.value = 25
    assert slider.image.value == slider.cache[(("step", 25),)][0] != first
    assert slider.show(step=10)["step"] == 10


def test_a_picker_redraws_a_setting_it_has_seen_from_its_cache(monkeypatch):
    """The second visit of a setting does not draw: the cached PNG is shown."""
    draws = []
    picker = widgets.Picker({"x": widgets.Dropdown(options=[1, 2], value=1)}, lambda x: x,
                            lambda x: draws.append(x) or widgets.Figure(figsize=(1, 1)))
    picker.controls["x"].value = 2
    picker.controls["x"].value = 1
    assert draws == [1, 2] and bytes(picker.image.value).startswith(b"\x89PNG")
    t = picker.timings([{"x": 1}, {"x": 2}], repeats=4)
    assert set(t) == {"lookup ms", "draw ms", "redraw ms"} and t["redraw ms"] < t["draw ms"] + 50


# ---------------------------------------------------------------------------------------------
# notebook 04's loss lab: the committed grid, its lookup, the live run
# ---------------------------------------------------------------------------------------------


def test_the_committed_grid_is_made_with_the_codes_current_config():
    """Stale if the lab's defaults, its grid's axes, the trainer's or the teachers' configs changed
    since `python -m mopd_mini.lab --make-grid` wrote it: remake it then."""
    grid = lab.load_grid()
    assert lab.grid_staleness(grid) == [], "the loss lab's grid is stale: cd notebooks && python -m mopd_mini.lab --make-grid"
    settings = [{k: c[k] for k in c if k not in ("label", "metrics")} for c in grid["cells"]]
    assert settings == lab.grid_settings()
    assert [c["label"] for c in grid["cells"]] == [lab.cell_label(s["loss"], s.get("clip"), s.get("topk", 64),
                                                                  s.get("topk_correction", True)) for s in settings]
    for c in grid["cells"]:
        assert [r["step"] for r in c["metrics"]] == list(range(1, lab.STEPS + 1)), c["label"]
        assert {"kl", "kl/binding", "kl/recall", "clipped/binding", "student_topk_mass/binding"} <= set(c["metrics"][0])


def test_the_staleness_check_names_what_changed(monkeypatch):
    """A changed default, a changed axis or a new field that changes training stales the grid; a new
    field at the value it had before it existed (runs.ADDED_FIELDS) does not."""
    import copy

    from mopd_mini import runs

    grid = lab.load_grid()
    doctored = copy.deepcopy(grid)
    doctored["config"]["student"]["lr"] = 1e-3
    doctored["config"]["grid"]["ks"] = [1, 64]
    assert lab.grid_staleness(doctored) == ["grid: grid {'clips': [0.5, 2.0, 5.0, None], 'ks': [1, 64], "
                                            "'corrections': [True, False]}, code " + repr(lab.GRID),
                                            "student.lr: grid 0.001, code 0.003"]
    older = copy.deepcopy(grid)
    del older["config"]["student"]["clip"]                     # as if `clip` were newer than the grid
    monkeypatch.setattr(runs, "ADDED_FIELDS", {**getattr(runs, "ADDED_FIELDS", {}), "clip": 5.0})
    assert lab.grid_staleness(older) == []
    monkeypatch.setattr(runs, "ADDED_FIELDS", {**runs.ADDED_FIELDS, "clip": 2.0})   # it changed training
    assert lab.grid_staleness(older) == ["student.clip: grid 2.0, code 5.0"]


def test_the_grid_ships_as_package_data():
    import fnmatch
    import tomllib
    from pathlib import Path

    root = Path(lab.__file__).parents[1]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["mopd_mini"]
    rel = lab.GRID_PATH.relative_to(Path(lab.__file__).parent).as_posix()
    assert any(fnmatch.fnmatch(rel, p) for p in patterns), f"{rel} is not in pyproject's package-data: {patterns}"


def fake_grid():
    metrics = lambda x: [{"step": 1, "kl": x}, {"step": 2, "kl": x / 2}]  # noqa: E731
    cells = [{"label": lab.cell_label(s["loss"], s.get("clip"), s.get("topk", 64), s.get("topk_correction", True)),
              **s, "metrics": metrics(i + 1.0)} for i, s in enumerate(lab.grid_settings())]
    return {"config": {"steps": 2, "lr": lab.LR}, "cells": cells}


def test_the_grid_lookup_ignores_the_knobs_a_form_does_not_train_with():
    grid = fake_grid()
    assert lab.grid_cell(grid, "pg", 0.5, k=1)["label"] == lab.grid_cell(grid, "pg", 0.5, k=64)["label"] == "pg c=0.5"
    assert lab.grid_cell(grid, "pg", None)["label"] == "pg no clip"
    assert lab.grid_cell(grid, "topk", clip=0.5, k=4, correction=False)["label"] == "top-4 naive"
    assert lab.grid_cell(grid, "topk", clip=5.0, k=4, correction=False) is lab.grid_cell(grid, "topk", 0.5, 4, False)
    assert lab.grid_cell(grid, "kl", clip=0.5, k=1)["label"] == "exact kl"
    assert lab.grid_cell(grid, "pg", 0.05) is None and lab.grid_cell(grid, "topk", k=8) is None


def test_the_lab_draws_history_the_default_and_the_picked_cell():
    grid, history = fake_grid(), {"pg c=5": [{"step": 1, "kl": 9.0}]}
    curves, note = lab.lab_curves(grid, history, "pg", 0.5, 64, True)
    assert list(curves) == ["pg c=5", "grid · pg c=5", "grid · pg c=0.5"] and "precomputed" in note
    curves, note = lab.lab_curves(grid, history, "pg", 0.05, 64, True)
    assert list(curves) == ["pg c=5", "grid · pg c=5"] and "not on the grid" in note and "button" in note
    assert lab.grid_table(grid)[0] == ("pg c=0.5", 1.0, 0.5)


def test_the_loss_lab_answers_from_the_grid_without_training(monkeypatch, teacher_bank):
    """Turning a knob only looks up the grid: short_run is never called."""
    monkeypatch.setattr(widgets.plt, "show", lambda *a, **k: None)
    monkeypatch.setattr(lab, "short_run", lambda *a, **k: pytest.fail("a grid lookup trained a run"))
    box = widgets.loss_lab(teacher_bank, {}, steps=2, grid=fake_grid())
    clip = next(w for row in box.children[:2] for w in row.children if w.description == "clip c")
    note = box.note
    clip.value = 0.5
    assert "grid · pg c=0.5" in note.value
    clip.value = widgets.NO_CLIP
    assert "grid · pg no clip" in note.value
    clip.value = 0.05
    assert "not on the grid" in note.value


def test_the_live_run_trains_the_knobs_setting_into_history(monkeypatch, teacher_bank):
    monkeypatch.setattr(widgets.plt, "show", lambda *a, **k: None)
    history = {}
    box = widgets.loss_lab(teacher_bank, history, steps=2, grid=fake_grid())
    clip = next(w for row in box.children[:2] for w in row.children if w.description == "clip c")
    clip.value = 0.05                                               # off the grid: only the button has it
    box.train()
    assert list(history) == ["live · pg c=0.05"] and [r["step"] for r in history["live · pg c=0.05"]] == [1, 2]
    clip.value = 5.0
    box.train()
    assert list(history) == ["live · pg c=0.05", "live · pg c=5"]
    clipped = {label: rows[0]["clipped/binding"] for label, rows in history.items()}
    assert clipped["live · pg c=0.05"] > clipped["live · pg c=5"]     # the knob reached the trainer


def test_the_grid_shares_runs_where_a_knob_does_not_change_training(teacher_bank):
    """PG trains alike at any k: the grid's shared runs are the same runs. Top-k ignores the clip, so a
    clip other than the default is refused (MOPDConfig.check: it would be recorded as if it acted)."""
    def kls(**setting):
        return [r["kl"] for r in lab.short_run(teacher_bank, steps=2, eval_every=0, **setting).metrics]
    assert kls(loss="pg", clip=0.5, topk=1) == kls(loss="pg", clip=0.5, topk=64)
    with pytest.raises(ValueError, match="clip=0.5 has no effect with loss='topk'"):
        kls(loss="topk", topk=4, clip=0.5)


@pytest.mark.slow
def test_one_grid_cell_recomputes_from_the_full_mode_teachers(monkeypatch, base_copy, tok):
    """Where notebook 02's full-mode teachers exist (notebooks/runs/course/, after a full course
    run; or MOPD_GRID_RUNS, a folder holding runs/), the grid's exact-KL cell is recomputed (one
    60-step run, 15-50 s on 2 cores) and must match the committed one; skipped otherwise (CI)."""
    import os
    from pathlib import Path

    from mopd_mini import AdapterBank, GRPOConfig, train_grpo

    folder = Path(os.environ.get("MOPD_GRID_RUNS", Path(lab.__file__).parents[1] / "notebooks")).resolve()
    if not all((folder / "runs" / "course" / f"teacher_{d}" / "adapter_model.safetensors").exists()
               for d in MOPDConfig().domains):
        pytest.skip(f"no full-mode teachers under {folder}/runs/course/ (run notebook 02 in the full mode)")
    monkeypatch.chdir(folder)
    bank = AdapterBank(base_copy, tok)
    for d in MOPDConfig().domains:
        train_grpo(bank, GRPOConfig(domain=d, progress=False))      # reloads the finished teacher
    committed = lab.grid_cell(lab.load_grid(), "kl")["metrics"]
    again = lab.run_cell(bank, {"loss": "kl"})
    assert [r["step"] for r in again] == [r["step"] for r in committed]
    assert max(abs(a["kl"] - b["kl"]) for a, b in zip(again, committed)) < 1e-3


def test_the_stuck_slider_spans_half_to_0999_and_draws_headless():
    """Notebook 08's slider: p_S(wrong) from 0.5 to 0.999, its curves start and end there, and the
    interact draws once with the slider's value."""
    assert widgets.STUCK_P[0] == 0.5 and widgets.STUCK_P[-1] == 0.999
    assert list(widgets.STUCK_P) == sorted(widgets.STUCK_P)
    panel = widgets.stuck_slider()
    slider = next(w for w in panel.widget.children if getattr(w, "description", "") == "p_S(wrong)")
    assert (slider.min, slider.max) == (0.5, 0.999) and 0.5 <= slider.value <= 0.999


def test_the_pickers_offer_the_studys_settings_and_draw_headless():
    """The study pickers of notebooks 05b, 06 and 07 offer the settings of the committed evidence
    view (mopd_mini/data/evidence.json) and warm their whole cache headless."""
    m = widgets.matched_picker()
    assert widgets.options(m.controls["T"]) == [100, 200, 400] and m.controls["T"].value == 400
    assert widgets.options(m.controls["method"]) == list(evidence.RIVALS)
    assert m.show(T=400, method="mopd_pg")["picked"]["resolved_holm"]
    m.controls["method"].value = "mopd_pg"
    assert "resolved below 0" in m.note.value
    o, d = widgets.origin_picker(), widgets.depth_picker()
    assert widgets.options(o.controls["seed"]) == ["mean", *evidence.load_view()["origin"]["seeds"]]
    assert widgets.options(d.controls["depth"]) == [2, 3, 4, 5]
    for p in (m, o, d):
        p.warming.join()
        assert len(p.cache) == len(widgets.every(p.controls, *p.controls)())
