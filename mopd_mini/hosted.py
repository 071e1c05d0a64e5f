"""Hosted notebooks (Colab, a JupyterHub): the "Open in Colab" badge and the setup cell.

Every numbered notebook opens with a badge in its first markdown cell and with SETUP_CELL as its
first code cell. The cell must run where mopd_mini is NOT installed yet, so it is plain code that
imports nothing from the package; its one copy is here, and

    python -m mopd_mini.hosted notebooks/[0-9][0-9]*_*.ipynb

writes it (and the badge) into notebooks, replacing an older copy; tests/test_hosted.py checks
that every numbered notebook holds exactly this text and runs the cell with pip mocked.

What the cell does, in order:
  1. mopd_mini imports: nothing is installed (a checkout after `make install`, a pip install).
  2. it does not, and the notebook sits in a checkout (a parent folder holds pyproject.toml and
     mopd_mini/): `pip install -e <checkout>` into the kernel's Python, and the checkout goes on
     sys.path for this kernel (an editable install is only seen by kernels started after it).
  3. it does not, anywhere else (Colab, a JupyterHub): `pip install $MOPD_MINI_REPO`, by default
     REPO_URL below (a pip requirement: `git+https://...`, a wheel's path or URL, or a folder).
     ipywidgets is added when it is missing (notebook 04's widgets).
  4. runs/ (and figures/) are written in the working folder, as in the checkout; where that
     folder is read-only (a course folder shared on a JupyterHub) the notebook moves to
     ~/mopd_mini_course/ first. It prints where runs/ is.

The repository has no public address yet: REPO_URL and the badge's GITHUB are placeholders that
whoever publishes it sets once here (and re-stamps the notebooks with the command above); until
then set MOPD_MINI_REPO in the hosted environment, or upload a wheel and point MOPD_MINI_REPO at it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

GITHUB = "OWNER/mopd_mini"
"""the GitHub repository the badges open notebooks from (owner/name): a placeholder until published"""
BRANCH = "main"
REPO_URL = f"git+https://github.com/{GITHUB}.git"
"""what the setup cell installs when MOPD_MINI_REPO is not set"""
MARKER = "# Setup (run first)"
"""how the setup cell is recognised when it is replaced"""

SETUP_CELL = MARKER + '''. It makes this notebook work wherever it is opened: where mopd_mini
# imports already (this checkout after `make install`) it installs nothing. Otherwise it installs
# it, from the checkout this notebook sits in if there is one, else from MOPD_MINI_REPO (Colab, a
# JupyterHub). Then it makes sure runs/ can be written (see mopd_mini/hosted.py).
import importlib, importlib.util, os, site, subprocess, sys
from pathlib import Path


def setup_mopd_mini(repo=os.environ.get("MOPD_MINI_REPO", "@REPO_URL@")):
    here = Path.cwd()
    if importlib.util.find_spec("mopd_mini") is None:
        checkout = next((p for p in (here, *here.parents)
                         if (p / "pyproject.toml").is_file() and (p / "mopd_mini" / "__init__.py").is_file()), None)
        source = ["-e", str(checkout)] if checkout else [repo]
        widgets = [] if importlib.util.find_spec("ipywidgets") else ["ipywidgets"]
        print("installing mopd_mini from", checkout or repo, "...")
        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", *source, *widgets])
        if checkout:
            sys.path.insert(0, str(checkout))  # an editable install is seen by new kernels; this one needs the path
        if site.ENABLE_USER_SITE and site.getusersitepackages() not in sys.path:
            site.addsitedir(site.getusersitepackages())  # where pip puts a --user install
        importlib.invalidate_caches()
    if not os.access(here, os.W_OK):  # e.g. a read-only course folder on a JupyterHub
        work = Path.home() / "mopd_mini_course"
        work.mkdir(exist_ok=True)
        os.chdir(work)
        print(f"{here} is read-only: working in {work}")
    Path("runs").mkdir(exist_ok=True)
    return Path("runs").resolve()


print("runs/ is", setup_mopd_mini())'''.replace("@REPO_URL@", REPO_URL)


def badge(notebook_name: str) -> str:
    """The markdown of the "Open in Colab" badge for notebooks/<notebook_name>."""
    url = f"https://colab.research.google.com/github/{GITHUB}/blob/{BRANCH}/notebooks/{notebook_name}"
    return f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({url})"


BADGE_START = "[![Open In Colab]"


def stamp(nb: dict, notebook_name: str) -> dict:
    """`nb` (notebook JSON) with the badge under its first markdown cell's title line and the
    setup cell as its first code cell; an older badge or setup cell is replaced, not duplicated."""
    cells = nb["cells"]
    first_md = next(c for c in cells if c["cell_type"] == "markdown")
    lines = _source(first_md).split("\n")               # title, "", (badge, "",) the rest
    if len(lines) > 2 and lines[2].startswith(BADGE_START):
        del lines[1:3]
    first_md["source"] = "\n".join([lines[0], "", badge(notebook_name), *lines[1:]])
    code = [c for c in cells if c["cell_type"] == "code"]
    cell = {"id": "setup", "cell_type": "code", "metadata": {}, "execution_count": None,
            "source": SETUP_CELL, "outputs": []}
    if code and _source(code[0]).startswith(MARKER):
        code[0].update(source=SETUP_CELL, outputs=[], execution_count=None)
    else:
        cells.insert(cells.index(code[0]) if code else len(cells), cell)
    return nb


def _source(cell) -> str:
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


def main(argv=None) -> None:
    paths = [Path(p) for p in (sys.argv[1:] if argv is None else argv)]
    if not paths:
        raise SystemExit("usage: python -m mopd_mini.hosted notebooks/01_factworld.ipynb [...]")
    for path in paths:
        nb = stamp(json.loads(path.read_text(encoding="utf-8")), path.name)
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print("stamped", path)


if __name__ == "__main__":
    main()
