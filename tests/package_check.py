"""The installed package works outside the checkout: build a wheel, install it (not editable) into
a fresh virtual environment, and from a folder outside the checkout load the shipped tiny base,
run a few steps of each trainer, and execute notebook 01 against the installed package.

    python tests/package_check.py          # what `make check-package` (and so `make test`) runs
    python tests/package_check.py --keep   # leave the temporary folder for a look

Why a script and not a pytest test: it builds a wheel and an environment (a minute), and it must
run with no PYTHONPATH and no checkout on sys.path, which pytest's `pythonpath = ["."]` and the
editable install would both defeat.

How it stays quick and still proves the point:
  * the wheel is built from a copy of the files git would ship (tracked, or new and not ignored),
    so an ignored or forgotten file (say, the tiny base's weights) fails here as in a fresh clone;
  * the fresh environment gets mopd_mini and factworld from the wheel and nothing else; their
    third-party dependencies (torch, transformers, jupyter...) are reused from the environment
    running this script through a `.pth` file listing its site-packages folders (a folder named in
    a .pth is only put on sys.path: the .pth files inside it, such as the editable install's import
    hook, are NOT run, so the checkout's mopd_mini cannot come in that way);
  * every check asserts that `mopd_mini.__file__` and `factworld.__file__` lie in the fresh
    environment's site-packages, and that the wheel's declared dependencies are satisfied.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Run inside the fresh environment, from a folder outside the checkout.
SMOKE = r'''
import importlib.metadata as md, json, os, sys, time
from pathlib import Path
site = Path(sys.argv[1]).resolve()
checkout = Path(sys.argv[2]).resolve()

import factworld, mopd_mini
for module in (mopd_mini, factworld):
    where = Path(module.__file__).resolve()
    assert site in where.parents, f"{module.__name__} imported from {where}, not from the fresh environment {site}"
    assert checkout not in where.parents, f"{module.__name__} imported from the checkout: {where}"
print(f"mopd_mini {md.version('mopd_mini')} imported from {Path(mopd_mini.__file__).parent}")

# the wheel's declared dependencies are all satisfied (extras aside)
from packaging.requirements import Requirement
missing = []
for line in md.requires("mopd_mini") or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    try:
        if not req.specifier.contains(md.version(req.name), prereleases=True):
            missing.append(f"{req} (found {md.version(req.name)})")
    except md.PackageNotFoundError:
        missing.append(f"{req} (not installed)")
assert not missing, f"unsatisfied dependencies of the wheel: {missing}"

import torch
torch.set_num_threads(1)
from mopd_mini import AdapterBank, GRPOConfig, MOPDConfig, load_base, train_grpo, train_student
from mopd_mini.models import TINY_DIR

assert site in TINY_DIR.resolve().parents
shipped = sorted(p.name for p in TINY_DIR.iterdir())
print("package data shipped:", ", ".join(shipped))
from mopd_mini import evidence, lab   # the widgets' data: the loss lab's grid and the studies' view (05b-07)
assert site in evidence.VIEW_PATH.resolve().parents and site in lab.GRID_PATH.resolve().parents
assert evidence.matched_pick(evidence.load_view(), 400, "mopd_pg")["picked"]["n"] and lab.load_grid()["cells"]
start = time.time()
model, tokenizer = load_base("tiny", device="cpu")
print(f"tiny base: {sum(p.numel() for p in model.parameters()):,} parameters, vocabulary {len(tokenizer)}")
bank = AdapterBank(model, tokenizer)
for domain in ("binding", "recall"):
    run = train_grpo(bank, GRPOConfig(domain=domain, steps=2, prompts_per_step=4, group_size=4, eval_every=0,
                                      experiment=None, progress=False))
    print(f"train_grpo({domain}): {len(run.metrics)} steps, reward {run.metrics[-1]['reward']:.2f}")
run = train_student(bank, MOPDConfig(steps=2, prompts_per_domain=2, eval_every=2, eval_n=4, track_steps=(1,),
                                     track_prompts=1, experiment=None, progress=False))
last = run.metrics[-1]
print(f"train_student(pg): {len(run.metrics)} steps, exact KL to the teachers: binding {last['kl/binding']:.2e}, "
      f"recall {last['kl/recall']:.2e}")
print(f"trainers: {time.time() - start:.1f} s")
'''

# Run inside the fresh environment: the notebook's kernel is that environment's python.
NOTEBOOK = r'''
import sys, time
from pathlib import Path
import nbformat
from nbclient import NotebookClient
from mopd_mini.course import local_kernel_config

book, site = Path(sys.argv[1]), sys.argv[2]
nb = nbformat.read(book, as_version=4)
probe = ("import sys, mopd_mini, factworld\nfrom pathlib import Path\n"
         f"site = Path({site!r}).resolve()\n"
         "assert site in Path(mopd_mini.__file__).resolve().parents, mopd_mini.__file__\n"
         "assert site in Path(factworld.__file__).resolve().parents, factworld.__file__\n"
         "print('kernel:', sys.executable, '| mopd_mini from', Path(mopd_mini.__file__).parent)")
nb.cells.append(nbformat.v4.new_code_cell(probe))
start = time.time()
with local_kernel_config() as config:
    NotebookClient(nb, timeout=1200, kernel_name="python3", config=config,
                   resources={"metadata": {"path": str(book.parent)}}).execute()
print(f"{book.name} executed in {time.time() - start:.0f} s ({len(nb.cells) - 1} cells + the probe)")
print("".join(o.get("text", "") for o in nb.cells[-1].outputs).strip())
'''


def shipped_files(root: Path) -> list[str]:
    """The files a commit of the working tree would hold: tracked ones, plus new ones git does not
    ignore (so the check tests uncommitted work too, and never an ignored file)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                             check=True, capture_output=True).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        sys.exit("package check: needs a git checkout (it builds from the files git would ship)")
    return sorted({p for p in out.split("\0") if p and (root / p).is_file()})


