"""Tools: what checks, runs or renders the project, neither a benchmark nor a study.

    provenance        the machine, the command that reproduces a run, worker processes, a page's
                      pre-registered text: what the benchmarks, the studies and the tools share
    run_all           every CPU benchmark in order; rewrites docs/benchmarks.md (`make bench`)
    findings          the pages' marked finding sentences, checked against (or rendered from) their JSON
    bad_inputs        every bad input we know of fed to the course; what each one says
    notebook_soak     one notebook executed many times, headless, while training competes for the cores
    verl_export_tiny  a few-step tiny course run exported for verl (what `make check-verl` runs first)
    check_verl        verl's own loader judges that export (run with .venv-verl's Python)
    course_data       the evidence pickers' package data (mopd_mini/data/evidence.json) from docs/*.json
    jupyterlab_check  the course's widgets driven in a real JupyterLab in Chromium (Playwright; not CI)
    house             the house's figures: files per folder, longest files, import circles, concept look-ups

verl-requirements.txt pins what `make check-verl` installs into .venv-verl beside verl.
Each runs alone (`python -m tools.<name>`; check_verl as `python tools/check_verl.py`).
"""
