"""bench.scaling's pieces: the N copy domains route each row to its own teacher, and the separate
teacher models it times against score exactly what the routed adapters score."""

import pytest
import torch

from bench.common import copies, copy_name, make_bank
from bench.peers import separate_scorer
from bench.scaling import decode, encode, separate_models, teacher_names
from mopd_mini import MOPDConfig, routing
from mopd_mini.rollout import sample


@pytest.fixture(scope="module")
def four():
    return make_bank("tiny", teachers=teacher_names(4))


def test_copies_route_every_row_to_its_own_teacher(four):
    cfg = MOPDConfig.for_model("tiny", experiment=None, progress=False)
    examples, routed = copies(cfg, 4, 8)
    assert [ex.task for ex in examples] == [copy_name(i)[0] for i in range(4) for _ in range(2)]
    assert len({ex.prompt for ex in examples}) == 8                      # distinct prompts, not one copied
    assert routed.route == {copy_name(i)[0]: copy_name(i)[1] for i in range(4)}
    assert routed.loss == cfg.loss and routed.max_new_tokens == cfg.max_new_tokens
    with four.use(routed.student) as model:
        rollout = sample(model, four.tokenizer, examples, max_new_tokens=4, generator=torch.Generator().manual_seed(0))
    assert routing.route_names(four, rollout, routed.route) == [copy_name(i)[1] for i in range(4) for _ in range(2)]
    with pytest.raises(ValueError, match="does not split evenly"):
        copies(cfg, 3, 8)


def test_separate_models_score_what_the_routed_adapters_score(four):
    """The folded teacher models (W + s B A) give the routed pass's log-probs to fp32 rounding, so the
    time curve compares two ways of computing the same scores."""
    cfg = MOPDConfig.for_model("tiny", experiment=None, progress=False)
    examples, routed = copies(cfg, 4, 8)
    with four.use(routed.student) as model:
        rollout = sample(model, four.tokenizer, examples, max_new_tokens=4, generator=torch.Generator().manual_seed(0))
    routed_scores = routing.teacher_outputs(four, rollout, routed.route, k=8)
    separate = separate_scorer(separate_models(four, "tiny", 4, 0))(four, rollout, routed.route, k=8)
    mask = rollout.completion_mask.bool()
    assert (routed_scores.logprobs[mask] - separate.logprobs[mask]).abs().max() < 5e-5
    # and a wrong routing would show: teacher 0's model on every row differs
    wrong = separate_scorer({d: separate_models(four, "tiny", 1, 0)[copy_name(0)[0]] for d in routed.route})
    assert (routed_scores.logprobs[mask] - wrong(four, rollout, routed.route, k=8).logprobs[mask]).abs().max() > 1e-3


def test_results_round_trip_through_json():
    from bench.common import Timings

    t = Timings(["a"])
    t.cpu["a"], t.wall["a"] = [1.0, 2.0], [1.5, 2.5]
    back = decode(encode({"memory": {(2, 4): {"peak_rss": 7}}, 16: [t], "C": [4, 16]}))
    assert back["memory"][(2, 4)] == {"peak_rss": 7} and back["C"] == [4, 16]
    assert back[16][0].cpu == {"a": [1.0, 2.0]} and back[16][0].wall == {"a": [1.5, 2.5]}


def test_the_teachers_report_states_the_compact_rows_from_their_numbers():
    """The memory part of the teachers section, on the saved step times and fp32 rows plus made-up
    compact rows: the compact 8 / 2 ratios (measured and projected to 28 layers) are computed from the
    compact rows, printed beside the fp32 ones, and become their own summary figures."""
    import argparse
    import json

    from bench.scaling import JSON, report_teachers

    if not JSON.exists() or "teachers" not in json.loads(JSON.read_text()):
        pytest.skip("no saved teachers curve")
    res = decode(json.loads(JSON.read_text())["teachers"]["res"])
    sh = res["memory"]["shared"]
    res["memory"]["compact"] = {k: {**v, "peak_rss": v["peak_rss"] - 1_000_000 * k[0] * k[1],
                                    "teacher_bytes": v["adapter_bytes"] // 2} for k, v in sh.items()}
    co = res["memory"]["compact"]
    body, figures, plots = report_teachers(res, argparse.Namespace(layers=2), ["--curve", "teachers"])
    r2 = co[(8, 2)]["peak_rss"] / co[(2, 2)]["peak_rss"]
    at = lambda n: co[(n, 2)]["peak_rss"] + (co[(n, 4)]["peak_rss"] - co[(n, 2)]["peak_rss"]) / 2 * 26  # noqa: E731
    r28 = at(8) / at(2)
    assert figures["peak memory, 8 teachers / 2, shared base, compact teachers (bf16), Qwen3 width (2 layers, measured)"][
        "measured"] == f"{r2:.3f}x"
    assert figures["peak memory, 8 teachers / 2, shared base, compact teachers (bf16), Qwen3-1.7B size (28 layers, "
                   "projected)"]["measured"] == f"{r28:.3f}x"
    assert "peak memory, 8 teachers / 2, shared base, Qwen3 width (2 layers, measured)" in figures   # the fp32 row stays
    assert f"**{r28:.3f}x**" in body and f"{r2:.3f}x measured at 2 layers" in body
    assert "0.50 of the fp32 one" in body and "a teacher (" in body and "shared, compact teachers" in body
    del res["memory"]["compact"]                                   # a page from before: no compact rows
    body, figures, _ = report_teachers(res, argparse.Namespace(layers=2), ["--curve", "teachers"])
    assert not any("compact" in k for k in figures) and "--memory-kinds compact" in body
