"""The function behind notebook 08's slider (lab.stuck_gradients / stuck_curves, drawn by
plots.stuck_gradient): each loss's gradient on the stuck 5-token categorical equals its closed form,
and the three curves do what the notebook says (the reverse KL's and JSD's vanish, the forward KL's
does not)."""

import math

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

from mopd_mini import lab, plots  # noqa: E402


def closed_forms(p_wrong: float, beta: float):
    z_S = lab.stuck_logits(p_wrong)
    log_p_S = z_S.log_softmax(-1)
    log_p_T = torch.tensor(lab.STUCK_TEACHER, dtype=torch.float64).log_softmax(-1)
    p_S, p_T = log_p_S.exp(), log_p_T.exp()
    kl = (p_S * (log_p_S - log_p_T)).sum()
    M = beta * p_T + (1 - beta) * p_S
    kl_M = (p_S * (log_p_S - M.log())).sum()
    return {"reverse KL": p_S * (log_p_S - log_p_T - kl), "forward KL": p_S - p_T,
            f"JSD beta={beta:g}": (1 - beta) * p_S * (log_p_S - M.log() - kl_M)}, kl.item()


@pytest.mark.parametrize("p_wrong", [0.5, 0.9, 0.99, 0.999])
@pytest.mark.parametrize("beta", [0.1, 0.5, 0.9])
def test_each_gradient_is_its_closed_form(p_wrong, beta):
    out = lab.stuck_gradients(p_wrong, beta=beta)
    want, kl = closed_forms(p_wrong, beta)
    assert set(out["grads"]) == set(want)
    for name, g in want.items():
        assert torch.allclose(out["grads"][name], g, atol=1e-10, rtol=1e-8), name
        assert out["norms"][name] == pytest.approx(g.norm().item(), rel=1e-8)
    assert out["KL"] == pytest.approx(kl, rel=1e-10)
    assert out["p_S"][0].item() == pytest.approx(p_wrong)
    assert out["p_S"].sum().item() == pytest.approx(1.0) and out["p_T"].sum().item() == pytest.approx(1.0)


def test_the_student_logits_put_p_wrong_on_token_0():
    p = lab.stuck_logits(0.9).softmax(-1)
    assert p[0].item() == pytest.approx(0.9) and torch.allclose(p[1:], torch.full((4,), 0.025, dtype=torch.float64))
    with pytest.raises(ValueError):
        lab.stuck_logits(1.0)


def test_the_curves_show_what_the_notebook_says():
    c = lab.stuck_curves([0.5, 0.9, 0.99, 0.999], beta=0.5)
    rkl, fkl, jsd = c["reverse KL"], c["forward KL"], c["JSD beta=0.5"]
    assert all(a > b for a, b in zip(rkl, rkl[1:])), "the reverse KL's gradient falls as p_S(wrong) -> 1"
    assert all(a < b for a, b in zip(c["KL"], c["KL"][1:])), "while its value grows"
    assert rkl[-1] < rkl[0] / 100 and jsd[-1] < jsd[0] / 10, "both vanish"
    assert min(fkl) > 1 and fkl[-1] == pytest.approx(math.sqrt(0.999 ** 2 + 1), rel=0.02), \
        "the forward KL's gradient tends to ||e_wrong - e_right|| ~ sqrt(2)"


def test_jsd_at_beta_0_is_the_forward_kl():
    """TRL's convention: beta = 0 is the forward KL, the one cure whose gradient does not vanish."""
    out = lab.stuck_gradients(0.99, beta=0.0)
    assert torch.allclose(out["grads"]["JSD beta=0"], out["grads"]["forward KL"], atol=1e-10)


def test_the_plot_draws_a_curve_per_loss():
    c = lab.stuck_curves([0.5, 0.9, 0.999])
    fig = plots.stuck_gradient(c, 0.9)
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert {"reverse KL", "forward KL", "JSD beta=0.5"} <= set(labels)
    assert fig.axes[0].get_yscale() == "log"
