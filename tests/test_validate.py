"""The type-derived validator (mopd_mini.validate): every config's check() runs it first, so a
value of the wrong type or a non-finite float is refused before any work, naming the class, the
field, the value and what the field accepts; and a field added later is covered by its annotation."""

from dataclasses import dataclass, field

import pytest

from mopd_mini import GRPOConfig, MOPDConfig, cli
from mopd_mini.export import Layout
from mopd_mini.config import Endorsement, GoldenGain, OfflineConfig
from mopd_mini.validate import validate

INF = float("inf")


@pytest.mark.parametrize("make, pattern", [
    # the inputs: each used to fail later (a comparison's TypeError, or deep in torch at step 1)
    (lambda: MOPDConfig(steps="10"), r"MOPDConfig.steps='10' is not an int"),
    (lambda: MOPDConfig(clip="5"), r"MOPDConfig.clip='5' is not a finite float .* or None"),
    (lambda: MOPDConfig(topk=64.0), r"MOPDConfig.topk=64.0 is not an int \(not a bool, not a float\)"),
    (lambda: GRPOConfig(prompts_per_step=2.5), r"GRPOConfig.prompts_per_step=2.5 is not an int"),
    (lambda: MOPDConfig(golden_gain=GoldenGain(samples=2.5)), r"GoldenGain.samples=2.5 is not an int"),
    (lambda: MOPDConfig(golden_gain={"samples": 2}),
     r"MOPDConfig.golden_gain=\{'samples': 2\} is not an instance of GoldenGain or None; "
     r"e.g. golden_gain=GoldenGain\(\*\*\{'samples': 2\}\)"),
    (lambda: MOPDConfig(golden_gain=True), r"MOPDConfig.golden_gain=True is not an instance of GoldenGain"),
    (lambda: MOPDConfig(endorsement=Endorsement(seed="x")), r"Endorsement.seed='x' is not an int"),
    (lambda: MOPDConfig(endorsement=True), r"MOPDConfig.endorsement=True is not an instance of Endorsement"),
    (lambda: MOPDConfig(lr=INF), r"MOPDConfig.lr=inf is not a finite float"),
    (lambda: MOPDConfig(temperature=INF), r"MOPDConfig.temperature=inf is not a finite float"),
    (lambda: GRPOConfig(lr=float("nan")), r"GRPOConfig.lr=nan is not a finite float"),
    (lambda: OfflineConfig(temperature=-INF), r"OfflineConfig.temperature=-inf is not a finite float"),
    (lambda: MOPDConfig(domains=("binding", "binding")),
     r"MOPDConfig.domains=\('binding', 'binding'\) names \['binding'\] more than once.*domains=\('binding',\)"),
    (lambda: MOPDConfig(teachers={"binding": 3}), r"MOPDConfig.teachers=\{'binding': 3\} is not a dict of a str"),
    (lambda: GoldenGain(importance_cap="2"), r"GoldenGain.importance_cap='2' is not a finite float .* or None"),
    (lambda: Layout(gpus=8.0), r"Layout.gpus=8.0 is not an int"),
])
def test_a_wrong_type_or_a_non_finite_value_is_named(make, pattern):
    cfg = make()
    with pytest.raises(ValueError, match=pattern):
        cfg.check()


def test_a_bool_is_not_an_int():
    with pytest.raises(ValueError, match=r"MOPDConfig.steps=True is not an int \(not a bool"):
        MOPDConfig(steps=True).check()
    with pytest.raises(ValueError, match=r"MOPDConfig.lr=True is not a finite float .*not a bool"):
        MOPDConfig(lr=True).check()


def test_an_int_is_accepted_where_a_float_is_asked_and_stored_as_one():
    cfg = MOPDConfig(lr=1, clip=5, temperature=1)
    cfg.check()
    assert (cfg.lr, cfg.clip, cfg.temperature) == (1.0, 5.0, 1.0)
    assert all(type(v) is float for v in (cfg.lr, cfg.clip, cfg.temperature))


def test_a_list_is_accepted_for_a_tuple_and_stored_as_one():
    cfg = GRPOConfig(domain=["binding", "recall"], eval_domains=[])
    cfg.check()
    assert cfg.domain == ("binding", "recall") and cfg.eval_domains == ()
    cfg = MOPDConfig(track_steps=[1, 2])
    cfg.check()
    assert cfg.track_steps == (1, 2)
    with pytest.raises(ValueError, match=r"MOPDConfig.track_steps=\(1, 2.5\) is not a tuple whose items are each "
                                         r"an int"):
        MOPDConfig(track_steps=(1, 2.5)).check()


