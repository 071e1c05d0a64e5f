"""The course's learning results on the tiny default: teachers vs base, and the MOPD student for
each loss form and seed. Trains the runs (runs/results/; a re-run reloads finished ones), then
rewrites docs/results.md and its figures (mopd_mini.results_page, which `mopd-mini results` runs on
the finished runs alone).

    python -m studies.results                        # 2 teachers + 3 losses x 3 seeds (~25 min, 2-core CPU)
    python -m studies.results --seeds 0 --losses pg  # a quick look
    mopd-mini results ...                            # the page alone, from the finished runs

Every number on the page is from this script.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from mopd_mini import results_page  # noqa: E402


def main(argv=None, prog: str = "python -m studies.results") -> int:
    return results_page.main(argv, prog=prog, train=True)


if __name__ == "__main__":
    raise SystemExit(main())
