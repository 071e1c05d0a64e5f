"""Tests for mopd_mini.config: the trainers' configs import without torch (so `mopd-mini <command>
--help` stays fast), the classes' one public path is mopd_mini.config (and mopd_mini) while their old
paths in the trainer modules warn for one release, the modules re-export the same constants, and the
CI mode (MOPD_FAST=1) halves the presets' steps and moves their runs to runs/<experiment>-fast/."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mopd_mini import config

ROOT = Path(__file__).resolve().parents[1]


def run(code: str, **env) -> str:
    """Run `code` in a fresh interpreter on this checkout; its stdout."""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **env})
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_configs_import_and_check_without_torch():
    """Importing mopd_mini.config, building every config's tiny preset and checking it loads no torch."""
    out = run("import sys, mopd_mini.config as c\n"
              "for cls in (c.MOPDConfig, c.GRPOConfig, c.OfflineConfig): cls.for_model('tiny').check()\n"
              "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    assert out.strip() == "[]"


@pytest.mark.parametrize("module, names", [
    ("distill", ("LOSSES", "FORMS", "PREFIXES")),
    ("offline", ("KEEP",)),
    ("runs", ("FAST", "fast_or", "experiment_name", "check_experiment", "check_loop", "preset")),
])
def test_the_trainer_modules_re_export_the_same_objects(module, names):
    import importlib
    mod = importlib.import_module(f"mopd_mini.{module}")
    for name in names:
        assert getattr(mod, name) is getattr(config, name), f"mopd_mini.{module}.{name}"


@pytest.mark.parametrize("module, names", [
    ("distill", ("MOPDConfig", "GoldenGain", "Endorsement")),
    ("grpo", ("GRPOConfig",)),
    ("offline", ("OfflineConfig",)),
    ("ucmopd", ("GoldenGain", "Endorsement")),
])
def test_the_config_classes_old_paths_warn_and_give_the_same_class(module, names):
    """One public path per class (mopd_mini.config, and the package); the old one warns for a release."""
    import importlib
    import mopd_mini
    mod = importlib.import_module(f"mopd_mini.{module}")
    for name in names:
        with pytest.warns(DeprecationWarning, match=f"importing {name} from mopd_mini.{module} is deprecated"):
            assert getattr(mod, name) is getattr(config, name), f"mopd_mini.{module}.{name}"
        if name in mopd_mini.__all__:
            assert getattr(mopd_mini, name) is getattr(config, name)
    with pytest.raises(AttributeError, match="has no attribute 'Nothing'"):
        mod.Nothing


def test_the_ci_mode_halves_the_steps_and_moves_the_runs():
    """Under MOPD_FAST=1 each tiny preset has half the steps (at least 1), at most 32 evaluation
    examples, and its experiment gets `-fast`; without it the preset is the class defaults."""
    code = ("import json, dataclasses, mopd_mini.config as c\n"
            "print(json.dumps({cls.__name__: [dataclasses.asdict(cls()), dataclasses.asdict(cls.for_model('tiny')),"
            " c.fast_or(10, 2), c.experiment_name('x')] for cls in (c.MOPDConfig, c.GRPOConfig, c.OfflineConfig)}))")
    full, fast = json.loads(run(code, MOPD_FAST="")), json.loads(run(code, MOPD_FAST="1"))
    for name in full:
        defaults, preset, ten, x = full[name]
        assert preset == defaults and (ten, x) == (10, "x")
        defaults, preset, two, x_fast = fast[name]
        assert preset["steps"] == max(1, defaults["steps"] // 2) < defaults["steps"]
        assert preset["eval_n"] == min(defaults["eval_n"], 32)
        assert preset["experiment"] == defaults["experiment"] + "-fast"
        assert {k: v for k, v in preset.items() if k not in ("steps", "eval_n", "experiment")} == \
            {k: v for k, v in defaults.items() if k not in ("steps", "eval_n", "experiment")}
        assert (two, x_fast) == (2, "x-fast")
