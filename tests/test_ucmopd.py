"""UCMOPD's options and the foreign-teacher path: the pure functions do what their formulas say,
the trainer applies them, and with both options off the trainer is the one it was before them.

The reference metrics in tests/data/mopd_off_reference.json pin the trainer with both options off.
On the branch that added the options they were made by the trainer BEFORE the options existed
(commit 2e37bfc) and matched bit for bit. Later changes to the shared loop (prefill once and fused
AdamW: equal gradients, floats equal only to rounding; the test split re-drawn for the val split)
moved them, so at the merge they were regenerated from the merged trainer with the options off,
whose off path is the plain `mopd_objective` branch of `train_student`; and again when the routed
teachers began scoring with folded weights on small bases (`routing.FOLDED_LIMIT`: the same
scores up to fp32 rounding). To regenerate after a deliberate change to the MOPD loop:

    PYTHONPATH=. python tests/test_ucmopd.py      # writes tests/data/mopd_off_reference.json
"""

import copy
import json
import math
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

REFERENCE = Path(__file__).parent / "data" / "mopd_off_reference.json"


def reference_run(loss: str) -> dict:
    """A short MOPD run on two perturbed teachers, in memory: its metrics and trace."""
    from mopd_mini import AdapterBank, MOPDConfig, load_base, train_student

    torch.set_num_threads(1)
    bank = AdapterBank(*load_base("tiny", device="cpu"))
    for i, name in enumerate(("teacher_binding", "teacher_recall")):
        bank.create(name, seed=i + 1)
        g = torch.Generator().manual_seed(100 + i)
        with torch.no_grad():
            for n, p in bank.parameters(name).items():
                if "lora_B" in n:
                    p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    cfg = MOPDConfig(loss=loss, steps=4, prompts_per_domain=3, eval_every=2, eval_n=4, track_steps=(1, 3),
                     track_prompts=1, experiment=None, progress=False, seed=5)
    run = train_student(bank, cfg)
    return {"metrics": run.metrics, "trace": run.trace}


if __name__ == "__main__":  # write the reference from whatever mopd_mini is on the path
    import mopd_mini
    print("writing the reference from", mopd_mini.__file__, file=sys.stderr)
    REFERENCE.parent.mkdir(exist_ok=True)
    REFERENCE.write_text(json.dumps({loss: reference_run(loss) for loss in ("pg", "topk")}, indent=0))
    sys.exit(0)

from mopd_mini import AdapterBank, MOPDConfig, routing, train_student  # noqa: E402
from mopd_mini.distill import ucmopd_objective  # noqa: E402
from mopd_mini.losses import reverse_kl, topk_reverse_kl  # noqa: E402
from mopd_mini.routing import TeacherOutputs  # noqa: E402
from mopd_mini.rollout import Rollout, completion_logits, sample  # noqa: E402
from mopd_mini.config import Endorsement, GoldenGain  # noqa: E402
from mopd_mini.ucmopd import (endorsement_keep_prob, endorsement_mask, entropy, golden_gain_keep,  # noqa: E402
                              positive_advantage_density)

from tests.conftest import TEACHERS  # noqa: E402


# ---------------------------------------------------------------------------------------------
# options off: bit for bit the trainer before them
# ---------------------------------------------------------------------------------------------


def same(new, old, where="") -> None:
    """`new` reproduces `old`: every int, bool and string exactly (sampled token ids, counts,
    accuracies of whole prompts), every float to 1e-3 relative or 5e-5 absolute. The reference was
    written on one CPU (an Intel Xeon); another (an AMD EPYC) runs other float32 kernels, whose
    sums round differently in the last bits, and four training steps carry that on. Measured on
    the EPYC against the Xeon's file: every token, count and accuracy equal; the floats at most
    2.4e-5 apart (grad_norm 9.91289 vs 9.91291) and at most 3.9e-4 relative (adv_max 0.026967 vs
    0.026978), so the tolerance has a margin of 2x or more; a changed token fails exactly."""
    if isinstance(old, float) or isinstance(new, float):
        assert new == pytest.approx(old, rel=1e-3, abs=5e-5), (where, new, old)
    elif isinstance(old, dict):
        assert isinstance(new, dict), where
        for key, value in old.items():       # keys added later (other metrics) are not compared
            assert key in new, f"{where}.{key} is missing"
            same(new[key], value, f"{where}.{key}")
    elif isinstance(old, list):
        assert isinstance(new, list) and len(new) == len(old), (where, len(new), len(old))
        for i, (a, b) in enumerate(zip(new, old)):
            same(a, b, f"{where}[{i}]")
    else:
        assert new == old, (where, new, old)


