"""Write it yourself, checked: the course's exercises that say whether a student's function is right.

Each checker calls the student's function and the library's on the same random and edge-case
inputs, case by case, and compares values (and, where the lesson is about a gradient, gradients).

    check_group_advantages(fn)    GRPO's group-normalised advantage, notebook 02.
                                  fn(rewards (P, G), eps=1e-6) -> (advantages (P, G), keep (P,))
                                  as `losses.group_advantages`.
    check_pg_loss(fn)             MOPD-PG with the clip, notebook 03.
                                  fn(student_logprobs, teacher_logprobs, mask, clip=5.0) -> loss
                                  (or (loss, info)) as `losses.pg_loss`; the loss's value AND its
                                  gradient w.r.t. student_logprobs are compared (the stopgrad).
    check_reverse_kl(fn)          the exact reverse KL at one position, in nats, notebook 03.
                                  fn(student_logits (V,), teacher_logits (V,)) -> KL(p_S || p_T),
                                  as `losses.reverse_kl` on one position.
    check_topk_correction(fn)     MOPD-Top-k at one position, with its `- p_S + p_T` correction,
                                  notebook 04. fn(student_logits (V,), topk_ids (k,),
                                  topk_logprobs (k,)) -> the loss, as `losses.topk_reverse_kl`
                                  on one position; value and gradient w.r.t. the logits compared.
    check_reverse_kl_grad(fn)     the reverse KL's gradient w.r.t. the student's logits, in closed
                                  form, on confident-wrong categoricals among others.
                                  fn(student_logits (V,), teacher_logits (V,)) -> (V,) gradient,
                                  g_v = p_S(v) (log p_S(v) - log p_T(v) - KL), checked against
                                  autograd through the KL's definition in plain torch ops (not the
                                  library's loss, whose backward is written by hand).
    check_jsd_grad(fn)            the generalised JSD's gradient w.r.t. the student's logits, in
                                  closed form, notebook 08. fn(student_logits (V,), teacher_logits
                                  (V,), beta) -> (V,) gradient, g_v = (1 - beta) p_S(v) (log(p_S(v) /
                                  M(v)) - KL(p_S || M)), M = beta p_T + (1 - beta) p_S, checked
                                  against autograd through JSD's definition in plain torch ops.

Every checker runs all of its cases, then either returns a `Report` (its repr: one PASS line per
case) or, if any case fails, raises an AssertionError whose message is that same report: a
PASS / FAIL line per case, and under each FAIL what was expected, what came back and a hint. A
function that raises, or returns None (a body left empty), fails each case with that said.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import Tensor

from . import losses

DTYPE = torch.float64
"""every checker feeds float64 inputs, so a right answer agrees with the library to ~1e-12"""
RTOL, ATOL = 1e-5, 1e-7
"""how close a student's number must be to the library's (loose enough for float32 arithmetic)"""


@dataclass
class Report:
    """The outcome of one checker: (case, passed, detail) per case."""

    name: str
    cases: list[tuple[str, bool, str]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(ok for _, ok, _ in self.cases)

    def failed(self) -> list[str]:
        """The names of the cases that failed."""
        return [case for case, ok, _ in self.cases if not ok]

    def __repr__(self) -> str:
        n_ok = sum(ok for _, ok, _ in self.cases)
        lines = [f"{self.name}: {n_ok} of {len(self.cases)} cases PASS"]
        for case, ok, detail in self.cases:
            lines.append(f"  {'PASS' if ok else 'FAIL'}  {case}")
            if not ok:
                lines += [f"        {line}" for line in detail.splitlines()]
        return "\n".join(lines)


class _Mismatch(Exception):
    """One comparison in a case failed; the message says which and how."""


def _tensor(x, what: str) -> Tensor:
    if x is None:
        raise _Mismatch(f"{what}: the function returned None (is its body still empty?)")
    if not isinstance(x, Tensor):
        try:
            x = torch.as_tensor(x)
        except Exception:
            raise _Mismatch(f"{what}: expected a tensor, got {type(x).__name__}") from None
    return x


def _fmt(t: Tensor) -> str:
    t = t.detach().double()
    if t.numel() == 1:
        return f"{t.item():.6g}"
    return str([round(v, 4) for v in t.flatten().tolist()][:12])


def _compare(got, expected: Tensor, what: str, hint: str = "") -> None:
    """Raise _Mismatch unless `got` has `expected`'s shape and values (to RTOL, ATOL)."""
    got = _tensor(got, what)
    if got.numel() == 1 and expected.numel() == 1:
        got, expected = got.reshape(()), expected.reshape(())
    if tuple(got.shape) != tuple(expected.shape):
        raise _Mismatch(f"{what}: shape {tuple(got.shape)}, expected {tuple(expected.shape)}")
    got = got.detach().to(DTYPE)
    if not torch.isfinite(got).all() and torch.isfinite(expected).all():
        raise _Mismatch(f"{what}: got {_fmt(got)} (not finite), expected {_fmt(expected)}"
                        + (f"\nhint: {hint}" if hint else ""))
    if not torch.allclose(got, expected.detach().to(DTYPE), rtol=RTOL, atol=ATOL):
        raise _Mismatch(f"{what}: got {_fmt(got)}, expected {_fmt(expected)}" + (f"\nhint: {hint}" if hint else ""))