def run(cmd, **kw):
    shown = ["<script>" if "\n" in str(c) else str(c) for c in cmd]
    print("$", " ".join(shown), flush=True)
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


def site_packages_of(python) -> dict:
    code = "import json, site, sys, sysconfig; p = sysconfig.get_paths(); " \
           "print(json.dumps({'purelib': p['purelib'], 'platlib': p['platlib'], 'path': sys.path}))"
    return json.loads(subprocess.run([str(python), "-E", "-c", code], check=True, capture_output=True,
                                     text=True, cwd=tempfile.gettempdir()).stdout)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--keep", action="store_true", help="keep the temporary folder")
    p.add_argument("--notebook", default="01_factworld.ipynb", help="the notebook to execute (from notebooks/)")
    args = p.parse_args(argv)
    t0 = time.time()
    tmp = Path(tempfile.mkdtemp(prefix="mopd-package-check-"))
    assert ROOT not in tmp.resolve().parents
    try:
        # 1. a wheel, from a copy of what git would ship
        src = tmp / "src"
        for rel in shipped_files(ROOT):
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
        try:
            import setuptools  # noqa: F401  (present: build offline with it, no isolated build env)
            isolation = ["--no-build-isolation"]
        except ImportError:
            isolation = []
        run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *isolation, "-w", tmp / "dist", src])
        wheel = next((tmp / "dist").glob("mopd_mini-*.whl"))
        print(f"built {wheel.name} ({wheel.stat().st_size / 2**20:.1f} MB) in {time.time() - t0:.0f} s")

        # 2. a fresh environment holding the wheel, not editable; dependencies reused (see the docstring)
        venv = tmp / "venv"
        run([sys.executable, "-m", "venv", "--without-pip", venv])
        python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
        fresh = site_packages_of(python)
        run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index",
             "--ignore-installed", wheel])
        ours = site_packages_of(sys.executable)
        # (a site-packages folder may sit inside the checkout: `make` keeps its .venv there; the
        # editable install's hook in it stays inactive, and the smoke asserts where mopd_mini comes from)
        reuse = [d for d in ours["path"] if d and Path(d).is_dir() and ("site-packages" in d or "dist-packages" in d)
                 and Path(d).resolve() != ROOT and d not in (fresh["purelib"], fresh["platlib"])]
        if not reuse:
            raise SystemExit(f"found no site-packages folder to take the dependencies from in {sys.executable}'s "
                             f"sys.path: {ours['path']}")
        (Path(fresh["purelib"]) / "_mopd_package_check_deps.pth").write_text("\n".join(reuse) + "\n")
        print(f"fresh environment {venv}: mopd_mini from the wheel; dependencies from {', '.join(reuse)}")

        # 3. from a folder outside the checkout, with nothing pointing back at it
        work = tmp / "work"
        (work / "notebooks").mkdir(parents=True)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
        env.update(HF_HUB_OFFLINE="1", MOPD_FAST="1", OMP_NUM_THREADS="1", PYTHONNOUSERSITE="1",
                   VIRTUAL_ENV=str(venv), PATH=f"{python.parent}{os.pathsep}{env.get('PATH', '')}")
        t1 = time.time()
        run([python, "-c", SMOKE, fresh["purelib"], ROOT], cwd=work, env=env)
        t2 = time.time()
        book = work / "notebooks" / args.notebook
        shutil.copy(ROOT / "notebooks" / args.notebook, book)
        run([python, "-c", NOTEBOOK, book, fresh["purelib"]], cwd=work, env=env)
        t3 = time.time()
        print(f"\npackage check passed in {t3 - t0:.0f} s (wheel + environment {t1 - t0:.0f} s, "
              f"library {t2 - t1:.0f} s, notebook {t3 - t2:.0f} s)")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
