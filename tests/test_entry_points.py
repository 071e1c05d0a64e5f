"""Every public entry point validated by its types: the configs' validator
(mopd_mini.validate) guards the library's public functions from their own annotations, at the call
from outside the package; the nucleus keeps its most likely token at any top_p; an option the chosen
loss ignores is refused, naming both; and the command line creates nothing before its checks pass,
reloads a finished run from a read-only folder, and answers Ctrl-C with one line."""

import dataclasses
import inspect
import json
import os
import tempfile
import types
from pathlib import Path

import numpy as np
import pytest
import torch

import factworld
import mopd_mini
from mopd_mini import ablation_runs, evidence, merge, plots, routing, starting_points, views
from mopd_mini import (GRPOConfig, MOPDConfig, cli, cost, evaluate, generate_answers, get_domains, lab, load_base,
                       losses, runs, sample, train_student, widgets)
from mopd_mini.adapters import AdapterBank, LoraSettings
from mopd_mini.domains import Domain
from mopd_mini.rollout import Rollout, nucleus
from mopd_mini.config import GoldenGain
from mopd_mini.validate import check_call, guard_public, guarded, is_guarded

ROOT = Path(__file__).resolve().parents[1]

# ------------------------------------------------------------------------ the mechanism covers them all


def public_functions(module) -> dict:
    """The public functions a module defines (not those it imports), and its public classes' methods."""
    found = {}
    for name, obj in vars(module).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(obj):
            found[f"{module.__name__}.{name}"] = obj
        elif inspect.isclass(obj) and not dataclasses.is_dataclass(obj):
            found.update({f"{module.__name__}.{name}.{m}": f for m, f in vars(obj).items()
                          if (not m.startswith("_") or m == "__init__") and inspect.isfunction(f)})
    return found


def entry_points() -> dict:
    """What the issue names: the functions of mopd_mini.__all__ (and the public functions of the
    modules it names, losses and cost), AdapterBank's and Domain's methods, and the public
    functions of widgets and lab."""
    found = {}
    for name in mopd_mini.__all__:
        obj = getattr(mopd_mini, name)
        if isinstance(obj, types.ModuleType):
            found.update(public_functions(obj))
        elif inspect.isfunction(obj):
            found[name] = obj
    for cls in (AdapterBank, Domain):
        found.update({f"{cls.__name__}.{m}": f for m, f in vars(cls).items() if inspect.isfunction(f)
                      and (not m.startswith("_") or (m == "__init__" and not dataclasses.is_dataclass(cls)))})
    found.update(public_functions(lab))
    found.update(public_functions(widgets))
    return found


def test_every_public_entry_point_is_guarded():
    points = entry_points()
    assert len(points) > 100 and {"train_student", "sample", "AdapterBank.load", "AdapterBank.__init__",
                                  "mopd_mini.lab.stuck_gradients",
                                 "mopd_mini.widgets.loss_lab", "mopd_mini.losses.pg_loss"} <= set(points)
    assert [name for name, fn in points.items() if not is_guarded(fn)] == []