def _run(name: str, cases: list[tuple[str, Callable[[], None]]]) -> Report:
    """Run every case; return the Report if all pass, else raise AssertionError(the report)."""
    report = Report(name)
    for case, check in cases:
        try:
            check()
            report.cases.append((case, True, ""))
        except _Mismatch as e:
            report.cases.append((case, False, str(e)))
        except Exception as e:                                   # the student's function raised
            report.cases.append((case, False, f"the function raised {type(e).__name__}: {e}"))
    if not report.passed:
        raise AssertionError("\n" + repr(report))
    return report


def _first(out):
    """A loss function may return loss or (loss, info): the loss."""
    return out[0] if isinstance(out, (tuple, list)) else out


# --- GRPO's group-normalised advantage (notebook 02) --------------------------------------------


def check_group_advantages(fn: Callable) -> Report:
    """fn(rewards, eps=1e-6) -> (advantages, keep), compared with `losses.group_advantages`:

        A_pg = (r_pg - mean_g r_p) / (std_g r_p + eps)   (population std),   keep_p = some r_pg differs

    and A = 0 exactly in a group whose rewards are all equal."""
    g = torch.Generator().manual_seed(0)
    binary = (torch.rand(4, 8, generator=g) < 0.4).to(DTYPE)
    binary[:, 0], binary[:, 1] = 1.0, 0.0                        # every group mixed
    graded = torch.rand(3, 5, generator=g, dtype=DTYPE)

    def case(rewards: Tensor, eps: float | None = None, hint: str = ""):
        def check():
            expected_A, expected_keep = losses.group_advantages(rewards, **({} if eps is None else {"eps": eps}))
            out = fn(rewards.clone(), **({} if eps is None else {"eps": eps}))
            if out is None:
                raise _Mismatch("the function returned None (is its body still empty?)")
            if not isinstance(out, (tuple, list)) or len(out) != 2:
                raise _Mismatch(f"expected (advantages, keep), got {type(out).__name__}")
            _compare(out[0], expected_A, "advantages", hint)
            keep = _tensor(out[1], "keep")
            if keep.shape != expected_keep.shape or not torch.equal(keep.bool(), expected_keep):
                raise _Mismatch(f"keep: got {keep.tolist()}, expected {expected_keep.tolist()}\n"
                                "hint: keep a group when its rewards are not all equal")
        return check

    all_equal = torch.tensor([[1.0, 0, 0, 1], [1.0, 1, 1, 1], [0.0, 0, 0, 0]], dtype=DTYPE)
    return _run("check_group_advantages", [
        ("0/1 rewards, 4 groups of 8", case(binary, hint="normalise each ROW (one prompt's group) by its own mean "
                                                         "and population std (std(correction=0))")),
        ("graded rewards in [0, 1], 3 groups of 5", case(graded, hint="population std: divide by G, not G - 1")),
        ("groups with all-equal rewards (all right, all wrong): A = 0 exactly, keep = False",
         case(all_equal, hint="a zero-variance group has no signal: its advantages are 0 and keep is False "
                   "(without the eps, 0 / 0 = nan)")),
        ("one group", case(binary[:1], hint="rewards is (P, G) even when P = 1: reduce over dim 1")),
        ("eps = 0.5 (added to the std, outside the square root)",
         case(torch.tensor([[1.0, 0.0], [0.3, 0.1]], dtype=DTYPE), eps=0.5,
              hint="A = (r - mean) / (std + eps), with the eps the caller gives")),
    ])


