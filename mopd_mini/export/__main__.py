"""`python -m mopd_mini.export`: the export's command line (mopd_mini.export.command.main)."""

import sys

from ..cli.interrupt import run_main
from .command import interrupted, main

if __name__ == "__main__":
    sys.exit(run_main(main, sys.argv[1:], "python -m mopd_mini.export", interrupted))
