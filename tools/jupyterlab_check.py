"""Check the course's widgets in a real JupyterLab, in a real (headless) Chromium.

    python tools/jupyterlab_check.py [NOTEBOOK ...] [--out DIR] [--repeats N] [--full]

No notebook given: every numbered notebook under notebooks/ whose code builds a widget. For each
notebook, in one JupyterLab server started on a free localhost port with a token, in a temporary
copy of notebooks/ and docs/ (no runs/, no figures: the notebook trains what it needs), with
MOPD_FAST=1 (the CI mode; --full: the full mode) and PYTHONPATH at this checkout in the kernel's
environment:

1. open the notebook, Run > Run All Cells, wait until every cell has run and the kernel is idle;
2. save it and read the saved file: an error output in a cell is a failure; the page's text is
   searched for tracebacks and for widgets that did not render ("Loading widget...",
   "Error displaying widget");
3. find every ipywidgets control in the page (sliders, dropdowns, checkboxes, toggle buttons,
   radio buttons, buttons) and change each `--repeats` times (a slider by the keyboard, a
   dropdown to its next option, a box or button by a click): the response time is from the
   browser's input event to the new output of the cell (its new figure, where it has one, else
   the changed text of its Output and HTML widgets), measured in the page; a change that redraws
   the output as it was (a knob the setting does not use) counts as "same output"; a screenshot
   of the cell's output before and after the first change goes to --out;
4. JavaScript console errors and page errors are recorded with the notebook they came under.

Prints a table, writes <out>/summary.json, exits 1 if a cell raised, a widget did not render or
a change got no response (a control whose every change redrew the same output is a note).

Needs: Playwright for Python (`pip install -e ".[browser]"`; `playwright install` is not needed
with a system Chromium) and a Chromium (`apt-get install chromium`: --chromium /usr/bin/chromium).
It is a manual check, not a test: tests/tools/test_jupyterlab_check.py tests its pure functions.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
"""flags for a closed network: without the background-networking ones Chromium's own connections
(updates, sync, field trials) are refused and slow the start"""

WIDGET_CALL = re.compile(r"\bwidgets\.\w+\(|\binteract(?:ive|ive_output)?\(|\bipywidgets\.\w+\(")
"""code that builds a widget: mopd_mini.widgets' views, ipywidgets' interact or a control"""

NOT_RENDERED = ("Loading widget", "Error displaying widget", "Error rendering widget")
"""text JupyterLab's widget manager leaves where a widget did not render"""

KINDS = ("slider", "dropdown", "checkbox", "toggle-buttons", "radio", "toggle", "button")
"""the controls the check changes (a text box is left alone: what to type is the notebook's business)"""

LAB_SETTINGS = {
    # every cell in the DOM (JupyterLab 4 detaches cells off screen by default): all widgets found
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    # no news or update checks: the network is closed, and a toast would cover the outputs
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                      "checkForUpdates": False},
}


# ---------------------------------------------------------------------------------------------
# pure functions: which notebooks, what failed, the table (tested in CI, no browser)
# ---------------------------------------------------------------------------------------------


def has_widgets(nb: dict) -> bool:
    """Whether a notebook's code cells build a widget (comment lines do not count)."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        source = "".join(cell.get("source", ""))
        code = "\n".join(line.split("#", 1)[0] for line in source.splitlines())
        if WIDGET_CALL.search(code):
            return True
    return False


def widget_notebooks(folder: Path) -> list[Path]:
    """The numbered notebooks of `folder` that build a widget."""
    return [p for p in sorted(Path(folder).glob("[0-9][0-9]*_*.ipynb")) if has_widgets(json.loads(p.read_text()))]


def cell_errors(nb: dict) -> list[str]:
    """'cell <index>: <ename>: <evalue>' for every error output of a saved notebook."""
    return [f"cell {i}: {o.get('ename', '?')}: {o.get('evalue', '')}".rstrip()
            for i, cell in enumerate(nb.get("cells", []))
            for o in cell.get("outputs", []) if o.get("output_type") == "error"]


def tracebacks(texts: list[str]) -> list[str]:
    """The output texts that hold a Python traceback (a widget's callback prints its own into the
    widget's Output, where no error output records it), each cut to its last line."""
    found = []
    for text in texts:
        if "Traceback (most recent call last)" in text or re.search(r"^-{20,}\s*\n\S*Error", text, re.M):
            lines = [line for line in text.strip().splitlines() if line.strip()]
            found.append(lines[-1].strip() if lines else text.strip())
    return found


def not_rendered(texts: list[str]) -> list[str]:
    """The texts where a widget did not render."""
    return [t.strip() for t in texts if any(m in t for m in NOT_RENDERED)]


def slider_key(value: float, low: float, high: float) -> str:
    """The arrow key that moves a slider's handle one step, away from the end it is at."""
    return "ArrowLeft" if value >= high else "ArrowRight"


def next_index(index: int, n: int) -> int:
    """A selection's next option, wrapping at the end."""
    return (index + 1) % n


def slug(text: str, limit: int = 40) -> str:
    """A file-name piece from a widget's description."""
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:limit] or "widget"