# --- MOPD-PG with the clip (notebook 03) --------------------------------------------------------


def check_pg_loss(fn: Callable) -> Report:
    """fn(student_logprobs, teacher_logprobs, mask, clip=5.0) -> loss (or (loss, info)), compared
    with `losses.pg_loss` in value and in its gradient w.r.t. student_logprobs:

        A_t = stopgrad(log pi_T(y_t) - log pi_S(y_t)),   L = - masked_mean(clip(A_t, -c, c) log pi_S(y_t))"""
    g = torch.Generator().manual_seed(1)

    def logprobs(B, T, low=0.02):
        return torch.rand(B, T, generator=g, dtype=DTYPE).clamp(min=low).log()   # (B, T) log of a prob

    def case(s: Tensor, t: Tensor, mask: Tensor, clip, hint: str):
        def check():
            s_lib = s.clone().requires_grad_(True)
            expected, _ = losses.pg_loss(s_lib, t, mask, clip=clip)
            expected.backward()
            s_st = s.clone().requires_grad_(True)
            got = _first(fn(s_st, t.clone(), mask.clone(), clip=clip))
            _compare(got, expected, "loss", hint)
            got = _tensor(got, "loss")
            if not got.requires_grad:
                raise _Mismatch("the loss has no gradient w.r.t. student_logprobs\n"
                                "hint: the loss multiplies the (detached) advantage by log pi_S(y_t), which keeps its grad")
            (grad,) = torch.autograd.grad(got.sum(), s_st, allow_unused=True)
            _compare(torch.zeros_like(s) if grad is None else grad, s_lib.grad,
                     "gradient w.r.t. student_logprobs",
                     "the advantage is a constant (stopgrad: .detach()), so dL/dlog pi_S(y_t) = -clip(A_t)/L_b/B")
        return check

    s, t = logprobs(3, 4), logprobs(3, 4)
    full = torch.ones(3, 4, dtype=DTYPE)
    ragged = torch.tensor([[1.0, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]], dtype=DTYPE)
    s_pad, t_pad = s.clone(), t.clone()
    s_pad[ragged == 0], t_pad[ragged == 0] = -30.0, 0.0           # padding that must not count
    confident = torch.tensor([[-0.01, -3.0]], dtype=DTYPE)         # student's two tokens
    teacher_disagrees = torch.tensor([[-4.0, -0.05]], dtype=DTYPE)  # A = -3.99 (clipped to -1), +2.95
    return _run("check_pg_loss", [
        ("random log-probs, clip 5 (the clip does not bind)", case(
            s, t, full, 5.0, "L = - mean( A_t * log pi_S(y_t) ) with A_t = log pi_T(y_t) - log pi_S(y_t): "
                             "check the sign of A and of the loss")),
        ("clip = None (no clip)", case(s, t, full, None, "clip=None means no clip at all")),
        ("the clip binds (clip 1): clip the ADVANTAGE, then multiply by log pi_S", case(
            confident, teacher_disagrees, torch.ones(1, 2, dtype=DTYPE), 1.0,
            "A_clip = A.clamp(-c, c) and L = -masked_mean(A_clip * log pi_S); clipping the product "
            "A * log pi_S is a different loss")),
        ("a tight clip (0.1) on random log-probs", case(s, t, full, 0.1, "clip A to [-c, c] on both sides")),
        ("masks: sequences of 4, 2 and 1 tokens, padding set to garbage", case(
            s_pad, t_pad, ragged, 5.0, "use losses.masked_mean(x, mask): token mean within each sequence, "
                                       "then mean over sequences; masked-out tokens must not count")),
    ])


