"""Tests for the names of mopd_mini.evaluation: `mopd_mini.evaluate` is the function whatever was
imported first, and the module's old path `mopd_mini.evaluate` still gives its names, with a warning."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FIRST = {"the old module path": "import mopd_mini.evaluate",
         "a name from the old path": "from mopd_mini.evaluate import accuracy_by_length",
         "the module": "import mopd_mini.evaluation",
         "the function": "from mopd_mini import evaluate"}

CHECK = """
import types, warnings
import mopd_mini
assert isinstance(mopd_mini.evaluate, types.FunctionType), mopd_mini.evaluate
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from mopd_mini.evaluate import accuracy_by_length, TEACHER_OF
    import mopd_mini.evaluate
from mopd_mini import evaluation
assert accuracy_by_length is evaluation.accuracy_by_length and TEACHER_OF is evaluation.TEACHER_OF
assert [w.category for w in caught] == [DeprecationWarning] * 2, [str(w.message) for w in caught]
assert all("mopd_mini.evaluation" in str(w.message) for w in caught)
assert caught[0].filename == "<string>"  # the warning points at the import that used the old path
assert mopd_mini.evaluate is evaluation.evaluate and isinstance(mopd_mini.evaluate, types.FunctionType)
assert not hasattr(mopd_mini, "_Package") and type(mopd_mini) is types.ModuleType
print("ok")
"""


@pytest.mark.parametrize("first", list(FIRST))
def test_evaluate_is_the_function_and_the_old_path_warns(first):
    code = "import warnings\nwarnings.simplefilter('ignore')\n" + FIRST[first] + "\nwarnings.resetwarnings()\n" + CHECK
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