def console_line(text: str, location: dict | None) -> str:
    """A console error with the address it came from, if the text does not already hold it."""
    url = (location or {}).get("url") or ""
    return text if not url or url in text else f"{text} ({url})"


def outcome(poll: dict) -> tuple[str, float | None]:
    """One change's result from the page's timestamps (ms, performance.now()): t0 the input event,
    t1 the new output (its figure, where it has one), t_redraw the first mutation of the output
    outside the control. "changed" and the ms to t1; "same" (redrawn, nothing new: the setting
    draws what the last one did) and the ms to t_redraw; "none" (no response in the time allowed)."""
    if poll.get("t0") is None:
        return "none", None
    if poll.get("t1") is not None:
        return "changed", round(poll["t1"] - poll["t0"], 1)
    if poll.get("t_redraw") is not None:
        return "same", round(poll["t_redraw"] - poll["t0"], 1)
    return "none", None


def widget_row(notebook: str, w: dict) -> dict:
    """One table row from one control's measurement ({"status": [...], "times_ms": [...], ...}):
    the median and the largest response over the changes that drew something new."""
    times = [t for t, s in zip(w["times_ms"], w["status"]) if s == "changed"]
    return {"notebook": notebook, "cell": w["cell"], "kind": w["kind"], "description": w["description"],
            "changes": len(w["status"]), "changed": w["status"].count("changed"), "same": w["status"].count("same"),
            "median_ms": round(statistics.median(times)) if times else None,
            "max_ms": round(max(times)) if times else None}


def failures(report: dict) -> list[str]:
    """Why the check fails, one line each: a cell that raised, a traceback in an output, a widget
    that did not render, a change with no response at all, a notebook with no widget. A redraw
    that left the output as it was is a response (see `notes`)."""
    bad = []
    for nb in report["notebooks"]:
        name = nb["notebook"]
        bad += [f"{name}: {e}" for e in nb.get("errors", [])]
        bad += [f"{name}: traceback in an output: {t}" for t in nb.get("tracebacks", [])]
        bad += [f"{name}: widget not rendered: {t}" for t in nb.get("not_rendered", [])]
        if nb.get("timed_out"):
            bad.append(f"{name}: the cells did not finish in {nb['timed_out']} s")
        if not nb.get("widgets") and not nb.get("errors"):
            bad.append(f"{name}: no widget found")
        for w in nb.get("widgets", []):
            what = f"{name}: cell {w['cell']} {w['kind']} '{w['description']}'"
            if "none" in w["status"]:
                bad.append(f"{what}: no response to {w['status'].count('none')} of {len(w['status'])} changes")
    return bad


def notes(report: dict) -> list[str]:
    """What passes but deserves a look: a control every change of which redrew the output as it
    was (a knob the current setting does not use, e.g. the loss lab's k while the loss is PG)."""
    return [f"{nb['notebook']}: cell {w['cell']} {w['kind']} '{w['description']}': redrawn the same "
            f"{len(w['status'])} of {len(w['status'])} times (a knob the setting does not use?)"
            for nb in report["notebooks"] for w in nb.get("widgets", [])
            if w["status"] and all(s == "same" for s in w["status"])]


