"""tools/jupyterlab_check.py, the real-browser check of the widgets: its pure functions (which
notebooks have widgets, what counts as a failure, the table). The browser run itself is manual."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("jupyterlab_check", ROOT / "tools" / "jupyterlab_check.py")
check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)


def code(src):
    return {"cell_type": "code", "source": src, "outputs": []}


def test_a_notebook_has_widgets_only_where_its_code_builds_one():
    assert check.has_widgets({"cells": [code("widgets.trace_slider(run.trace);")]})
    assert check.has_widgets({"cells": [code("from ipywidgets import interact\ninteract(f, x=1)")]})
    assert not check.has_widgets({"cells": [code("# widgets.trace_slider(run.trace) would draw it")]})
    assert not check.has_widgets({"cells": [{"cell_type": "markdown", "source": "widgets.loss_lab(bank)"}]})
    assert not check.has_widgets({"cells": [code("import ipywidgets  # needed by 04\nx = 1")]})


def test_the_default_notebooks_are_the_numbered_ones_with_widgets():
    found = {p.name for p in check.widget_notebooks(ROOT / "notebooks")}
    for name in found:
        assert check.has_widgets(json.loads((ROOT / "notebooks" / name).read_text()))
    assert {"03_mopd.ipynb", "04_loss_lab.ipynb", "08_stuck.ipynb"} <= found
    assert "01_factworld.ipynb" not in found          # its setup cell names ipywidgets, builds none


def test_error_outputs_tracebacks_and_unrendered_widgets_are_found():
    nb = {"cells": [code("1"), {**code("1/0"), "outputs": [
        {"output_type": "stream", "name": "stdout", "text": "fine"},
        {"output_type": "error", "ename": "ZeroDivisionError", "evalue": "division by zero", "traceback": []}]}]}
    assert check.cell_errors(nb) == ["cell 1: ZeroDivisionError: division by zero"]
    texts = ["a figure", "Traceback (most recent call last):\n  File x\nKeyError: 'step'",
             "-------------------------------------------\nAssertionError    Traceback\nAssertionError: no"]
    assert check.tracebacks(texts) == ["KeyError: 'step'", "AssertionError: no"]
    assert check.not_rendered(["Loading widget...", "Error displaying widget: model not found", "ok"]) == \
        ["Loading widget...", "Error displaying widget: model not found"]


def test_a_slider_moves_away_from_the_end_it_is_at_and_a_selection_wraps():
    assert check.slider_key(0, 0, 6) == "ArrowRight"
    assert check.slider_key(6, 0, 6) == "ArrowLeft"
    assert [check.next_index(i, 3) for i in range(3)] == [1, 2, 0]
    assert check.slug("top-k correction") == "top-k-correction" and check.slug("\u200b") == "widget"


def report(status=("changed", "changed", "changed"), times=(300.0, 100.0, 200.0), **nb):
    w = {"kind": "slider", "description": "step", "cell": 28, "times_ms": list(times), "status": list(status)}
    return {"notebooks": [{"notebook": "03_mopd.ipynb", "run_seconds": 12.0, "widgets": [w], **nb}]}


def test_a_change_is_new_output_a_redraw_of_the_same_or_nothing():
    assert check.outcome({"t0": 10.0, "t1": 250.5, "t_redraw": 240.0}) == ("changed", 240.5)
    assert check.outcome({"t0": 10.0, "t1": None, "t_redraw": 90.0}) == ("same", 80.0)
    assert check.outcome({"t0": 10.0, "t1": None, "t_redraw": None}) == ("none", None)
    assert check.outcome({"t0": None, "t1": None, "t_redraw": None}) == ("none", None)   # the input never fired


def test_the_row_is_the_median_of_the_changes_that_drew_something_new():
    row = check.widget_row("03_mopd.ipynb", report()["notebooks"][0]["widgets"][0])
    assert (row["median_ms"], row["max_ms"], row["changed"], row["same"], row["changes"]) == (200, 300, 3, 0, 3)
    w = report(status=("changed", "same", "changed"), times=(300.0, 5.0, 100.0))["notebooks"][0]["widgets"][0]
    row = check.widget_row("x", w)
    assert (row["median_ms"], row["changed"], row["same"]) == (200, 2, 1)


def test_every_kind_of_failure_fails_and_a_clean_report_passes():
    assert check.failures(report()) == []
    assert check.failures(report(status=("changed", "same", "changed"))) == []   # a knob the setting ignores
    assert check.failures(report(status=("changed", "none", "changed"))) == \
        ["03_mopd.ipynb: cell 28 slider 'step': no response to 1 of 3 changes"]
    assert check.failures(report(status=("same", "same", "same"))) == []           # redrawn: it responded
    assert check.notes(report(status=("same", "same", "same"))) == \
        ["03_mopd.ipynb: cell 28 slider 'step': redrawn the same 3 of 3 times (a knob the setting does not use?)"]
    assert check.notes(report(status=("changed", "same", "same"))) == []
    assert check.failures(report(errors=["cell 6: AssertionError: agree"])) == \
        ["03_mopd.ipynb: cell 6: AssertionError: agree"]
    assert check.failures(report(tracebacks=["KeyError: 'step'"]))
    assert check.failures(report(not_rendered=["Loading widget..."]))
    assert check.failures(report(timed_out=3600))
    assert check.failures({"notebooks": [{"notebook": "x.ipynb", "widgets": []}]}) == ["x.ipynb: no widget found"]


def test_the_table_has_a_row_per_widget_and_the_console_errors():
    text = check.table(report(console_errors=["Failed to load resource: 404"]))
    assert "| 03_mopd.ipynb | 28 | slider | step | 3/3 | 0 | 200 | 300 |" in text
    assert "JS console: Failed to load resource: 404" in text


def test_a_console_error_names_its_address_once():
    assert check.console_line("Failed to load resource", {"url": "https://x/y.js"}) == \
        "Failed to load resource (https://x/y.js)"
    assert check.console_line("GET https://x/y.js 404", {"url": "https://x/y.js"}) == "GET https://x/y.js 404"
    assert check.console_line("oops", {}) == "oops"