def test_a_bare_string_where_a_tuple_of_domains_is_asked_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"MOPDConfig.domains='binding' is not a tuple .*; for one item give a "
                                         r"tuple: domains=\('binding',\)"):
        MOPDConfig(domains="binding").check()
    with pytest.raises(ValueError, match=r"GRPOConfig.eval_domains='binding' .*eval_domains=\('binding',\)"):
        GRPOConfig(domain="recall", eval_domains="binding").check()
    GRPOConfig(domain="binding").check()  # `str | tuple[str, ...]`: one domain as a str is what it says


def test_none_only_where_the_annotation_allows_it():
    MOPDConfig(clip=None, teachers=None, golden_gain=None, init_from=None, experiment=None).check()
    for name in ("steps", "lr", "student", "domains", "topk_correction"):
        with pytest.raises(ValueError, match=rf"MOPDConfig.{name}=None is not "):
            MOPDConfig(**{name: None}).check()


def test_domains_are_known_and_named_once():
    with pytest.raises(ValueError, match=r"OfflineConfig.domains=\('binding', 'x'\): unknown domain\(s\) \['x'\]"):
        OfflineConfig(domains=["binding", "x"]).check()
    with pytest.raises(ValueError, match=r"GRPOConfig.domain=\('recall', 'recall'\) names \['recall'\] more than once"):
        GRPOConfig(domain=("recall", "recall")).check()
    with pytest.raises(ValueError, match=r"GRPOConfig.eval_domains=\('binding', 'binding'\) names"):
        GRPOConfig(domain="recall", eval_domains=("binding", "binding")).check()


def test_every_default_config_passes():
    for cfg in (MOPDConfig(), GRPOConfig(), OfflineConfig(), GoldenGain(), Endorsement(), Layout(),
                MOPDConfig(golden_gain=GoldenGain(importance_cap=2), endorsement=Endorsement(seed=3))):
        cfg.check()
    assert MOPDConfig(golden_gain=GoldenGain(importance_cap=2)).golden_gain.importance_cap == 2


def test_a_field_added_later_is_covered_by_its_annotation():
    """No list of fields: the rules come from the annotations, so a new field is checked as it is declared
    (names no config has, so the subclass adds fields rather than re-declaring ones check() reads)."""

    @dataclass
    class Later(MOPDConfig):
        later_rate: float = 0.5
        later_share: float | None = None
        later_p: float = 1.0
        thresholds: tuple[float, ...] = (0.1,)
        option: Endorsement | None = None
        notes: dict[str, int] = field(default_factory=dict)

    Later(later_rate=1, later_share=None, thresholds=[0, 1.5], notes={"a": 1}).check()
    for kw, pattern in [(dict(later_rate=INF), r"Later.later_rate=inf is not a finite float"),
                        (dict(later_share="0.5"), r"Later.later_share='0.5' is not a finite float .* or None"),
                        (dict(thresholds=(0.1, float("nan"))), r"Later.thresholds=\(0.1, nan\) is not a tuple"),
                        (dict(option={"seed": 1}), r"Later.option=\{'seed': 1\} is not an instance of Endorsement"),
                        (dict(notes={"a": True}), r"Later.notes=\{'a': True\} is not a dict of a str to an int")]:
        with pytest.raises(ValueError, match=pattern):
            Later(**kw).check()


def test_a_frozen_config_is_conformed_in_place():
    layout = Layout(teacher_gpus=None)
    validate(layout)
    assert layout.gpus == 8


def test_the_command_line_refuses_a_non_finite_lr_before_any_work(tmp_path, capsys, monkeypatch):
    """The CLI builds its configs with check(), so the validator runs there too (status 2, no traceback)."""
    monkeypatch.setattr(cli, "_bank", lambda *a, **k: (_ for _ in ()).throw(AssertionError("the base was loaded")))
    for argv, message in [(["distill", "--lr", "inf"], "MOPDConfig.lr=inf is not a finite float"),
                          (["teachers", "--temperature", "inf"], "GRPOConfig.temperature=inf is not a finite float"),
                          (["distill", "--domains", "binding", "binding"], "names ['binding'] more than once")]:
        try:
            code = cli.main([*argv, "--runs-dir", str(tmp_path), "--device", "cpu"])
        except SystemExit as done:
            code = done.code
        err = capsys.readouterr().err
        assert code == 2 and message in err and "Traceback" not in err, err
    assert not any(tmp_path.iterdir())


def test_numpy_numbers_are_numbers_and_stored_as_python_ones():
    """A sweep's np.int64 seed or np.float32 lr is a number; a numpy bool is still not an int."""
    np = pytest.importorskip("numpy")
    cfg = MOPDConfig(steps=np.int64(3), seed=np.int32(1), lr=np.float32(0.5))
    cfg.check()
    assert (type(cfg.steps), type(cfg.seed), type(cfg.lr)) == (int, int, float) and cfg.lr == 0.5
    with pytest.raises(ValueError, match=r"MOPDConfig.steps=np.True_ is not an int"):
        MOPDConfig(steps=np.bool_(True)).check()