@pytest.mark.parametrize("loss", ["pg", "topk"])
def test_options_off_match_the_unchanged_trainer(loss):
    """Every metric and traced value the pre-UCMOPD trainer logged is reproduced: tokens and
    counts exactly, floats to the last bits a CPU's kernels may change (`same`)."""
    reference = json.loads(REFERENCE.read_text())[loss]
    now = json.loads(json.dumps(reference_run(loss)))   # as the reference was stored (tuples: lists)
    assert len(now["metrics"]) == len(reference["metrics"]) == 4
    same(now["metrics"], reference["metrics"], "metrics")
    same(now["trace"], reference["trace"], "trace")


def test_same_catches_a_changed_token_and_a_real_drift():
    same({"a": [1, 2.0]}, {"a": [1, 2.0 + 1e-6]})
    with pytest.raises(AssertionError):
        same({"a": [1, 2.0]}, {"a": [3, 2.0]})          # a token id
    with pytest.raises(AssertionError):
        same({"a": [1, 2.0]}, {"a": [1, 2.01]})         # a float beyond rounding


# ---------------------------------------------------------------------------------------------
# golden gain
# ---------------------------------------------------------------------------------------------


def test_positive_advantage_density_by_hand():
    A = torch.tensor([[2.0, -1.0, 4.0, 9.0],    # positives 2, 4 (9 is masked out): 3
                      [-1.0, -2.0, 0.0, 0.0],   # no positive token: 0
                      [0.5, 0.0, 0.0, 0.0]])    # one: 0.5
    M = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0]])
    assert positive_advantage_density(A, M).tolist() == [3.0, 0.0, 0.5]


def test_golden_gain_keeps_exactly_its_rule():
    """A hand-made batch of 2 prompts x (anchor + 3 explorations): keep iff r(y_e) >= r(y_anchor)."""
    M = torch.ones(8, 2)
    A = torch.tensor([[1.0, 3.0],     # anchor of prompt 0: r = 2
                      [0.2, 0.0],     # anchor of prompt 1: r = 0.2
                      [2.0, -5.0],    # p0 e0: r = 2   (equal: kept)
                      [1.0, 2.9],     # p0 e1: r = 1.95 (dropped)
                      [-1.0, 8.0],    # p0 e2: r = 8   (kept, a negative token does not lower r)
                      [-1.0, -1.0],   # p1 e0: r = 0   (dropped)
                      [0.3, 0.1],     # p1 e1: r = 0.2 (kept: equal)
                      [0.0, 0.25]])   # p1 e2: r = 0.25 (kept)
    r = positive_advantage_density(A, M)
    keep = golden_gain_keep(r[:2], r[2:].view(2, 3))
    assert keep.tolist() == [[True, False, True], [False, True, True]]
    with pytest.raises(ValueError, match="explore_density"):
        golden_gain_keep(r[:2], r[2:])


# ---------------------------------------------------------------------------------------------
# teacher-endorsement filtering
# ---------------------------------------------------------------------------------------------


def test_endorsement_keep_prob_formula():
    logp = torch.tensor([[-3.0, -0.5, -3.0, -3.0]])
    H = torch.tensor([[1.0, 1.0, 1.0, 1.0]])
    A = torch.tensor([[1.0, 1.0, -1.0, 0.0]])
    w = endorsement_keep_prob(logp, H, A)
    s = math.exp(-2.0)                       # cll = -3 + 1 = -2;  cll = 0.5 > 0: s = 1
    torch.testing.assert_close(w, torch.tensor([[s, 1.0, 1 - s, 1.0]]))


def test_entropy_is_the_entropy():
    z = torch.randn(2, 3, 11, generator=torch.Generator().manual_seed(0))
    p = z.softmax(-1)
    torch.testing.assert_close(entropy(z), -(p * p.log()).sum(-1))