def table(report: dict) -> str:
    """The per-widget table (markdown), then each notebook's errors and console errors."""
    head = "| notebook | cell | widget | description | new output | same output | median ms | max ms |"
    lines = [head, "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for nb in report["notebooks"]:
        for w in nb.get("widgets", []):
            r = widget_row(nb["notebook"], w)
            lines.append(f"| {r['notebook']} | {r['cell']} | {r['kind']} | {r['description']} | "
                         f"{r['changed']}/{r['changes']} | {r['same']} | "
                         f"{r['median_ms'] if r['median_ms'] is not None else '-'} | "
                         f"{r['max_ms'] if r['max_ms'] is not None else '-'} |")
    for nb in report["notebooks"]:
        extra = [f"cells ran in {nb.get('run_seconds', 0):.0f} s"]
        extra += [f"error: {e}" for e in nb.get("errors", []) + nb.get("tracebacks", [])]
        extra += [f"JS console: {c}" for c in nb.get("console_errors", [])]
        lines.append(f"{nb['notebook']}: " + "; ".join(extra))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# the browser side (JavaScript run in the page)
# ---------------------------------------------------------------------------------------------

JS_HELPERS = r"""
window.__jlc = window.__jlc || {};
__jlc.hash = (s) => { let h = 2166136261; for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i);
    h = Math.imul(h, 16777619); } return (h >>> 0).toString(16) + ':' + s.length; };
__jlc.outputOf = (el) => { const cell = el.closest('.jp-Cell');
    return cell ? (cell.querySelector('.jp-Cell-outputWrapper') || cell) : el.parentElement; };
// what a control's change should change: the figures and the text of Output and HTML widgets
__jlc.sig = (out) => { const fig = [], txt = [];
    // figures only: the output's images, svg figures and Image widgets (not the prompt's icons)
    out.querySelectorAll('.jp-RenderedImage img, .jp-RenderedSVG img, img.widget-image')
        .forEach(i => fig.push('img:' + __jlc.hash(i.src)));
    out.querySelectorAll('.jp-RenderedSVG svg').forEach(s => fig.push('svg:' + __jlc.hash(s.outerHTML)));
    out.querySelectorAll('.widget-output, .jupyter-widgets-output-area, .widget-html, .widget-htmlmath')
        .forEach(o => txt.push(__jlc.hash(o.textContent)));
    return {fig: fig.join('|'), txt: txt.join('|'), imgs: fig.length}; };
__jlc.kindOf = (el) => {
    if (el.matches('.widget-slider, .widget-hslider, .widget-vslider')) return 'slider';
    if (el.matches('.widget-dropdown')) return 'dropdown';
    if (el.matches('.widget-checkbox')) return 'checkbox';
    if (el.matches('.widget-toggle-buttons')) return 'toggle-buttons';
    if (el.matches('.widget-radio-box, .widget-radio')) return 'radio';
    if (el.matches('.widget-toggle-button')) return 'toggle';
    if (el.matches('.widget-button')) return 'button';
    return null; };
__jlc.controls = () => {
    const sel = '.widget-slider, .widget-hslider, .widget-vslider, .widget-dropdown, .widget-checkbox, ' +
                '.widget-toggle-buttons, .widget-radio-box, .widget-radio, .widget-toggle-button, .widget-button';
    const cells = Array.from(document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell'));
    const found = [];
    document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea ' + sel).forEach(el => {
        if (el.parentElement && el.parentElement.closest(sel)) return;   // a toggle button inside its group
        const kind = __jlc.kindOf(el); if (!kind) return;
        if (found.some(f => f.el === el)) return;
        const label = el.querySelector(':scope > .widget-label');
        const clean = (t) => t.replace(/[\u200b\s]+/g, ' ').trim();
        let desc = label ? clean(label.textContent) : '';
        if (!desc && ['button', 'toggle', 'checkbox'].includes(kind)) desc = clean(el.textContent);
        const disabled = !!el.querySelector('[disabled]') || el.matches('[disabled]');
        found.push({el, kind, description: desc, cell: cells.indexOf(el.closest('.jp-Cell')), disabled});
    });
    return found.map((f, i) => { f.el.setAttribute('data-jlc', String(i));
        return {id: i, kind: f.kind, description: f.description, cell: f.cell, disabled: f.disabled}; }); };
__jlc.arm = (id) => { const el = document.querySelector(`[data-jlc="${id}"]`);
    const out = __jlc.outputOf(el); const base = __jlc.sig(out);
    // t1: the response (the new figure where the output has one, else any change); t_any: the first
    // change; t_redraw: the first mutation of the output outside the control (a redraw, maybe identical)
    const st = {t0: null, t1: null, t_any: null, t_redraw: null, last: null, base};
    const mark = () => { if (st.t0 === null) st.t0 = performance.now(); };
    st.events = ['keydown', 'pointerdown', 'mousedown', 'input', 'change'];
    st.events.forEach(e => document.addEventListener(e, mark, true));
    st.mark = mark;
    st.obs = new MutationObserver((records) => { const now = performance.now();
        if (!records.some(r => !el.contains(r.target))) return;     // the control's own readout
        st.last = now;
        if (st.t0 !== null && st.t_redraw === null) st.t_redraw = now;
        if (st.t1 === null && st.t0 !== null) { const s = __jlc.sig(out);
            const fig = s.fig !== base.fig && s.imgs > 0, any = fig || s.txt !== base.txt;
            if (st.t_any === null && any) st.t_any = now;
            if (base.imgs > 0 ? fig : any) st.t1 = now; } });
    st.obs.observe(out, {subtree: true, childList: true, attributes: true, characterData: true});
    __jlc.st = st; return true; };
__jlc.poll = () => { const st = __jlc.st;
    return {t0: st.t0, t1: st.t1, t_any: st.t_any, t_redraw: st.t_redraw, quiet_ms: st.last === null ? null : performance.now() - st.last}; };
__jlc.disarm = () => { const st = __jlc.st; st.obs.disconnect();
    st.events.forEach(e => document.removeEventListener(e, st.mark, true)); return true; };
__jlc.state = () => { const app = window.jupyterapp; const w = app && app.shell.currentWidget;
    const ctx = w && w.sessionContext;
    const prompts = Array.from(document.querySelectorAll(
        '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')).map(p => p.textContent.trim());
    return {kernel: ctx ? ctx.kernelDisplayStatus : null, code: prompts.length,
            running: prompts.filter(t => t.includes('*')).length,
            executed: prompts.filter(t => /\[\d+\]/.test(t)).length}; };
__jlc.outputTexts = () => Array.from(document.querySelectorAll(
    '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output')).map(o => o.innerText);
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def versions(chromium: str) -> dict:
    """The versions the result depends on."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for name in ("playwright", "jupyterlab", "ipywidgets", "jupyterlab_widgets", "ipykernel", "notebook"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    try:
        out["chromium"] = subprocess.run([chromium, "--version"], capture_output=True, text=True,
                                         timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        out["chromium"] = f"not run: {e}"
    return out


def host_load() -> dict:
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"node": platform.node(), "system": platform.platform(), "cpus": os.cpu_count(),
            "load_average": [round(x, 2) for x in load] if load else None}


class Lab:
    """A JupyterLab server in a temporary copy of notebooks/ and docs/, for one check."""

    def __init__(self, notebooks: list[Path], full: bool = False, keep: bool = False, workdir: Path | None = None):
        """`workdir`: this folder instead of a temporary one, kept, its runs/ reused (a second
        check reloads the teachers the first trained); the notebooks and docs are copied afresh."""
        self.dir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="jupyterlab-check-"))
        self.keep = keep or workdir is not None
        (self.dir / "notebooks").mkdir(parents=True, exist_ok=True)
        for nb in notebooks:
            shutil.copy(nb, self.dir / "notebooks" / nb.name)
        if (ROOT / "notebooks" / "solutions").is_dir():
            shutil.copytree(ROOT / "notebooks" / "solutions", self.dir / "notebooks" / "solutions", dirs_exist_ok=True)
        if (ROOT / "docs").is_dir():
            shutil.copytree(ROOT / "docs", self.dir / "docs", dirs_exist_ok=True)
        settings = self.dir / ".lab" / "settings"
        for rel, value in LAB_SETTINGS.items():
            (settings / rel).parent.mkdir(parents=True, exist_ok=True)
            (settings / rel).write_text(json.dumps(value))
        self.port, self.token = free_port(), os.urandom(16).hex()
        env = dict(os.environ)
        env.pop("MOPD_FAST", None)
        if not full:
            env["MOPD_FAST"] = "1"
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        env["JUPYTERLAB_SETTINGS_DIR"] = str(settings)
        env["JUPYTERLAB_WORKSPACES_DIR"] = str(self.dir / ".lab" / "workspaces")
        cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
               f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.dir}",
               "--LabApp.expose_app_in_browser=True"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")
        self.log = open(self.dir / "jupyterlab.log", "w")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT, cwd=self.dir)
        self.url = f"http://127.0.0.1:{self.port}"
        self.wait_up()

    def api(self, path: str, method: str = "GET"):
        req = urllib.request.Request(f"{self.url}/api/{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=30) as r:
            body = r.read()
        return json.loads(body) if body else None

    def wait_up(self, timeout: float = 180):
        end = time.time() + timeout
        while time.time() < end:
            if self.proc.poll() is not None:
                raise SystemExit(f"JupyterLab exited ({self.proc.returncode}): see {self.dir / 'jupyterlab.log'}")
            try:
                self.api("status")
                return
            except OSError:
                time.sleep(1)
        raise SystemExit(f"JupyterLab did not answer in {timeout} s: see {self.dir / 'jupyterlab.log'}")

    def shutdown_kernels(self):
        for k in self.api("kernels") or []:
            self.api(f"kernels/{k['id']}", method="DELETE")

    def close(self):
        try:
            self.shutdown_kernels()
        except OSError:
            pass
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)