# --- the exact reverse KL at one position (notebook 03) -----------------------------------------


def _reverse_kl_lib(z_S: Tensor, z_T: Tensor) -> Tensor:
    one = torch.ones(1, 1, dtype=DTYPE)
    return losses.reverse_kl(z_S.view(1, 1, -1), z_T.view(1, 1, -1), one)[0]


def check_reverse_kl(fn: Callable) -> Report:
    """fn(student_logits (V,), teacher_logits (V,)) -> KL(p_S || p_T) in nats, compared with
    `losses.reverse_kl` at one position:  KL = sum_v p_S(v) (log p_S(v) - log p_T(v))."""
    g = torch.Generator().manual_seed(2)
    z_S, z_T = torch.randn(6, generator=g, dtype=DTYPE) * 2, torch.randn(6, generator=g, dtype=DTYPE) * 2

    def case(a: Tensor, b: Tensor, hint: str):
        def check():
            _compare(fn(a.clone(), b.clone()), _reverse_kl_lib(a, b), "KL", hint)
        return check

    return _run("check_reverse_kl", [
        ("random logits, V = 6", case(z_S, z_T, "reverse KL: the expectation is under the STUDENT, "
                                                "sum_v p_S(v) (log p_S(v) - log p_T(v)), natural log")),
        ("a confident student, V = 6", case(torch.tensor([6.0, 0, 0, 0, 0, -2], dtype=DTYPE), z_T,
                                            "KL(p_S || p_T), not KL(p_T || p_S): they differ when p_S is peaked")),
        ("identical distributions: KL = 0", case(z_S, z_S.clone(), "KL(p || p) = 0")),
        ("logits shifted by a constant (same distributions as the first case)", case(
            z_S + 7.0, z_T - 3.0, "turn logits into log-probs first: log_softmax, not the raw logits")),
        ("extreme logits (a gap of 1000 between the largest and smallest)", case(
            torch.tensor([500.0, -500, 0], dtype=DTYPE), torch.tensor([0.0, 0, 0], dtype=DTYPE),
            "log(softmax(z)) underflows to log 0 = -inf and 0 * -inf = nan: use torch.log_softmax")),
    ])


# --- the Top-k bias correction (notebook 04) ----------------------------------------------------


def _topk_lib(z_S: Tensor, ids: Tensor, logp_T: Tensor) -> Tensor:
    one = torch.ones(1, 1, dtype=DTYPE)
    return losses.topk_reverse_kl(z_S.view(1, 1, -1), ids.view(1, 1, -1), logp_T.view(1, 1, -1), one)[0]


