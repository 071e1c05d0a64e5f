"""Tests for mopd_mini.domains. Naming the domains to compose: a tuple (or list) of names. One name
as a plain string is refused by check() with the fix (it must never be read as a sequence of
one-letter domains). The regime study's domains are found by name, never by default."""

import pytest

from mopd_mini import MOPDConfig, get_domains, train_student
from mopd_mini.domains import REGIME_DOMAINS


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


def test_regime_domains_are_registered_by_name_not_by_default():
    """get_domains finds each regime domain by name; its examples carry its style and metric (chain:
    the worked trace, graded on the final answer; train depths 2-3, 4-5 held out)."""
    got = get_domains(["chain", "conflict", "memory"])
    assert got == REGIME_DOMAINS
    chain = got["chain"]
    assert chain.train_lengths == (2, 3) and chain.held_out == (4, 5)
    ex = chain.train_examples(0, 2)[0]
    assert (ex.answer_style, ex.metric, ex.length) == ("trace", "final", 2) and len(ex.answer.split()) == 3
    assert all(e.metric == "final" for e in chain.examples("test", 5, 3))
    assert all(e.metric == "relaxed" and e.answer_style == "short" for e in got["conflict"].test_examples(4, 3))
    with pytest.raises(ValueError, match=r"unknown domain\(s\) \['chains'\].*'chain', 'conflict', 'memory'"):
        get_domains("chains")
    with pytest.raises(ValueError, match="unknown metric"):
        type(chain)("chain", (2,), (3,), metric="dense")