def wait_for(page, predicate, timeout: float, every: float = 1.0, progress=None):
    """Poll `predicate(state)` on __jlc.state() until true; None if it timed out, else the state."""
    end, last_print = time.time() + timeout, time.time()
    while time.time() < end:
        state = page.evaluate("__jlc.state()")
        if predicate(state):
            return state
        if progress and time.time() - last_print > 60:
            progress(state)
            last_print = time.time()
        time.sleep(every)
    return None


def run_all(page, timeout: float, log) -> tuple[float, int | None]:
    """Run > Run All Cells; wait until no cell is queued or running and the kernel is idle (three
    polls in a row). Returns (seconds, None) or (seconds, timeout) if it did not finish."""
    start = time.time()
    try:
        page.click(".lm-MenuBar-itemLabel:text-is('Run')", timeout=10_000)
        page.click(".lm-Menu-itemLabel:text-is('Run All Cells')", timeout=10_000)
    except Exception as e:  # noqa: BLE001  the menu moved: the same command, by name
        log(f"  menu not found ({type(e).__name__}); running the command notebook:run-all-cells")
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    wait_for(page, lambda s: s["running"] > 0 or s["executed"] > 0, 60, every=0.5)
    calm = [0]

    def done(s):
        calm[0] = calm[0] + 1 if (s["running"] == 0 and s["kernel"] == "idle") else 0
        return calm[0] >= 3

    state = wait_for(page, done, timeout, every=1.0,
                     progress=lambda s: log(f"  ... {s['executed']} of {s['code']} code cells run, "
                                            f"{s['running']} queued or running, kernel {s['kernel']}"))
    return time.time() - start, (None if state else int(timeout))


