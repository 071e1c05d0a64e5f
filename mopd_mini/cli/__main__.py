"""python -m mopd_mini.cli ...: the same command line as the `mopd-mini` console script."""

import sys

from . import main

sys.exit(main())
