"""The old name of mopd_mini.routing (routed teacher scoring), kept for one release.

`import mopd_mini.teachers` (or `from mopd_mini import teachers`) warns once and gives the module
mopd_mini.routing itself: the same objects, and a patch of an attribute on one is seen by the other.
"""

import sys
import warnings

from . import routing

# stacklevel 2: the line that imported this module (warnings skips the import system's own frames)
warnings.warn("mopd_mini.teachers is deprecated and will be removed in the next release: routed teacher "
              "scoring lives in mopd_mini.routing", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = routing
