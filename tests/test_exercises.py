"""The course's checked exercises (mopd_mini/exercises.py): each checker passes the library's own
function and the reference the notebook ships between its `# --- your code ---` lines, and fails
a plausible wrong implementation with a message that names the case that caught it."""

import json
import re
from pathlib import Path

import pytest
import torch

from mopd_mini import exercises, losses

ROOT = Path(__file__).parents[1]
MARK = "# --- your code ---"


def fails(checker, fn, case: str) -> str:
    """Run the checker on a wrong `fn`: it must raise, and the report must FAIL the named case."""
    with pytest.raises(AssertionError) as caught:
        checker(fn)
    message = str(caught.value)
    failed = re.findall(r"^\s*FAIL  (.*)$", message, re.M)
    assert any(line.startswith(case) for line in failed), f"expected the case {case!r} to fail:\n{message}"
    return message


# --- the library's own functions pass ------------------------------------------------------------


def library_pg(s, t, mask, clip=5.0):
    return losses.pg_loss(s, t, mask, clip=clip)


def library_kl(z_S, z_T):
    one = torch.ones(1, 1, dtype=z_S.dtype)
    return losses.reverse_kl(z_S.view(1, 1, -1), z_T.view(1, 1, -1), one)[0]


def library_topk(z_S, ids, logp_T):
    one = torch.ones(1, 1, dtype=z_S.dtype)
    return losses.topk_reverse_kl(z_S.view(1, 1, -1), ids.view(1, 1, -1), logp_T.view(1, 1, -1), one)[0]


def closed_form_grad(z_S, z_T):
    """g_v = p_S(v) (log p_S(v) - log p_T(v) - KL)."""
    log_p_S, log_p_T = z_S.log_softmax(-1), z_T.log_softmax(-1)
    p_S = log_p_S.exp()
    kl = (p_S * (log_p_S - log_p_T)).sum()
    return p_S * (log_p_S - log_p_T - kl)


def closed_form_jsd_grad(z_S, z_T, beta, mixture_beta=None, against_teacher=False, scale=True):
    """g_v = (1 - beta) p_S(v) (log(p_S(v) / M(v)) - KL(p_S || M)), M = beta p_T + (1 - beta) p_S; the
    keyword arguments make the plausible mistakes (beta on the student, p_T for M, no (1 - beta))."""
    log_p_S, p_T = z_S.log_softmax(-1), z_T.softmax(-1)
    p_S = log_p_S.exp()
    b = beta if mixture_beta is None else mixture_beta
    log_M = z_T.log_softmax(-1) if against_teacher else (b * p_T + (1 - b) * p_S).log()
    kl = (p_S * (log_p_S - log_M)).sum()
    return ((1 - beta) if scale else 1.0) * p_S * (log_p_S - log_M - kl)


def test_the_library_passes_every_checker():
    for checker, fn in [(exercises.check_group_advantages, losses.group_advantages),
                        (exercises.check_pg_loss, library_pg),
                        (exercises.check_reverse_kl, library_kl),
                        (exercises.check_topk_correction, library_topk),
                        (exercises.check_reverse_kl_grad, closed_form_grad),
                        (exercises.check_jsd_grad, closed_form_jsd_grad)]:
        report = checker(fn)
        assert report.passed and len(report.cases) >= 4
        assert repr(report).count("PASS  ") == len(report.cases) and "FAIL" not in repr(report)


# --- group_advantages ----------------------------------------------------------------------------


def sample_std(rewards, eps=1e-6):
    r = rewards
    keep = (r != r[:, :1]).any(dim=1)
    A = (r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + eps)        # Bessel's G - 1
    return torch.where(keep[:, None], A, 0.0), keep


def no_eps(rewards, eps=1e-6):
    r = rewards
    return (r - r.mean(1, keepdim=True)) / r.std(1, correction=0, keepdim=True), (r != r[:, :1]).any(dim=1)


def sign_flipped_advantage(rewards, eps=1e-6):
    A, keep = losses.group_advantages(rewards, eps)
    return -A, keep


def whole_batch(rewards, eps=1e-6):
    r = rewards
    A = (r - r.mean()) / (r.std(correction=0) + eps)                           # one group for the batch
    return A, (r != r[:, :1]).any(dim=1)


def test_group_advantages_checker_catches_sample_std():
    fails(exercises.check_group_advantages, sample_std, "0/1 rewards")


def test_group_advantages_checker_catches_a_missing_eps():
    message = fails(exercises.check_group_advantages, no_eps, "groups with all-equal rewards")
    assert "FAIL  eps = 0.5" in message and "nan" in message