def course_modules() -> set[str]:
    """The package's modules the course calls: those `mopd_mini.__all__` names, lab and widgets, and
    every mopd_mini module a notebook imports (`from mopd_mini import plots`, `from mopd_mini.merge
    import ...`, `mopd_mini.runs.fast_or`), read from the notebooks themselves: a module a notebook
    starts to use is in the list without an edit here."""
    import re

    names = {"lab", "widgets"} | {n for n in mopd_mini.__all__ if isinstance(getattr(mopd_mini, n), types.ModuleType)}
    for book in sorted((ROOT / "notebooks").rglob("*.ipynb")):
        for cell in json.loads(book.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            src = "".join(cell["source"])
            names |= set(re.findall(r"from mopd_mini\.(\w+) import", src)) | set(re.findall(r"mopd_mini\.(\w+)\.", src))
            for line in re.findall(r"from mopd_mini import ([^\n]+)", src):
                names |= {n for n in re.split(r"[\s,()]+", line) if n and n.islower()
                          and isinstance(getattr(mopd_mini, n, None) or _submodule(n), types.ModuleType)}
    return names


def _submodule(name: str):
    import importlib

    try:
        return importlib.import_module(f"mopd_mini.{name}")
    except ImportError:
        return None


def test_the_course_modules_are_read_from_the_notebooks():
    assert {"routing", "merge", "plots", "exercises", "views", "evidence", "starting_points", "runs", "ablation_runs", "lab",
            "widgets", "losses", "cost", "rollout", "offline"} <= course_modules()


@pytest.mark.parametrize("name", sorted(course_modules()))
def test_every_public_function_of_a_module_the_course_uses_is_guarded(name):
    """Every public function (and method of a public class that is not a dataclass) that the module
    defines: a function added to it later without the guard fails here."""
    found = public_functions(_submodule(name))
    assert found and [f for f, fn in found.items() if not is_guarded(fn)] == []


def test_the_documented_list_names_every_guarded_module():
    """docs/reliability.md lists the entry points the validator covers."""
    text = (ROOT / "docs" / "reliability.md").read_text()
    for name in ("train_student", "train_grpo", "train_offline", "collect", "sample", "generate_answers",
                 "evaluate", "load_base", "get_domains", "AdapterBank", "Domain", "lab", "widgets", "losses",
                 "cost", "--domain", "--domains", "--adapters", "--density"):
        assert f"`{name}" in text, name


# ------------------------------------------------------------------------ the same rules at each of them

@pytest.fixture(scope="module")
def examples():
    return factworld.generate("binding", "test", n=2, length=8)


def cases(tiny, examples):
    model, tok = tiny
    z = torch.zeros(1, 2, 4)
    mask = torch.ones(1, 2)
    bank = object.__new__(AdapterBank)   # no base needed: the check comes before the method's body
    rollout = object.__new__(Rollout)    # likewise (a Rollout of tensors: checked as an instance only)
    return [
        (lambda: sample(model, tok, examples, top_p="0.9"), r"rollout.sample: top_p='0.9' is not a finite float"),
        (lambda: sample(model, tok, examples, max_new_tokens=4.0), r"rollout.sample: max_new_tokens=4.0 is not an int"),
        (lambda: sample(model, tok, examples, temperature=float("nan")), r"temperature=nan is not a finite float"),
        (lambda: generate_answers(model, tok, "one prompt"),
         r"generate_answers: prompts='one prompt' is not a list .*; for one item give a tuple: prompts=\('one prompt',\)"),
        (lambda: train_student(None, {"loss": "kl"}), r"distill.train_student: cfg=\{'loss': 'kl'\} is not an instance of MOPDConfig"),
        (lambda: mopd_mini.train_grpo(None, MOPDConfig()), r"grpo.train_grpo: cfg=MOPDConfig\(.*is not an instance of GRPOConfig"),
        (lambda: evaluate(None, ["base"], n=2.0), r"evaluation.evaluate: n=2.0 is not an int"),
        (lambda: evaluate(None, ["base"], split=1), r"evaluation.evaluate: split=1 is not a str"),
        (lambda: get_domains(5), r"domains.get_domains: names=5 is not a str or a tuple"),
        (lambda: load_base(3), r"models.load_base: name=3 is not a str"),
        (lambda: load_base("tiny", quantize=True), r"models.load_base: quantize=True is not a str or None"),
        (lambda: bank.create("x", seed=1.5), r"AdapterBank.create: seed=1.5 is not an int"),
        (lambda: bank.create("x", lora=LoraSettings(r=16.0)), r"LoraSettings.r=16.0 is not an int"),
        (lambda: bank.create("x", lora={"r": 8}), r"AdapterBank.create: lora=\{'r': 8\} is not an instance of LoraSettings"),
        (lambda: bank.use(3), r"AdapterBank.use: name=3 is not a str"),
        (lambda: AdapterBank(model, tok, lora={"r": 8}), r"AdapterBank.__init__: lora=\{'r': 8\} is not an instance of LoraSettings"),
        (lambda: bank.load("x", "/nowhere", allow_foreign="yes"), r"AdapterBank.load: allow_foreign='yes' is not a bool"),
        (lambda: get_domains("binding")["binding"].test_examples("16", 2), r"Domain.test_examples: length='16' is not an int"),
        (lambda: Domain("binding", train_lengths=(8.0,), eval_lengths=(16,)), r"Domain.train_lengths=\(8.0,\) is not a tuple"),
        (lambda: lab.stuck_gradients("0.9"), r"lab.stuck_gradients: p_wrong='0.9' is not a finite float"),
        (lambda: lab.stuck_gradients(0.9, beta=float("inf")), r"lab.stuck_gradients: beta=inf is not a finite float"),
        (lambda: lab.categorical_gradients(z[0, 0], z[0, 0], k=3.0), r"lab.categorical_gradients: k=3.0 is not an int"),
        (lambda: lab.categorical_gradients(z[0, 0], z[0, 0], correction=1), r"correction=1 is not a bool"),
        (lambda: lab.short_run(None, steps="60"), r"lab.short_run: steps='60' is not an int"),
        (lambda: lab.window_means([{"kl": 1.0}], frac=True), r"lab.window_means: frac=True is not a finite float"),
        (lambda: lab.grid_cell({"cells": []}, "pg", clip="5"), r"lab.grid_cell: clip='5' is not a finite float .* or None"),
        (lambda: lab.trace_view("trace", 1), r"lab.trace_view: trace='trace' is not a list"),
        (lambda: widgets.stuck_slider(beta="0.5"), r"widgets.stuck_slider: beta='0.5' is not a finite float"),
        (lambda: widgets.loss_lab(None, [], steps=10), r"widgets.loss_lab: history=\[\] is not a dict"),
        (lambda: widgets.time_redraws(repeats=2.5), r"widgets.time_redraws: repeats=2.5 is not an int"),
        (lambda: widgets.Picker.timings(None, [{}], repeats="3"), r"widgets.Picker.timings: repeats='3' is not an int"),
        (lambda: losses.pg_loss(z[..., 0], z[..., 0], mask, clip="5"), r"losses.pg_loss: clip='5' is not a finite float"),
        (lambda: losses.jsd_loss(z, z, mask, beta=float("nan")), r"losses.jsd_loss: beta=nan is not a finite float"),
        (lambda: losses.topk_reverse_kl(z, z.long(), z, mask, support="no"), r"support='no' is not a bool"),
        (lambda: cost.flops({}, N=1.5, n=2), r"cost.flops: N=1.5 is not an int"),
        # the modules the notebooks import (course_modules): routing, merge, plots, views, evidence, starting_points, ...
        (lambda: routing.teacher_outputs(bank, rollout, {"binding": "teacher_binding"}, k="8"), r"routing.teacher_outputs: k='8' is not an int"),
        (lambda: routing.teacher_outputs(bank, rollout, "teacher_binding"), r"routing.teacher_outputs: route='teacher_binding' is not a dict"),
        (lambda: merge.merge(bank, "m", {"teacher_binding": 1.0}, how=3), r"merge.merge: how=3 is not a str"),
        (lambda: merge.merge_sweep(bank, [(1.0, "0")], ("a", "b")), r"merge.merge_sweep: weights=\[\(1.0, '0'\)\] is not a list"),
        (lambda: plots.save(None, 3), r"plots.save: name=3 is not a str"),
        (lambda: plots.curves({"pg": [{"kl": 1.0}]}, "kl", smooth=2.5), r"plots.curves: smooth=2.5 is not an int"),
        (lambda: views.regime_lift("view"), r"views.regime_lift: view='view' is not a dict"),
        (lambda: evidence.matched_pick({}, T="100", method="mopd_pg"), r"evidence.matched_pick: T='100' is not an int"),
        (lambda: starting_points.starting_points(model, tok, n=2.0), r"starting_points.starting_points: n=2.0 is not an int"),
        (lambda: nucleus(z[0], "0.9"), r"rollout.nucleus: top_p='0.9' is not a finite float"),
        (lambda: mopd_mini.evaluation.domain_score({}, 3, "binding"), r"evaluation.domain_score: adapter=3 is not a str"),
        (lambda: runs.read_metrics(3), r"runs.read_metrics: folder=3 is not a str or a path"),
        (lambda: ablation_runs.kl_window([{"kl/binding": 1.0}], share="0.1"), r"ablation_runs.kl_window: share='0.1' is not a finite float"),
    ]


def test_a_wrong_type_at_any_entry_point_is_named_before_any_work(tiny, examples):
    for call, pattern in cases(tiny, examples):
        with pytest.raises(ValueError, match=pattern):
            call()


def test_a_domain_argument_follows_the_domain_rules(tiny):
    """A function's `domains` argument of names: known names, each once (the configs' rule by name)."""
    def stub(domains: tuple[str, ...] = ("binding",)) -> None:
        return None

    stub.__module__ = "elsewhere"
    g = guarded(stub)
    with pytest.raises(ValueError, match=r"stub: domains=\('recall', 'recall'\) names \['recall'\] more than once"):
        g(("recall", "recall"))
    with pytest.raises(ValueError, match=r"stub: domains=\('math',\): unknown domain\(s\) \['math'\]"):
        g(["math"])
    g(["binding", "recall"])


def test_the_function_gets_the_callers_objects_and_numpy_numbers_pass():
    """Checked, never changed: a dict the function fills is the caller's; numpy's numbers are numbers."""
    def fill(history: dict, rows: list[dict], k: int, frac: float) -> dict:
        history["n"] = (k, frac)
        return history

    fill.__module__ = "elsewhere"
    history, rows = {}, [{"kl": 1.0}]
    assert guarded(fill)(history, rows, np.int64(3), np.float32(0.5)) is history and history["n"][0] == 3


def test_the_packages_own_calls_skip_the_checks():
    """The training loop calls `sample` every step: from inside the package the wrapper only looks at
    its caller's module; from outside it checks."""
    def f(k: int) -> int:
        return k

    f.__module__, f.__qualname__ = "mopd_mini.somewhere", "f"
    g = guarded(f)
    inside = {"__name__": "mopd_mini.distill", "g": g}
    exec("out = g('not an int')", inside)
    assert inside["out"] == "not an int"
    with pytest.raises(ValueError, match=r"somewhere.f: k='not an int' is not an int"):
        g("not an int")


def test_a_function_added_later_is_covered_by_its_annotations():
    """No list of functions: guard_public wraps every public function a module defines."""
    module = types.ModuleType("mopd_mini_later")
    exec("def later(n: int, share: float | None = None, names: tuple[str, ...] = ()):\n    return n\n"
         "def _private(n: int):\n    return n\n"
         "class Tool:\n    def run(self, steps: int):\n        return steps\n", vars(module))
    assert sorted(guard_public(vars(module))) == ["Tool", "later"]
    with pytest.raises(ValueError, match=r"later: share='0.5' is not a finite float .* or None"):
        module.later(1, share="0.5")
    with pytest.raises(ValueError, match=r"later: names='ab' is not a tuple .*names=\('ab',\)"):
        module.later(1, names="ab")
    with pytest.raises(ValueError, match=r"Tool.run: steps=2.0 is not an int"):
        module.Tool().run(2.0)
    assert module._private("x") == "x" and module.later(3) == 3


def test_a_call_that_does_not_bind_is_pythons_own_type_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        lab.stuck_gradients(0.9, nope=1)


def test_check_call_checks_without_calling():
    check_call(lab.stuck_gradients, 0.9, beta=0.5)
    with pytest.raises(ValueError, match=r"lab.stuck_gradients: beta='x'"):
        check_call(lab.stuck_gradients, 0.9, beta="x")


# ------------------------------------------------------------------------ top_p: the nucleus keeps its first token

@pytest.mark.parametrize("top_p", [1e-300, 5e-324, 1e-50, 1e-8])
def test_the_nucleus_keeps_the_most_likely_token_at_any_top_p(top_p):
    logp = torch.log_softmax(torch.tensor([[0.5, 3.0, 1.0, -2.0], [0.0, 0.0, 4.0, 0.0]]), -1)
    kept = nucleus(logp, top_p)
    assert torch.isfinite(kept.logsumexp(-1)).all()
    assert kept.exp().tolist() == [[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]]


def test_a_tiny_top_p_samples_the_most_likely_token(tiny, examples):
    """top_p=1e-300 used to drop every token (1e-300 is 0 in float32): torch.multinomial's 'probability
    tensor contains either inf, nan or element < 0' at the first token."""
    model, tok = tiny
    drawn = sample(model, tok, examples, top_p=1e-300, max_new_tokens=3, generator=torch.Generator().manual_seed(0))
    greedy = sample(model, tok, examples, greedy=True, max_new_tokens=3)
    assert torch.equal(drawn.input_ids, greedy.input_ids)


def test_a_student_with_a_tiny_top_p_trains(teacher_bank):
    cfg = MOPDConfig(top_p=1e-300, steps=1, prompts_per_domain=2, topk=4, eval_every=0, track_steps=(),
                     experiment=None, progress=False)
    cfg.check()
    assert len(train_student(teacher_bank, cfg).metrics) == 1


# ------------------------------------------------------------------------ options the chosen loss ignores

@pytest.mark.parametrize("given, pattern", [
    (dict(loss="pg", beta=0.3), r"beta=0.3 has no effect with loss='pg': beta acts only with loss='jsd'"),
    (dict(loss="kl", beta=0.3), r"beta=0.3 has no effect with loss='kl'"),
    (dict(loss="pg", topk_support=True), r"topk_support=True has no effect with loss='pg': .*only with loss='topk'"),
    (dict(loss="jsd", topk_support=True), r"topk_support=True has no effect with loss='jsd'"),
    (dict(lmbda_prefix="gold"), r"lmbda_prefix='gold' has no effect with lmbda=1.0: lmbda_prefix acts only with lmbda < 1"),
    (dict(loss="kl", clip=2.0), r"clip=2.0 has no effect with loss='kl': clip acts only with loss='pg'"),
    (dict(loss="topk", clip=None), r"clip=None has no effect with loss='topk'"),
    (dict(loss="pg", topk_correction=False), r"topk_correction=False has no effect with loss='pg'"),
    (dict(loss="topk", topk_support=True, topk_correction=False),
     r"topk_correction=False has no effect with topk_support=True"),
    (dict(loss="topk", golden_gain=GoldenGain(importance_cap=2.0)),
     r"golden_gain.importance_cap=2.0 has no effect with loss='topk': .*only with loss='pg'"),
])
def test_an_option_the_chosen_loss_ignores_is_refused_naming_both(given, pattern):
    with pytest.raises(ValueError, match=pattern):
        MOPDConfig(**given).check()


@pytest.mark.parametrize("given", [
    dict(loss="jsd", beta=0.3), dict(loss="topk", topk_support=True), dict(loss="topk", topk_correction=False),
    dict(loss="kl", lmbda=0.5, lmbda_prefix="gold"), dict(loss="pg", clip=None), dict(loss="pg", clip=2.0),
    dict(loss="pg", golden_gain=GoldenGain(importance_cap=2.0)), dict(loss="fkl"), dict(loss="kl", topk=8),
])
def test_an_option_that_acts_is_accepted(given):
    MOPDConfig(**given).check()


def test_the_labs_settings_pass_only_what_their_loss_reads():
    """The grid's cells and the loss lab's button (every loss at every knob) make configs check() accepts."""
    for setting in lab.grid_settings():
        MOPDConfig(**setting).check()
    for loss in lab.FORMS:
        for clip in (0.5, 5.0, None):
            for correction in (True, False):
                knobs = lab.knobs_read(loss, clip, 4, correction)
                MOPDConfig(**knobs).check()
                assert knobs["topk"] == 4 and ("clip" in knobs) == (loss == "pg")


def test_the_command_line_refuses_an_ignored_option_before_any_work(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "_bank", lambda *a, **k: pytest.fail("the base was loaded"))
    for argv, message in [(["--loss", "pg", "--beta", "0.3"], "beta=0.3 has no effect with loss='pg'"),
                          (["--loss", "pg", "--topk-support"], "topk_support=True has no effect with loss='pg'"),
                          (["--lmbda-prefix", "gold"], "lmbda_prefix='gold' has no effect with lmbda=1.0")]:
        code = cli.main(["distill", *argv, "--runs-dir", str(tmp_path / "runs"), "--device", "cpu"])
        err = capsys.readouterr().err
        assert code == 2 and message in err and "Traceback" not in err, err
    assert not (tmp_path / "runs").exists()


# ------------------------------------------------------------------------ the command line's list flags

@pytest.mark.parametrize("argv, message", [
    (["teachers", "--domain", "binding", "binding"], "--domain=('binding', 'binding') names ['binding'] more than once"),
    (["teachers", "--domain", "bindng"], "GRPOConfig.domain='bindng': unknown domain(s) ['bindng']"),
    (["evaluate", "--domains", "recall", "recall"], "--domains=('recall', 'recall') names ['recall'] more than once"),
    (["evaluate", "--domains", "math"], "--domains=('math',): unknown domain(s) ['math']"),
    (["merge", "--weights", "teacher_binding=1", "teacher_recall=1", "--how", "ties", "--density", "nan"],
     "--density=nan is not a finite float"),
])
def test_the_command_lines_own_list_flags_follow_the_same_rules(argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "_bank", lambda *a, **k: pytest.fail("the base was loaded"))
    code = cli.main([*argv, "--runs-dir", str(tmp_path / "runs"), "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err, err
    assert not (tmp_path / "runs").exists()


# ------------------------------------------------------------------------ nothing created before the checks pass

SMALL = ["--steps", "2", "--eval-every", "0", "--checkpoint-every", "2", "--no-progress"]


@pytest.mark.parametrize("argv, message", [
    (["distill", "--topk", "10000", *SMALL], "topk=10000 exceeds the vocabulary"),
    (["distill", "--max-new-tokens", "600", *SMALL], "exceeds the model's context"),
    (["teachers", "--domain", "binding", "--max-new-tokens", "600", *SMALL], "exceeds the model's context"),
    (["mix-rl", "--max-new-tokens", "600", *SMALL], "exceeds the model's context"),
    (["cascade", "--init-from", "teacher_binding", "--domain", "recall", "--max-new-tokens", "600", *SMALL],
     "exceeds the model's context"),
    (["rft", "--max-new-tokens", "600", *SMALL], "exceeds the model's context"),
    (["soft-labels", "--max-new-tokens", "600", *SMALL], "exceeds the model's context"),
    (["merge", "--weights", "teacher_binding=0", "teacher_recall=0"], "every merge weight is 0"),
    (["merge", "--weights", "teacher_binding=1", "teacher_recall=1", "--how", "cat", "--density", "0.5"],
     "density is used by"),
], ids=["distill-topk", "distill-budget", "teachers", "mix-rl", "cascade", "rft", "soft-labels", "merge-zero",
        "merge-density"])
def test_a_refused_command_leaves_no_folder_behind(argv, message, teacher_bank, tmp_path, capsys, monkeypatch):
    """Refused by the library after the command line's own checks: runs/<experiment>/ was made by
    those checks (a folder probed with a temporary file) and left empty; now nothing is made."""
    source = tmp_path / "runs" / "src"
    for name in ("teacher_binding", "teacher_recall"):
        (source / name).mkdir(parents=True)
        (source / name / "adapter_config.json").write_text("{}")
    monkeypatch.setattr(cli, "_bank", lambda *a, **k: teacher_bank)
    code = cli.main([*argv, "--runs-dir", str(tmp_path / "runs"), "--from-experiment", "src", "--experiment", "new",
                     "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["src"]


# ------------------------------------------------------------------------ a finished run from a read-only folder

def teacher(root, steps: int = 2) -> list[str]:
    """A 2-step teacher run's command (`steps` more to train on)."""
    return ["teachers", "--domain", "binding", "--experiment", "ro", "--device", "cpu", "--steps", str(steps),
            "--prompts-per-step", "2", "--group-size", "2", "--eval-every", "0", "--checkpoint-every", "2",
            "--no-progress", "--runs-dir", str(root)]


def read_only(monkeypatch, root):
    """Folders under `root` as a read-only mount shows them to the process (the tests run as root,
    who writes anything): os.access says no, and a file made there fails."""
    real_access, real_temporary = os.access, tempfile.TemporaryFile

    def access(path, mode, *a, **k):
        if mode & os.W_OK and str(path).startswith(str(root)):
            return False
        return real_access(path, mode, *a, **k)

    def temporary(*a, dir=None, **k):
        if dir is not None and str(dir).startswith(str(root)):
            raise PermissionError(13, "Permission denied", str(dir))
        return real_temporary(*a, dir=dir, **k)

    monkeypatch.setattr(os, "access", access)
    monkeypatch.setattr(tempfile, "TemporaryFile", temporary)


def test_a_finished_run_reloads_from_a_read_only_folder(tmp_path, capsys, monkeypatch):
    root = tmp_path / "runs"
    assert cli.main(teacher(root)) == 0
    folder = root / "ro" / "teacher_binding"
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    capsys.readouterr()
    read_only(monkeypatch, root)
    assert cli.main(teacher(root)) == 0, capsys.readouterr().err
    assert "teacher_binding:" in capsys.readouterr().out
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before
    # a run that would train on is refused by the trainer, before any step, naming the folder
    code = cli.main(teacher(root, steps=4))
    assert code == 2 and "is not writable by this user" in capsys.readouterr().err
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before


def test_a_new_run_in_a_read_only_folder_is_refused_before_the_base_loads(tmp_path, capsys, monkeypatch):
    root = tmp_path / "runs"
    root.mkdir()
    read_only(monkeypatch, root)
    monkeypatch.setattr(cli, "_bank", lambda *a, **k: pytest.fail("the base was loaded"))
    assert cli.main(teacher(root)) == 2
    assert "is not writable by this user" in capsys.readouterr().err
    assert list(root.iterdir()) == []


# ------------------------------------------------------------------------ Ctrl-C: one line, what was kept

def test_ctrl_c_says_in_one_line_what_was_kept_and_how_to_resume(tmp_path, capsys, monkeypatch):
    saved = runs.Run.save

    def save_then_interrupt(self, step, *a, **k):
        saved(self, step, *a, **k)
        if step == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(runs.Run, "save", save_then_interrupt)
    argv = teacher(tmp_path / "runs", steps=4)
    try:
        code = cli.main(argv)
    except KeyboardInterrupt:   # before: the interrupt (and its traceback) left the command line
        code = "KeyboardInterrupt"
    assert code == 130
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]                           # (above it: transformers' weight-loading bar)
    assert "Traceback" not in err and err.count("mopd-mini teachers:") == 1 and last.startswith("mopd-mini"), err
    folder = tmp_path / "runs" / "ro" / "teacher_binding"
    assert (f"mopd-mini teachers: interrupted (Ctrl-C): teacher_binding: checkpoint at step 2 of 4 in {folder}. "
            "Run the same command to resume from there: mopd-mini teachers --domain binding") in last
    monkeypatch.setattr(runs.Run, "save", saved)
    assert cli.main(argv) == 0                                     # the same command resumes and finishes
    assert [r["step"] for r in runs.read_metrics(folder)] == [1, 2, 3, 4]
    assert json.loads((folder / "config.json").read_text())["steps"] == 4
