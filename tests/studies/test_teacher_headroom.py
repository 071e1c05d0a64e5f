"""studies.teacher_headroom: the choice rule (cheapest config within the tolerance of the best lift)
and the preset it hands to the baselines protocol."""

from studies.teacher_headroom import BASELINE_TEACHER, baseline_teacher_config, choose
from mopd_mini.runs import fast_or


def row(domain, lr, steps, lift):
    return dict(domain=domain, lr=lr, steps=steps, lift=lift)


def test_choose_takes_the_cheapest_config_within_the_tolerance():
    summary = [row("binding", 1e-3, 200, 0.30), row("binding", 1e-3, 600, 0.35), row("binding", 2e-3, 400, 0.34),
               row("recall", 1e-3, 200, 0.45), row("recall", 2e-3, 200, 0.46), row("recall", 1e-3, 400, 0.47)]
    chosen = choose(summary, tolerance=0.02)
    assert chosen["binding"] == dict(steps=400, lr=2e-3)      # 0.34 is within 0.02 of 0.35, and cheaper
    assert chosen["recall"] == dict(steps=200, lr=1e-3)       # same steps: the lr nearest the default wins
    assert choose(summary, tolerance=0.0)["binding"] == dict(steps=600, lr=1e-3)


def test_baseline_teacher_config_is_the_chosen_preset():
    for d, chosen in BASELINE_TEACHER.items():
        cfg = baseline_teacher_config(d, eval_every=0)
        assert (cfg.domain, cfg.lr, cfg.eval_every) == (d, chosen["lr"], 0)
        assert cfg.steps == fast_or(chosen["steps"], chosen["steps"] // 2)