def change(page, control: dict):
    """One change of a control, as a user makes it."""
    root = page.locator(f"[data-jlc='{control['id']}']")
    kind = control["kind"]
    if kind == "slider":
        handle = root.locator(".noUi-handle").first
        handle.scroll_into_view_if_needed()
        value, low, high = (float(handle.get_attribute(a) or 0)
                            for a in ("aria-valuenow", "aria-valuemin", "aria-valuemax"))
        handle.focus()
        page.evaluate("__jlc.st.t0 = null")          # the focus is not the change
        page.keyboard.press(slider_key(value, low, high))
    elif kind == "dropdown":
        select = root.locator("select")
        n = select.locator("option").count()
        index = select.evaluate("s => s.selectedIndex")
        select.select_option(index=next_index(index, n))
    elif kind == "checkbox":
        root.locator("input[type=checkbox]").click()
    elif kind == "toggle-buttons":
        root.locator("button:not(.mod-active)").first.click()
    elif kind == "radio":
        root.locator("input[type=radio]:not(:checked)").first.click()
    else:                                             # a button or a toggle button
        (root if root.evaluate("e => e.tagName") == "BUTTON" else root.locator("button").first).click()


def measure(page, control: dict, repeats: int, timeout: float, shots: Path, stem: str, log) -> dict:
    """Change a control `repeats` times (a button once: it may train); each time, the ms from the
    input event to the new figure in its cell's output (see `outcome`), screenshots around the
    first change. A redraw that left the output as it was ends after 3 s of quiet, the kernel idle."""
    out = page.locator(f"[data-jlc='{control['id']}']").locator(
        "xpath=ancestor::div[contains(concat(' ', normalize-space(@class), ' '), ' jp-Cell ')][1]"
        "//div[contains(concat(' ', normalize-space(@class), ' '), ' jp-Cell-outputWrapper ')]").first
    name = f"{stem}_cell{control['cell']:02d}_{control['id']:02d}_{control['kind']}_{slug(control['description'])}"
    result = {**{k: control[k] for k in ("kind", "description", "cell")}, "status": [], "times_ms": [],
              "first_change_ms": [], "screenshots": []}
    idle = lambda: page.evaluate("__jlc.state()")["kernel"] == "idle"   # noqa: E731
    n = 1 if control["kind"] in ("button", "toggle") else repeats
    for r in range(n):
        wait_for(page, lambda s: s["kernel"] == "idle", 600, every=0.2)
        if r == 0:
            out.screenshot(path=str(shots / f"{name}_before.png"))
            result["screenshots"].append(str(shots / f"{name}_before.png"))
        page.evaluate(f"__jlc.arm({control['id']})")
        change(page, control)
        end = time.time() + timeout
        while True:
            poll = page.evaluate("__jlc.poll()")
            quiet = poll["quiet_ms"] or 0
            if time.time() > end or (poll["t1"] is not None and quiet > 500 and idle()):
                break                                  # the new output, settled
            if poll["t1"] is None and poll["t_redraw"] is not None and quiet > 3000 and idle():
                break                                  # redrawn, the same output
            time.sleep(0.05)
        page.evaluate("__jlc.disarm()")
        status, ms = outcome(poll)
        result["status"].append(status)
        result["times_ms"].append(ms)
        result["first_change_ms"].append(round(poll["t_any"] - poll["t0"], 1)
                                         if poll["t_any"] is not None and poll["t0"] is not None else None)
        if r == 0:
            out.screenshot(path=str(shots / f"{name}_after.png"))
            result["screenshots"].append(str(shots / f"{name}_after.png"))
    log(f"  {control['kind']:14} {control['description'][:30]:30} cell {control['cell']:3}: "
        f"{list(zip(result['status'], result['times_ms']))} ms")
    return result