def test_endorsement_mask_rate_is_binomial_and_seeded():
    """On a fixed case (w = 0.3 where A > 0, 0.7 where A < 0) the kept shares fall within 5 binomial
    standard deviations of w; the same seed gives the same mask, another seed another."""
    n = 20_000
    s = 0.3
    logp = torch.full((2, n), math.log(s) - 1.0)
    H = torch.ones(2, n)                     # cll = log 0.3 < 0: s = 0.3
    A = torch.stack([torch.ones(n), -torch.ones(n)])
    M = torch.ones(2, n)
    keep, info = endorsement_mask(logp, H, A, M, torch.Generator().manual_seed(1))
    for row, w in ((0, s), (1, 1 - s)):
        sd = math.sqrt(w * (1 - w) / n)
        assert abs(keep[row].mean().item() - w) < 5 * sd
    assert abs(info["masked_fraction"].item() - 0.5) < 5 * math.sqrt(0.25 / (2 * n))
    again, _ = endorsement_mask(logp, H, A, M, torch.Generator().manual_seed(1))
    other, _ = endorsement_mask(logp, H, A, M, torch.Generator().manual_seed(2))
    assert torch.equal(keep, again) and not torch.equal(keep, other)
    half = M.clone()
    half[:, n // 2:] = 0                     # tokens outside the mask are never kept
    assert endorsement_mask(logp, H, A, half, torch.Generator().manual_seed(1))[0][:, n // 2:].sum() == 0


# ---------------------------------------------------------------------------------------------
# the trainer with the options on
# ---------------------------------------------------------------------------------------------


def hand_case():
    """2 prompts x (anchor + 1 exploration), 3 completion tokens, 4 vocabulary tokens; every
    sampled token is id 0. Each token is given (log pi_S(y), log pi_T(y), typical?): typical = y is
    the teacher's argmax, so cll >= 0 and s = 1; untypical = log pi_T(y) = -40, so s < 1e-16.
    Endorsement keeps an A > 0 token iff typical and an A < 0 token iff untypical, whatever the
    seed: the masks below are fixed by the case, not by the draw."""
    T, U = True, False
    tokens = [  # rows: anchor p0 (binding), anchor p1 (recall), exploration of p0, exploration of p1
        [(-0.8, -0.3, T), (-45.5, -40.0, U), (-0.2, -0.7, T)],    # A = +0.5, +5.5, -0.5
        [(-0.8, -0.3, T), (-39.5, -40.0, U), (-1.0, -1.0, T)],    # A = +0.5, -0.5, (padding)
        [(-2.7, -0.2, T), (-39.0, -40.0, U), (-2.7, -0.2, T)],    # A = +2.5, -1.0, +2.5
        [(-1.2, -0.2, T), (-40.2, -40.0, U), (-0.2, -0.5, T)],    # A = +1.0, +0.2, -0.3
    ]
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 1, 1], [1, 1, 1]])

    def dist(logp):  # log of a distribution over 4 tokens with p(0) = exp(logp), the rest equal
        p0 = math.exp(logp)
        return [math.log(p0)] + [math.log((1 - p0) / 3)] * 3

    student_logits = torch.tensor([[dist(s) for s, _, _ in row] for row in tokens], requires_grad=True)
    teacher_logits = torch.tensor([[dist(q) for _, q, _ in row] for row in tokens])
    teacher_logprobs = teacher_logits.log_softmax(-1)
    B, C = mask.shape
    rollout = Rollout(input_ids=torch.zeros(B, 1 + C, dtype=torch.long), attention_mask=torch.ones(B, 1 + C),
                      completion_mask=mask, prompt_len=1,
                      examples=[SimpleNamespace(task=d) for d in ("binding", "recall", "binding", "recall")],
                      sample_logprobs=torch.zeros(B, C),   # the sampler's: ucmopd must not read them
                      ended=torch.ones(B, dtype=torch.bool))
    top = teacher_logprobs.topk(2, dim=-1)
    teacher = TeacherOutputs(logprobs=teacher_logprobs[..., 0], topk_ids=top.indices, topk_logprobs=top.values,
                            logits=teacher_logits)
    log_s = torch.tensor([[s for s, _, _ in row] for row in tokens])
    return rollout, teacher, student_logits, log_s, mask