def test_group_advantages_checker_catches_a_flipped_sign_and_a_batch_mean():
    fails(exercises.check_group_advantages, sign_flipped_advantage, "0/1 rewards")
    fails(exercises.check_group_advantages, whole_batch, "0/1 rewards")


# --- pg_loss -------------------------------------------------------------------------------------


def pg(s, t, mask, clip=5.0, sign=1.0, detach=True, clip_product=False, one_sided=False, mean=losses.masked_mean):
    c = float("inf") if clip is None else clip
    A = t - s
    A = A.detach() if detach else A
    if clip_product:
        return -mean((A * s).clamp(-c, c), mask)
    A = A.clamp(max=c) if one_sided else A.clamp(-c, c)
    return -sign * mean(A * s, mask)


def token_mean(x, mask):
    return (x * mask).sum() / mask.sum()


def test_pg_checker_catches_a_flipped_sign():
    fails(exercises.check_pg_loss, lambda *a, **k: pg(*a, **k, sign=-1.0), "random log-probs, clip 5")


def test_pg_checker_catches_the_clip_applied_after_multiplying_by_log_p():
    message = fails(exercises.check_pg_loss, lambda *a, **k: pg(*a, **k, clip_product=True), "the clip binds (clip 1)")
    assert "clipping the product" in message


def test_pg_checker_catches_a_clip_on_one_side_only():
    fails(exercises.check_pg_loss, lambda *a, **k: pg(*a, **k, one_sided=True), "the clip binds (clip 1)")


def test_pg_checker_catches_a_missing_stopgrad():
    message = fails(exercises.check_pg_loss, lambda *a, **k: pg(*a, **k, detach=False), "random log-probs, clip 5")
    assert "gradient w.r.t. student_logprobs" in message and "stopgrad" in message


def test_pg_checker_catches_a_token_mean_over_the_batch():
    fails(exercises.check_pg_loss, lambda *a, **k: pg(*a, **k, mean=token_mean), "masks")


def test_pg_checker_catches_clip_none_not_handled():
    def clamps_none(s, t, mask, clip=5.0):
        return -losses.masked_mean((t - s).detach().clamp(-clip, clip) * s, mask)   # -None raises
    message = fails(exercises.check_pg_loss, clamps_none, "clip = None")
    assert "raised TypeError" in message


def test_an_empty_body_fails_every_case_and_says_so():
    def empty(s, t, mask, clip=5.0):
        pass
    message = fails(exercises.check_pg_loss, empty, "random log-probs")
    assert message.count("returned None") == message.count("FAIL  ") == 5


# --- the exact reverse KL at one position --------------------------------------------------------


def forward_kl(z_S, z_T):
    log_p_S, log_p_T = z_S.log_softmax(-1), z_T.log_softmax(-1)
    return (log_p_T.exp() * (log_p_T - log_p_S)).sum()


def kl_in_bits(z_S, z_T):
    return library_kl(z_S, z_T) / torch.log(torch.tensor(2.0, dtype=z_S.dtype))


def naive_log_of_softmax(z_S, z_T):
    p_S, p_T = z_S.softmax(-1), z_T.softmax(-1)
    return (p_S * (p_S.log() - p_T.log())).sum()


def test_kl_checker_catches_the_wrong_direction():
    fails(exercises.check_reverse_kl, forward_kl, "random logits, V = 6")


def test_kl_checker_catches_bits_and_log_of_softmax():
    fails(exercises.check_reverse_kl, kl_in_bits, "random logits, V = 6")
    message = fails(exercises.check_reverse_kl, naive_log_of_softmax, "extreme logits")
    assert "log_softmax" in message
    assert "FAIL  random logits" not in message                       # right everywhere else


# --- the Top-k correction ------------------------------------------------------------------------


def topk_naive(z_S, ids, logp_T):
    log_p_S = z_S.log_softmax(-1)[ids]
    return (log_p_S.exp() * (log_p_S - logp_T)).sum()                 # the correction left out


def topk_renormalised(z_S, ids, logp_T):
    log_p_S = z_S[ids].log_softmax(-1)                                # softmax over the set only
    p_S, p_T = log_p_S.exp(), logp_T.exp()
    return (p_S * (log_p_S - logp_T) - p_S + p_T).sum()


def test_topk_checker_catches_the_correction_left_out():
    message = fails(exercises.check_topk_correction, topk_naive, "the student AT the teacher")
    assert "FAIL  the student's mass off the teacher's top-2" in message