def check_notebook(context, lab: Lab, name: str, args, log) -> dict:
    """Open, run, inspect and turn every widget of one notebook; its record for the report."""
    page = context.new_page()
    console = []
    page.on("console", lambda m: console.append(console_line(m.text, m.location)) if m.type == "error" else None)
    page.on("pageerror", lambda e: console.append(f"page error: {e}"))
    page.set_viewport_size({"width": 1500, "height": 1100})
    page.goto(f"{lab.url}/lab/tree/notebooks/{name}?reset&token={lab.token}")   # reset: no tab reopened
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=120_000)
    page.wait_for_function("() => window.jupyterapp !== undefined", timeout=60_000)
    page.evaluate(JS_HELPERS)
    record = {"notebook": name}
    if not wait_for(page, lambda s: s["kernel"] == "idle", 180):
        record["errors"] = ["the kernel did not start in 180 s"]
        page.close()
        return record
    log(f"{name}: Run > Run All Cells ...")
    record["run_seconds"], timed_out = run_all(page, args.run_timeout, log)
    record["timed_out"] = timed_out
    log(f"  cells done in {record['run_seconds']:.0f} s")
    end = time.time() + 60                            # widgets render after their cells
    while time.time() < end and any("Loading widget" in t for t in page.evaluate("__jlc.outputTexts()")):
        time.sleep(1)
    page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
    time.sleep(2)
    saved = json.loads((lab.dir / "notebooks" / name).read_text())
    texts = page.evaluate("__jlc.outputTexts()")
    record["errors"] = cell_errors(saved)
    record["tracebacks"] = [t for t in tracebacks(texts) if not any(t in e for e in record["errors"])]
    record["not_rendered"] = not_rendered(texts)
    shots = Path(args.out)
    page.screenshot(path=str(shots / f"{Path(name).stem}_page.png"))
    controls = [c for c in page.evaluate("__jlc.controls()") if not c["disabled"]]
    if args.no_buttons:
        controls = [c for c in controls if c["kind"] != "button"]
    log(f"  {len(controls)} controls: " + ", ".join(f"{c['kind']} '{c['description']}'" for c in controls))
    record["widgets"] = [measure(page, c, args.repeats, args.response_timeout, shots, Path(name).stem, log)
                         for c in controls]
    texts = page.evaluate("__jlc.outputTexts()")     # a callback's traceback shows only after a change
    record["tracebacks"] += [t for t in tracebacks(texts) if t not in record["tracebacks"]
                             and not any(t in e for e in record["errors"])]
    record["console_errors"] = console
    page.close()
    lab.shutdown_kernels()
    return record


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("notebooks", nargs="*", type=Path, help="notebooks to check (default: those with widgets)")
    p.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "jupyterlab_check",
                   help="folder for the screenshots and summary.json")
    p.add_argument("--repeats", type=int, default=3, help="changes per control (a button: one)")
    p.add_argument("--run-timeout", type=float, default=3600, help="seconds for Run All Cells, per notebook")
    p.add_argument("--response-timeout", type=float, default=120, help="seconds a change may take to show")
    p.add_argument("--chromium", default=CHROMIUM, help="the Chromium binary")
    p.add_argument("--full", action="store_true", help="the full mode (default: MOPD_FAST=1, the CI mode)")
    p.add_argument("--no-buttons", action="store_true", help="leave buttons alone (04's trains a fresh run)")
    p.add_argument("--keep", action="store_true", help="keep the temporary copy (runs, saved notebooks, log)")
    p.add_argument("--workdir", type=Path, help="use (and keep) this folder for the copy; its runs/ are reused")
    p.add_argument("--from-summary", type=Path, help="print the table and failures of a summary.json again, no browser")
    args = p.parse_args(argv)
    if args.from_summary:
        report = json.loads(args.from_summary.read_text())
        report["failures"], report["notes"] = failures(report), notes(report)
        return finish(report, args.from_summary)
    books = [b.resolve() for b in args.notebooks] or widget_notebooks(ROOT / "notebooks")
    missing = [str(b) for b in books if not b.is_file()]
    if missing or not books:
        raise SystemExit(f"no such notebook: {missing}" if missing else "no notebook with widgets found")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise SystemExit('Playwright is missing: pip install -e ".[browser]" (a system Chromium is used)') from None
    args.out.mkdir(parents=True, exist_ok=True)

    def log(msg):
        print(msg, flush=True)

    report = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": host_load(),
              "versions": versions(args.chromium), "mode": "full" if args.full else "ci (MOPD_FAST=1)",
              "repeats": args.repeats, "notebooks": []}
    log(f"versions: {report['versions']}")
    lab = Lab(books, full=args.full, keep=args.keep, workdir=args.workdir)
    log(f"JupyterLab at {lab.url} in {lab.dir}")
    try:
        with sync_playwright() as pw:
            profile = tempfile.mkdtemp(prefix="jupyterlab-check-chromium-")
            context = pw.chromium.launch_persistent_context(profile, executable_path=args.chromium,
                                                            headless=True, args=CHROMIUM_ARGS)
            try:
                for book in books:
                    report["notebooks"].append(check_notebook(context, lab, book.name, args, log))
                    (args.out / "summary.json").write_text(json.dumps(report, indent=1))
            finally:
                context.close()
                shutil.rmtree(profile, ignore_errors=True)
    finally:
        lab.close()
    report["failures"], report["notes"] = failures(report), notes(report)
    return finish(report, args.out / "summary.json")


def finish(report: dict, summary: Path) -> int:
    """Write the summary, print the table, the notes and the failures; the exit status."""
    summary.write_text(json.dumps(report, indent=1))
    print("\n" + table(report))
    print(f"\nscreenshots and summary.json in {summary.parent}")
    for n in report["notes"]:
        print(f"note {n}")
    for f in report["failures"]:
        print(f"FAIL {f}")
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