def test_ucmopd_objective_wiring_by_hand():
    """Which advantage the filters read, in which order, and what the loss divides by.

    Densities r(y) over every completion token, with the UNCLIPPED advantage: anchor p0 (0.5 +
    5.5) / 2 = 3; its exploration (2.5 + 2.5) / 2 = 2.5 < 3: dropped. Anchor p1 0.5; its exploration
    (1.0 + 0.2) / 2 = 0.6 >= 0.5: kept. Each wrong wiring keeps the p0 exploration instead: the
    clipped advantage (clip 1: 0.75 against 1), the sampler's log-probs (all densities 0), or the
    density taken after the endorsement mask (anchor p0 keeps only its +0.5 token: 0.5 against 2.5).
    Then endorsement on the kept rows: anchor p0 keeps token 0 (its +5.5 token is untypical, its
    -0.5 typical); anchor p1 keeps both (+0.5 typical, -0.5 untypical); exploration p1 keeps token 0.
    """
    rollout, teacher, student_logits, log_s, mask = hand_case()
    cfg = MOPDConfig(loss="pg", clip=1.0, golden_gain=GoldenGain(samples=1), endorsement=Endorsement(), seed=3)
    loss, info, row = ucmopd_objective(cfg, 0, student_logits, rollout, teacher, anchors=2)

    torch.testing.assert_close(log_s, info["student_logprob"], rtol=0, atol=1e-5)   # the case is as built
    assert row["gg_kept/binding"] == 0.0 and row["gg_kept/recall"] == 1.0 and row["gg_kept"] == 0.5
    # endorsement counts its drops among the tokens golden gain kept (GG first): binding 3 tokens,
    # 1 kept; recall 2 + 3, 3 kept. (Over every completion token it would read 5/6 and 7/11.)
    assert row["tef_masked/binding"] == pytest.approx(2 / 3)
    assert row["tef_masked/recall"] == pytest.approx(2 / 5)
    assert row["tef_masked"] == pytest.approx(4 / 8)

    # MOPD-PG on the kept tokens: -clip(A_t, -1, 1) * log pi_S(y_t), each row's mean over its kept
    # tokens, then the mean over the 3 rows that keep any
    anchor0 = [0.5 * -0.8]                        # kept: token 0 (A = +0.5)
    anchor1 = [0.5 * -0.8, -0.5 * -39.5]          # kept: tokens 0 (A = +0.5) and 1 (A = -0.5)
    explore1 = [1.0 * -1.2]                       # kept: token 0 (A = +1.0, at the clip)
    kept = [anchor0, anchor1, explore1]
    by_hand = -sum(sum(r) / len(r) for r in kept) / 3                         # -8.075 / 3
    assert loss.item() == pytest.approx(by_hand, abs=1e-4)
    # the normalisers it is not, each a different number here
    full_length = -(sum(anchor0) / 3 + sum(anchor1) / 2 + sum(explore1) / 3) / 3   # the paper's 1/T
    every_row = -sum(sum(r) / len(r) for r in kept) / 4                       # the dropped row counted
    token_mean = -sum(map(sum, kept)) / 4                                     # one mean over the batch
    for wrong in (full_length, every_row, token_mean):
        assert abs(loss.item() - wrong) > 0.3

    # the same kept mask for MOPD-Top-k and the exact KL (the extension beyond the paper)
    keep = torch.tensor([[1, 0, 0], [1, 1, 0], [0, 0, 0], [1, 0, 0]])
    for form, objective in (("kl", lambda m: reverse_kl(student_logits, teacher.logits, m)[0]),
                            ("topk", lambda m: topk_reverse_kl(student_logits, teacher.topk_ids,
                                                               teacher.topk_logprobs, m)[0])):
        loss, _, _ = ucmopd_objective(replace(cfg, loss=form), 0, student_logits, rollout, teacher, anchors=2)
        torch.testing.assert_close(loss, objective(keep))
        assert abs(loss.item() - objective(mask).item()) > 1e-3        # the mask changes it



@pytest.mark.parametrize("loss", ["pg", "topk"])
def test_trainer_logs_the_ucmopd_fractions(teacher_bank, loss):
    cfg = MOPDConfig(loss=loss, steps=3, prompts_per_domain=2, eval_every=0, experiment=None, progress=False,
                     track_steps=(), golden_gain=GoldenGain(samples=3, importance_cap=2.0 if loss == "pg" else None),
                     endorsement=Endorsement())
    run = train_student(teacher_bank, cfg)
    for row in run.metrics:
        for d in ("binding", "recall"):
            assert 0 <= row[f"gg_kept/{d}"] <= 1 and 0 <= row[f"tef_masked/{d}"] <= 1
            assert row[f"tokens/{d}"] >= 2      # metrics are the anchors' (2 prompts), not 8 rows'
        assert math.isfinite(row["loss"])
    with pytest.raises(ValueError, match="golden_gain.samples"):
        train_student(teacher_bank, replace(cfg, golden_gain=GoldenGain(samples=0)))