def test_topk_checker_catches_a_renormalised_student():
    fails(exercises.check_topk_correction, topk_renormalised, "random logits, V = 8, k = 3")


# --- the reverse KL's gradient (the stuck lesson) ------------------------------------------------


def test_grad_checker_catches_the_missing_kl_term_a_flipped_sign_and_the_forward_kl():
    def no_kl_term(z_S, z_T):
        log_p_S, log_p_T = z_S.log_softmax(-1), z_T.log_softmax(-1)
        return log_p_S.exp() * (log_p_S - log_p_T)

    def forward_grad(z_S, z_T):
        return z_S.softmax(-1) - z_T.softmax(-1)

    fails(exercises.check_reverse_kl_grad, no_kl_term, "confident-wrong")
    fails(exercises.check_reverse_kl_grad, lambda a, b: -closed_form_grad(a, b), "very confident-wrong")
    fails(exercises.check_reverse_kl_grad, forward_grad, "random logits, V = 6")


def test_jsd_grad_checker_compares_with_autograd_and_catches_the_usual_mistakes():
    """check_jsd_grad's reference is autograd through JSD's definition in plain ops; it agrees with the
    library's hand-written backward (losses.jsd_loss), and fails the mixture's beta on the student, the
    reverse KL's form (M = p_T) and a missing (1 - beta)."""
    g = torch.Generator().manual_seed(0)
    z_S, z_T = torch.randn(7, generator=g, dtype=torch.float64), torch.randn(7, generator=g, dtype=torch.float64)
    for beta in (0.1, 0.5, 0.9):
        ours = exercises._autograd(exercises._plain_jsd, z_S, z_T, beta)
        z = z_S.clone().requires_grad_(True)
        losses.jsd_loss(z.view(1, 1, -1), z_T.view(1, 1, -1), torch.ones(1, 1, dtype=torch.float64), beta=beta)[0].backward()
        assert torch.allclose(ours, z.grad, atol=1e-12)
    fails(exercises.check_jsd_grad, lambda a, b, beta: closed_form_jsd_grad(a, b, beta, mixture_beta=1 - beta),
          "random logits, V = 6, beta = 0.9")
    fails(exercises.check_jsd_grad, lambda a, b, beta: closed_form_jsd_grad(a, b, beta, against_teacher=True),
          "confident-wrong")
    fails(exercises.check_jsd_grad, lambda a, b, beta: closed_form_jsd_grad(a, b, beta, scale=False),
          "random logits, V = 6, beta = 0.5")


# --- the notebooks' reference cells --------------------------------------------------------------


def stub_cells(notebook: Path) -> list[tuple[str, str]]:
    """(reference cell, the checker cell after it) for every stub of a notebook."""
    cells = json.loads(notebook.read_text())["cells"]
    code = ["".join(c["source"]) for c in cells]
    return [(code[i], code[i + 1]) for i, c in enumerate(cells)
            if c["cell_type"] == "code" and MARK in code[i]]


STUBS = {"02_teachers": ["check_group_advantages"], "03_mopd": ["check_pg_loss", "check_reverse_kl"],
         "04_loss_lab": ["check_topk_correction"], "08_stuck": ["check_jsd_grad"]}


@pytest.mark.parametrize("stem", sorted(STUBS))
def test_each_notebooks_reference_passes_its_checker(stem):
    """Run the notebook's own stub cell and the checker cell under it: they must pass together, so
    the notebook's reference and the checker cannot drift apart."""
    stubs = stub_cells(ROOT / "notebooks" / f"{stem}.ipynb")
    assert [re.search(r"exercises\.(check_\w+)\(", checker).group(1) for _, checker in stubs] == STUBS[stem]
    for reference, checker in stubs:
        assert reference.count(MARK) == 2 and "clear the body and write it yourself" in reference
        namespace: dict = {}
        exec(reference, namespace)
        exec(checker, namespace)


@pytest.mark.parametrize("stem", sorted(STUBS))
def test_a_cleared_stub_fails_its_checker(stem):
    """A student who clears the body between the marks (leaving `pass`) sees the checker fail."""
    for reference, checker in stub_cells(ROOT / "notebooks" / f"{stem}.ipynb"):
        head, _, rest = reference.partition(MARK)
        _, _, tail = rest.partition(MARK)
        indent = re.search(r"\n([ \t]*)$", head).group(1)
        namespace: dict = {}
        exec(head + "pass\n" + indent + tail, namespace)
        with pytest.raises(AssertionError, match="returned None"):
            exec(checker, namespace)
