"""The names a release renamed (so that one word means one thing) still work for one release through
`mopd_mini.deprecation.old_names`: the old name warns, naming the new one, and gives the new object."""

import importlib

import pytest

RENAMED = [
    ("mopd_mini.routing", "merged_weights", "mopd_mini.routing", "folded_weights"),
    ("mopd_mini.routing", "MERGED_LIMIT", "mopd_mini.routing", "FOLDED_LIMIT"),
    ("mopd_mini.routing", "score", "mopd_mini.routing", "teacher_outputs"),
    ("mopd_mini.routing", "TeacherScores", "mopd_mini.routing", "TeacherOutputs"),
    ("mopd_mini.grpo", "train_teacher", "mopd_mini.grpo", "train_grpo"),
    ("mopd_mini", "train_teacher", "mopd_mini.grpo", "train_grpo"),
    ("mopd_mini.export", "merge_teacher", "mopd_mini.export.fold", "fold_teacher"),
    ("mopd_mini.export.fold", "merge_teacher", "mopd_mini.export.fold", "fold_teacher"),
    ("mopd_mini.export", "MERGE_TOLERANCE", "mopd_mini.export.fold", "FOLD_TOLERANCE"),
    ("mopd_mini.export.fold", "MERGE_TOLERANCE", "mopd_mini.export.fold", "FOLD_TOLERANCE"),
]


@pytest.mark.parametrize("module, old, home, new", RENAMED)
def test_an_old_name_warns_and_gives_the_new_object(module, old, home, new):
    mod = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=f"importing {old} from {module} is deprecated.*use {home}.{new}"):
        got = getattr(mod, old)
    assert got is getattr(importlib.import_module(home), new)
    assert old not in vars(mod)          # only the deprecation path gives it


@pytest.mark.parametrize("module", sorted({m for m, *_ in RENAMED}))
def test_a_name_never_defined_is_still_an_attribute_error(module):
    with pytest.raises(AttributeError, match=f"module '{module}' has no attribute 'Nothing'"):
        importlib.import_module(module).Nothing


def test_the_package_still_gives_the_new_names_without_a_warning():
    import warnings
    import mopd_mini
    from mopd_mini import grpo
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert mopd_mini.train_grpo is grpo.train_grpo and "train_grpo" in mopd_mini.__all__