def check_topk_correction(fn: Callable) -> Report:
    """fn(student_logits (V,), topk_ids (k,), topk_logprobs (k,)) -> the corrected Top-k loss at one
    position, compared with `losses.topk_reverse_kl` in value and gradient w.r.t. the logits:

        sum_{v in TopK_T} [ p_S(v) (log p_S(v) - log p_T(v)) - p_S(v) + p_T(v) ]

    with p_S the student's full-vocabulary softmax gathered at the set (not renormalised)."""
    g = torch.Generator().manual_seed(3)
    z_T = torch.randn(8, generator=g, dtype=DTYPE) * 2

    def top(z: Tensor, k: int):
        ids = z.topk(k).indices
        return ids, z.log_softmax(-1)[ids]

    def case(z_S: Tensor, k: int, hint: str, teacher: Tensor = z_T):
        ids, logp_T = top(teacher, k)

        def check():
            z_lib = z_S.clone().requires_grad_(True)
            expected = _topk_lib(z_lib, ids, logp_T)
            expected.backward()
            z_st = z_S.clone().requires_grad_(True)
            got = _first(fn(z_st, ids.clone(), logp_T.clone()))
            _compare(got, expected, "loss", hint)
            got = _tensor(got, "loss")
            if not got.requires_grad:
                raise _Mismatch("the loss has no gradient w.r.t. the student's logits")
            (grad,) = torch.autograd.grad(got.sum(), z_st, allow_unused=True)
            _compare(torch.zeros_like(z_S) if grad is None else grad, z_lib.grad, "gradient w.r.t. the logits", hint)
        return check

    z_S = torch.randn(8, generator=g, dtype=DTYPE) * 2
    off_set = z_T.clone()
    off_set[z_T.topk(2).indices] -= 4.0                           # the student has left the teacher's top-2
    return _run("check_topk_correction", [
        ("random logits, V = 8, k = 3", case(z_S, 3, "each summand is p_S (log p_S - log p_T) - p_S + p_T, "
                                                     "p_S from the full-vocabulary softmax (not renormalised on the set)")),
        ("the student AT the teacher (p_S = p_T): loss 0 and gradient 0", case(
            z_T.clone(), 3, "without - p_S + p_T the gradient at p_S = p_T is not 0: the correction is what puts "
                            "the minimum at the teacher")),
        ("the student's mass off the teacher's top-2", case(
            off_set, 2, "the naive sum goes negative here; the corrected one is >= 0 (each summand is a "
                        "generalised KL term)")),
        ("k = 1", case(z_S, 1, "the set is the teacher's single top token")),
        ("k = V (the full vocabulary)", case(z_S, 8, "over the full vocabulary the correction sums to 0 and "
                                                     "the loss is the exact reverse KL")),
    ])


# --- the reverse KL's gradient w.r.t. the logits (the stuck lesson) ------------------------------


def _plain_reverse_kl(z_S: Tensor, z_T: Tensor) -> Tensor:
    """KL(p_S || p_T) at one position from its definition, in plain torch ops (autograd differentiates
    it; `losses.reverse_kl` has a hand-written backward, which is what a checker must not trust)."""
    log_p_S, log_p_T = z_S.log_softmax(-1), z_T.log_softmax(-1)
    return (log_p_S.exp() * (log_p_S - log_p_T)).sum()


def _plain_jsd(z_S: Tensor, z_T: Tensor, beta: float) -> Tensor:
    """The generalised JSD at one position from its definition (TRL's convention, beta on the teacher):
    beta KL(p_T || M) + (1 - beta) KL(p_S || M), M = beta p_T + (1 - beta) p_S; plain torch ops."""
    log_p_S, log_p_T = z_S.log_softmax(-1), z_T.log_softmax(-1)
    p_S, p_T = log_p_S.exp(), log_p_T.exp()
    log_M = (beta * p_T + (1 - beta) * p_S).log()
    return beta * (p_T * (log_p_T - log_M)).sum() + (1 - beta) * (p_S * (log_p_S - log_M)).sum()


def _autograd(loss: Callable, z_S: Tensor, *args) -> Tensor:
    z = z_S.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(loss(z, *args), z)
    return grad