def test_nucleus_sampling_stays_in_the_nucleus(tiny, mixed_examples):
    """top_p: every sampled token's probability under the truncated distribution is > 0, and a
    tiny top_p is greedy."""
    model, tok = tiny
    greedy = sample(model, tok, mixed_examples, greedy=True, max_new_tokens=3)
    tight = sample(model, tok, mixed_examples, temperature=1.5, top_p=1e-6, max_new_tokens=3,
                   generator=torch.Generator().manual_seed(0))
    assert torch.equal(tight.completion_ids, greedy.completion_ids)
    with pytest.raises(ValueError, match="top_p"):
        sample(model, tok, mixed_examples, top_p=0.0)


# ---------------------------------------------------------------------------------------------
# a teacher that is a separate model
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def other_bank(tiny, perturb):
    """A separate model: its own base (the tiny base with perturbed weights: another origin) and
    its own adapter."""
    base = copy.deepcopy(tiny[0])
    with torch.no_grad():
        for p in base.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(7)) * 0.01)
    other = AdapterBank(base, tiny[1])
    other.create("teacher_binding", seed=3)
    perturb(other, "teacher_binding", seed=11)
    return other


def test_foreign_teacher_is_refused_without_the_override(teacher_bank, other_bank):
    with pytest.raises(ValueError, match="allow_foreign=True"):
        teacher_bank.add_foreign("foreign_binding", other_bank, "teacher_binding")


def test_foreign_teacher_refuses_another_tokenizer_even_with_the_override(teacher_bank, other_bank, tiny):
    tok = copy.deepcopy(tiny[1])
    tok.add_tokens(["zzz_new_word"])
    other_bank.tokenizer = tok
    with pytest.raises(ValueError, match="another tokenizer.*vocabulary"):
        teacher_bank.add_foreign("foreign_binding", other_bank, "teacher_binding", allow_foreign=True)


@pytest.mark.parametrize("mode", ["mixed", "swap"])
def test_foreign_teacher_scores_its_rows(teacher_bank, other_bank, mixed_examples, tiny, mode):
    """With the override, binding rows are scored by the other model (its base + its adapter) and
    recall rows by the bank's own teacher, exactly as each alone."""
    teacher_bank.add_foreign("foreign_binding", other_bank, "teacher_binding", allow_foreign=True)
    rollout = sample(tiny[0], tiny[1], mixed_examples, temperature=2.0, max_new_tokens=4,
                     generator=torch.Generator().manual_seed(0))
    route = {"binding": "foreign_binding", "recall": "teacher_recall"}
    scores = routing.teacher_outputs(teacher_bank, rollout, route, mode=mode, k=8)
    for domain, bank, adapter in (("binding", other_bank, "teacher_binding"), ("recall", teacher_bank, "teacher_recall")):
        rows = [i for i, d in enumerate(rollout.domains) if d == domain]
        with bank.use(adapter) as model, torch.no_grad():
            alone = completion_logits(model, rollout.rows(rows))
        torch.testing.assert_close(scores.logits[rows], alone, rtol=1e-5, atol=1e-5)   # fp32: a batch of other shape sums in another order
    own = routing.teacher_outputs(teacher_bank, rollout, TEACHERS, mode=mode, k=8)
    assert (own.logits - scores.logits).abs().max() > 1e-3   # it is not the bank's own binding teacher


def test_student_trains_against_a_foreign_teacher(teacher_bank, other_bank):
    teacher_bank.add_foreign("foreign_binding", other_bank, "teacher_binding", allow_foreign=True)
    cfg = MOPDConfig(steps=2, prompts_per_domain=2, eval_every=0, experiment=None, progress=False, track_steps=(1,),
                     track_prompts=1, teachers={"binding": "foreign_binding"})
    run = train_student(teacher_bank, cfg)
    assert math.isfinite(run.metrics[-1]["kl/binding"]) and run.metrics[-1]["kl/binding"] > 0
    with pytest.raises(ValueError, match="not in domains"):
        train_student(teacher_bank, replace(cfg, teachers={"math": "foreign_binding"}))
