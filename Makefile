# The whole set-up is two commands (see README.md):
#   make course   create .venv, install, execute every notebook into build/notebooks/
#   make test     the whole test suite, notebooks included (what CI runs)
#
# PY=python make ...   uses the active environment instead of .venv (e.g. a conda env from
# environment.yml, or one that already holds a CUDA build of torch, which is then kept).

VENV    ?= .venv
PY      ?= $(VENV)/bin/python
TORCH   ?= torch==2.13.0
CPU_IDX ?= https://download.pytorch.org/whl/cpu
STAMP   := build/.installed-$(subst /,_,$(PY))

.PHONY: install course lab test check-package check-verl test-fast pretrain bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@if [ "$(PY)" = "$(VENV)/bin/python" ] && [ ! -x "$(PY)" ]; then python3 -m venv $(VENV); fi
	@if $(PY) -c "import torch" 2>/dev/null; then \
	    echo "torch $$($(PY) -c 'import torch; print(torch.__version__)') is installed: kept"; \
	elif command -v nvidia-smi >/dev/null 2>&1; then \
	    echo "NVIDIA GPU found: installing the default (CUDA) build of torch"; \
	    $(PY) -m pip install torch; \
	else \
	    echo "no GPU: installing the CPU build of torch (no multi-GB CUDA download)"; \
	    $(PY) -m pip install "$(TORCH)" --index-url $(CPU_IDX); \
	fi
	$(PY) -m pip install -e ".[dev]"
	@mkdir -p build && touch $@

# Execute every notebook top to bottom on the tiny default; executed copies go to build/notebooks/.
course: install
	$(PY) -m mopd_mini.course --out build/notebooks

# JupyterLab on notebooks/, from the project's environment (the widgets of notebook 04 work there:
# jupyterlab and ipywidgets come with the notebooks extra). Run the cells top to bottom, turn the widgets.
# As root (a container), Jupyter needs --allow-root: added then.
lab: install
	$(PY) -m jupyter lab --notebook-dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root)

# Unit tests, short end-to-end runs, kill-and-resume, notebook re-runs (on 2 workers); then every
# notebook top to bottom with nbmake, in order (02 trains the teachers that 03 and 04 reload),
# all in the CI mode (MOPD_FAST=1: fewer steps, same code paths). `-p mopd_mini.course` gives
# nbmake the course's HeadlessClient (nbmake has no option for a client): a cell whose kernel stops
# answering fails, named, in 30-60 s, one that computes too long after 1200 s (nbmake's timeout is
# per cell: course.CELL_TIMEOUT), instead of a widget cell stalling for the whole timeout.
test: install check-verl
	MOPD_FAST=1 $(PY) -m pytest -n 2 tests
	MOPD_FAST=1 $(PY) -m pytest -p mopd_mini.course --nbmake --nbmake-timeout=1200 notebooks
	$(MAKE) --no-print-directory check-package PY=$(PY)

# The built package works outside the checkout: a wheel installed (not editable) in a fresh venv,
# from a temporary folder: the shipped tiny base, a few trainer steps, notebook 01 (about 1 minute).
check-package: install
	$(PY) tests/package_check.py

# verl's own loader judges the verl export (docs/scale_out.md): a few-step tiny run, exported with
# `python -m mopd_mini.export verl`, then loaded by verl 0.9.1 in its own venv (.venv-verl: verl pins
# another transformers than the course), which must also reject two deliberately broken exports.
VERL_VENV ?= .venv-verl
VERL_STAMP := $(VERL_VENV)/.installed

$(VERL_STAMP): tools/verl-requirements.txt
	@[ -x "$(VERL_VENV)/bin/python" ] || python3 -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/pip install -q --no-deps verl==0.9.1
	$(VERL_VENV)/bin/pip install -q -r tools/verl-requirements.txt
	@touch $@

check-verl: install $(VERL_STAMP)
	$(PY) -m tools.verl_export_tiny --out build/verl_export --work build/verl_tiny_run
	$(VERL_VENV)/bin/python tools/check_verl.py build/verl_export

# The stage-1 pretraining of the shipped tiny base (about 3 CPU minutes; the course never needs it).
pretrain: install
	$(PY) -m mopd_mini.pretrain

bench: install
	$(PY) -m tools.run_all

clean:
	rm -rf build runs notebooks/runs .pytest_cache