def check_reverse_kl_grad(fn: Callable) -> Report:
    """fn(student_logits (V,), teacher_logits (V,)) -> dKL(p_S || p_T)/dz_S (V,), compared with
    autograd through the KL's definition in plain torch ops (`_plain_reverse_kl`); the closed form is

        g_v = p_S(v) (log p_S(v) - log p_T(v) - KL)."""

    def autograd_grad(z_S: Tensor, z_T: Tensor) -> Tensor:
        return _autograd(_plain_reverse_kl, z_S, z_T)

    def case(z_S: Tensor, z_T: Tensor, hint: str):
        def check():
            _compare(fn(z_S.clone(), z_T.clone()), autograd_grad(z_S, z_T), "gradient", hint)
        return check

    g = torch.Generator().manual_seed(4)
    z_S, z_T = torch.randn(6, generator=g, dtype=DTYPE) * 2, torch.randn(6, generator=g, dtype=DTYPE) * 2
    wrong = torch.tensor([6.0, 0, 0, 0, 0], dtype=DTYPE)          # the student: p_S(0) = 0.99
    right = torch.tensor([0.0, 6, 0, 0, 0], dtype=DTYPE)          # the teacher: p_T(1) = 0.99
    return _run("check_reverse_kl_grad", [
        ("random logits, V = 6", case(z_S, z_T, "g_v = p_S(v) (log p_S(v) - log p_T(v) - KL): "
                                                "the derivative w.r.t. the LOGITS, through the softmax")),
        ("confident-wrong: the student puts 0.99 on token 0, the teacher 0.99 on token 1", case(
            wrong, right, "keep the - KL term: the gradient over the vocabulary sums to 0 (the softmax's "
                          "Jacobian), and it is what makes g small on the student's own confident token")),
        ("very confident-wrong (a gap of 12 logits)", case(
            wrong * 2, right * 2, "the gradient on every token is tiny: a small p_S(v) multiplies each term")),
        ("the student at the teacher: gradient 0", case(z_T.clone(), z_T.clone(), "at p_S = p_T every term is 0")),
    ])


def check_jsd_grad(fn: Callable) -> Report:
    """fn(student_logits (V,), teacher_logits (V,), beta) -> dJSD_beta/dz_S (V,), compared with autograd
    through JSD's definition in plain torch ops (`_plain_jsd`; not `losses.jsd_loss`, whose backward is
    written by hand); the closed form is

        g_v = (1 - beta) p_S(v) (log(p_S(v) / M(v)) - KL(p_S || M)),   M = beta p_T + (1 - beta) p_S."""

    def case(z_S: Tensor, z_T: Tensor, beta: float, hint: str):
        def check():
            _compare(fn(z_S.clone(), z_T.clone(), beta), _autograd(_plain_jsd, z_S, z_T, beta), "gradient", hint)
        return check

    g = torch.Generator().manual_seed(6)
    z_S, z_T = torch.randn(6, generator=g, dtype=DTYPE) * 2, torch.randn(6, generator=g, dtype=DTYPE) * 2
    wrong = torch.tensor([6.0, 0, 0, 0, 0], dtype=DTYPE)          # the student: p_S(0) = 0.99
    teacher = torch.tensor([-17.0, 0, -5, -5, -5], dtype=DTYPE)   # 08's stuck categorical's teacher
    return _run("check_jsd_grad", [
        ("random logits, V = 6, beta = 0.5", case(z_S, z_T, 0.5, "M = beta p_T + (1 - beta) p_S: beta weighs the "
                                                                 "TEACHER (TRL's convention), and the bracket's KL is "
                                                                 "KL(p_S || M)")),
        ("random logits, V = 6, beta = 0.9", case(z_S, z_T, 0.9, "the whole gradient carries the factor (1 - beta)")),
        ("confident-wrong (p_S(wrong) = 0.99, the teacher e^-17 there), beta = 0.1", case(
            wrong, teacher, 0.1, "log(p_S / M), not log(p_S / p_T): against the mixture, the wrong token's M stays "
                                 "near (1 - beta) p_S")),
        ("confident-wrong, beta = 0.5", case(wrong, teacher, 0.5, "keep the - KL(p_S || M) term: the gradient "
                                                                   "sums to 0 over the vocabulary")),
        ("the student at the teacher: gradient 0", case(z_T.clone(), z_T.clone(), 0.5, "at p_S = p_T, M = p_S and "
                                                                                       "every term is 0")),
    ])


# every public function (and class method) of this module: its annotated arguments checked at a call from outside
# the package (mopd_mini.validate.guard_public); the package's own calls, e.g. the training loop's, skip the checks
from .validate import guard_public  # noqa: E402

guard_public(globals())
