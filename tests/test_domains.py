"""Naming the domains to compose: a tuple (or list) of names. One name as a plain string is refused
by check() with the fix (it must never be read as a sequence of one-letter domains)."""

import pytest

from mopd_mini import MOPDConfig, get_domains, train_student


def test_a_single_domain_name_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"MOPDConfig.domains='binding' is not a tuple.*domains=\('binding',\)"):
        MOPDConfig(domains="binding").check()  # never "unknown domain(s) ['b', 'i', ...]"
    MOPDConfig(domains=("binding",)).check()
    assert MOPDConfig(domains=["recall", "binding"]).domains == ("recall", "binding")
    assert list(get_domains("recall")) == ["recall"]
    assert list(get_domains(("binding", "recall"))) == ["binding", "recall"]


def test_an_unknown_single_name_is_reported_whole():
    with pytest.raises(ValueError, match=r"unknown domain\(s\) \['math'\]; valid domains: \['binding', 'recall'\]"):
        MOPDConfig(domains=("math",)).check()
    with pytest.raises(ValueError, match=r"\['bindng'\]"):
        get_domains("bindng")


def test_a_student_of_one_domain_needs_only_that_teacher(bank):
    """domains=("binding",) routes every rollout to teacher_binding; teacher_recall is never asked for."""
    bank.create("teacher_binding", seed=1)
    cfg = MOPDConfig(domains=("binding",), steps=1, prompts_per_domain=2, topk=8, eval_every=0, track_steps=(1,),
                     track_prompts=1, experiment=None, progress=False)
    assert cfg.route == {"binding": "teacher_binding"}
    run = train_student(bank, cfg)
    assert "kl/binding" in run.metrics[-1] and not any(k.endswith("/recall") for k in run.metrics[-1])
