"""Moved: the learning-results study is studies/results.py (`python -m studies.results`). This alias
keeps `python -m bench.results`, the command docs/results.md and the guides quote, working."""

from studies.results import main  # noqa: F401

if __name__ == "__main__":
    raise SystemExit(main(prog="python -m bench.results"))
