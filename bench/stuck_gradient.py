"""The stuck student on one categorical: the norm of each loss's gradient with respect to the
student's logits as the student grows confident on a token the teacher rejects.

A 5-token categorical: the teacher puts almost all its mass on the right token, e^-17 relative
weight on the wrong one (the teacher's log-odds measured on arm 2's stuck position), and e^-5 on
each of three others; the student puts p_S(wrong) on the wrong token and splits the rest evenly
over the other four. For p_S(wrong) = 0.5, 0.9, 0.99, 0.999 it prints the reverse KL (the value),
and the gradient norm of the reverse KL, the forward KL and the generalised JSD at a few beta
(TRL's convention: beta = 0 the forward KL, 1 the reverse KL), each from the library's own chunked
loss (`mopd_mini.losses`) and autograd, in float64.

    python -m bench.stuck_gradient              # a second
    python -m bench.stuck_gradient --no-write

The closed forms are in losses.py's docstrings: the reverse KL's gradient p_S (log p_S - log p_T - KL)
vanishes as p_S(wrong) -> 1; the forward KL's, p_S - p_T, tends to norm ~ sqrt(2).
"""

from __future__ import annotations

import argparse
import math

import torch

from mopd_mini.losses import jsd_loss, reverse_kl, forward_kl

from .common import print_and_write, section_head

TEACHER_LOGITS = (-17.0, 0.0, -5.0, -5.0, -5.0)   # wrong, right, three others
CONFIDENCES = (0.5, 0.9, 0.99, 0.999)
BETAS = (0.1, 0.5, 0.9)


def student_logits(p_wrong: float, n: int = len(TEACHER_LOGITS)) -> torch.Tensor:
    """(1, 1, n) float64 logits: p_wrong on token 0, the rest split evenly over the others."""
    rest = (1 - p_wrong) / (n - 1)
    return torch.tensor([[[math.log(p_wrong)] + [math.log(rest)] * (n - 1)]], dtype=torch.float64)


def gradient_norm(loss_fn, p_wrong: float) -> float:
    """||d loss / d z_S|| at one position, through the library's loss and its chunked backward."""
    z = student_logits(p_wrong).requires_grad_()
    teacher = torch.tensor([[TEACHER_LOGITS]], dtype=torch.float64)
    loss, _ = loss_fn(z, teacher, torch.ones(1, 1))
    loss.backward()
    return z.grad.norm().item()


def table(confidences=CONFIDENCES, betas=BETAS) -> list[dict]:
    """One row per p_S(wrong): the reverse KL and every loss's gradient norm."""
    teacher = torch.tensor([[TEACHER_LOGITS]], dtype=torch.float64)
    rows = []
    for q in confidences:
        row = {"p_S(wrong)": q, "KL(p_S || p_T)": reverse_kl(student_logits(q), teacher, torch.ones(1, 1))[0].item(),
               "reverse KL": gradient_norm(reverse_kl, q), "forward KL": gradient_norm(forward_kl, q)}
        for beta in betas:
            row[f"JSD beta={beta}"] = gradient_norm(lambda s, t, m, b=beta: jsd_loss(s, t, m, beta=b), q)
        rows.append(row)
    return rows


def main(argv=None, write: bool = True) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    p.add_argument("--quick", action="store_true", help="the same (it takes a second); writes nothing")
    args = p.parse_args(argv)
    rows = table()
    cols = list(rows[0])
    p_T_wrong = torch.tensor(TEACHER_LOGITS).softmax(-1)[0].item()
    lines = [section_head("The stuck student: gradient norm as p_S(wrong) -> 1", "bench.stuck_gradient", argv=argv), "",
             f"A 5-token categorical: the teacher's logits {list(TEACHER_LOGITS)} (p_T(wrong) = {p_T_wrong:.1e}, the "
             "right token about 0.98), the student p_S(wrong) on the wrong token and the rest split evenly over "
             "the other four. ||d loss / d z_S|| of each of the library's losses (autograd through the chunked "
             "backward, float64); JSD in TRL's convention (beta = 0 the forward KL, 1 the reverse).", "",
             "| " + " | ".join(cols) + " |", "| " + " | ".join("---" for _ in cols) + " |"]
    for r in rows:
        lines.append("| " + " | ".join(f"{r[c]:g}" if c == "p_S(wrong)" else f"{r[c]:.4f}" for c in cols) + " |")
    first, last = rows[0], rows[-1]
    lines += ["", f"From p_S(wrong) = {first['p_S(wrong)']} to {last['p_S(wrong)']} the reverse KL grows from "
              f"{first['KL(p_S || p_T)']:.2f} to {last['KL(p_S || p_T)']:.2f} nats while its gradient falls from "
              f"{first['reverse KL']:.3f} to {last['reverse KL']:.4f}: the student is stuck. The forward KL's "
              f"gradient stays at {last['forward KL']:.3f} (its limit is about sqrt(2) = 1.414: +1 on the wrong "
              f"token, about -1 on the right one). The JSD's gradient is the reverse KL's against the mixture "
              f"M = beta p_T + (1 - beta) p_S, scaled by (1 - beta): it vanishes as well "
              f"({last['JSD beta=0.5']:.4f} at beta = 0.5), so the JSD bounds the loss but does not escape the "
              "stuck case; only its beta = 0 end, the forward KL, does.",
              "", "Each loss against its own scale (AdamW normalises the scale of a gradient over steps, not the "
              "share one position gets): the norm at p_S(wrong) = " f"{last['p_S(wrong)']} over the norm at "
              f"{first['p_S(wrong)']} is " + ", ".join(f"{c} {last[c] / first[c]:.3g}x" for c in cols[2:]) + "."]
    print_and_write("stuck_gradient", "\n".join(lines), None, write and not args.no_write and not args.quick)
    return rows


if __name__ == "__main__":
    main()
