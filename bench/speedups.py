"""Speed changes, before/after: every change made to rollout.py, teachers.py and losses.py, measured
against the code it replaced (bench/before.py holds the old code), side by side in one run.

    python -m bench.speedups                    # a few minutes; about 2 GB of RAM at peak
    python -m bench.speedups --quick            # tiny shapes, 1 repetition (smoke test)
"""

from __future__ import annotations

import argparse

import torch

from mopd_mini import GRPOConfig, MOPDConfig, teachers, train_teacher
from mopd_mini import losses as L
from mopd_mini import rollout as R
from mopd_mini.distill import mopd_objective

from . import before
from .common import (Steps, gb, make_bank, make_rollout, median, ms, peak_extra_bytes, print_and_write,
                     section_head, set_threads, side_by_side, step_examples)

# a Qwen3-1.7B vocabulary on one small layer: the (B, C, V) tensors are real size, the body is tiny
QWEN3_SMALL = dict(num_hidden_layers=1, hidden_size=64, intermediate_size=128, num_attention_heads=2,
                   num_key_value_heads=1, head_dim=32)


def timed_pair(after, old, reps: int) -> dict:
    """Median CPU times of `old` (run inside library_before) and `after`, interleaved."""
    def run_old():
        with before.library_before():
            old()
    t = side_by_side({"before": run_old, "after": after}, reps=reps, warmup=1)
    return {"before": t.median("before"), "after": t.median("after"), "ratio": t.ratio("after", "before")}


def memory_pair(after, old, reps: int) -> dict:
    """Median (seconds, peak extra bytes) of the old and new code, interleaved."""
    out = {"before": ([], []), "after": ([], [])}
    after()
    with before.library_before():
        old()
    for rep in range(reps):
        for name in (["before", "after"] if rep % 2 == 0 else ["after", "before"]):
            if name == "before":
                with before.library_before():
                    s, m = peak_extra_bytes(old)
            else:
                s, m = peak_extra_bytes(after)
            out[name][0].append(s)
            out[name][1].append(m)
    return {k: (median(v[0]), median(v[1])) for k, v in out.items()}


# ---------------------------------------------------------------------------------------------
# tiny: teacher scoring, prompt encoding, the whole step
# ---------------------------------------------------------------------------------------------


def tiny_rows(reps: int, prompts_per_domain: int, grpo_steps: int = 10) -> list[tuple]:
    cfg = MOPDConfig.for_model("tiny", experiment=None, progress=False, prompts_per_domain=prompts_per_domain)
    bank = make_bank("tiny")
    steps = Steps(bank, cfg, step_examples(cfg))
    rows = []
    with bank.use(cfg.student, trainable=True) as model:
        rollout = R.sample(model, bank.tokenizer, steps.examples, max_new_tokens=cfg.max_new_tokens,
                         generator=torch.Generator().manual_seed(0))
        score = lambda: teachers.score(bank, rollout, cfg.route)  # noqa: E731  (the old one inside library_before)
        s = timed_pair(score, score, reps)
        rows.append(("routed teacher scoring (`teachers.score`, mixed)",
                     f"tiny, {len(rollout.examples)} rows: peft's mixed-adapter batch (rows gathered and scattered "
                     "in every LoRA layer, eval()/train() over every module) -> one pass where each LoRA layer "
                     "adds each teacher's fused update to its slice of rows", s))
        prompts = [e.prompt for e in steps.examples]
        encode = lambda: R.encode_prompts(model, bank.tokenizer, prompts, 4)  # noqa: E731
        s = timed_pair(encode, encode, reps * 3)
        rows.append(("prompt encoding (`rollout.encode_prompts`)",
                     f"{len(prompts)} prompts: one tokenizer call per prompt and an attribute lookup per token -> "
                     "one batched call", s))

        grpo_examples = [ex for ex in steps.examples[:prompts_per_domain] for _ in range(8)]
        draw = lambda: R.sample(model, bank.tokenizer, grpo_examples, max_new_tokens=cfg.max_new_tokens,  # noqa: E731
                                generator=torch.Generator().manual_seed(0))
        rows.append(("GRPO rollouts (`rollout.sample`, G copies of each prompt)",
                     f"tiny, {prompts_per_domain} prompts x 8 completions: every row encoded and prefilled -> once "
                     "per distinct prompt, the KV cache then copied to its G rows", timed_pair(draw, draw, reps)))

        def fresh(fn):  # every repetition from the same student weights and sampler seed
            def go():
                steps.reset()
                fn()
            return go
        mopd = timed_pair(fresh(lambda: steps.mopd(model)), fresh(lambda: steps.mopd(model)), reps)
        sft = timed_pair(fresh(lambda: steps.sft(model)), fresh(lambda: steps.sft(model)), reps)
        rows.append(("**the whole MOPD step**", f"tiny default, {len(steps.examples)} prompts, everything above and "
                     "below together", mopd))
        rows.append(("SFT step (for the ratio)", "token_logprobs is shared with MOPD", sft))
    grpo_cfg = GRPOConfig.for_model("tiny", domain="binding", experiment=None, progress=False,
                                    steps=grpo_steps, eval_every=0)
    teacher = lambda: train_teacher(bank, grpo_cfg)  # noqa: E731
    rows.append(("GRPO teacher training (`train_teacher`)", f"tiny, {grpo_steps} steps of 8 prompts x 8 "
                 "completions, no evaluation: all of the above together", timed_pair(teacher, teacher, max(1, reps // 3))))
    ratio = {"before": mopd["before"] / sft["before"], "after": mopd["after"] / sft["after"]}
    return rows, ratio


# ---------------------------------------------------------------------------------------------
# Qwen3's vocabulary: memory of the (B, C, V) paths
# ---------------------------------------------------------------------------------------------


def qwen3_width_rows(reps: int, prompts_per_domain: int, layers: int) -> list[tuple]:
    """The LM head at Qwen3-1.7B's real width (2,048 x 151,936): the sampling prefill and the
    teachers' forward, on `layers` of the 28 layers (the head's cost does not depend on depth)."""
    bank = make_bank("qwen3-1.7b-random", shrink={"num_hidden_layers": layers})
    cfg = MOPDConfig.for_model("qwen3", experiment=None, progress=False, prompts_per_domain=prompts_per_domain)
    examples = step_examples(cfg)
    where = (f"Qwen3-1.7B width and vocabulary ({layers} of 28 layers), {len(examples)} prompts, bf16")
    rows = []
    with bank.use(cfg.student) as model:
        draw = lambda: R.sample(model, bank.tokenizer, examples, max_new_tokens=cfg.max_new_tokens,  # noqa: E731
                                generator=torch.Generator().manual_seed(0))
        rows.append(("sampling prefill (`rollout.sample`)",
                     f"{where}, {cfg.max_new_tokens} new tokens: `logits_to_keep=1` slices the hidden states to a "
                     "non-contiguous (B, 1, H) view, and torch's matmul then copies the (H, V) LM head once per "
                     "row (622 MB each) -> the last position named by index", memory_pair(draw, draw, reps)))
        rollout = draw()
    score = lambda: teachers.score(bank, rollout, cfg.route)  # noqa: E731
    rows.append(("teacher forward (`completion_logits` in `teachers.score`)",
                 f"{where}, {rollout.completion_ids.shape[1]} completion tokens: the same copy through "
                 "`logits_to_keep=C+1` -> the C positions named by index", memory_pair(score, score, reps)))
    return rows


def qwen3_vocab_rows(reps: int, B: int, C: int) -> list[tuple]:
    """The (B, C, V) paths at 16 x 64 completion tokens, on one small layer with the full vocabulary."""
    bank = make_bank("qwen3-1.7b-random", shrink=QWEN3_SMALL, dtype=torch.bfloat16)
    cfg = MOPDConfig.for_model("qwen3", experiment=None, progress=False, prompts_per_domain=max(1, B // 2))
    examples = step_examples(cfg)[:B]
    ids, mask = R.encode_prompts(bank.model, bank.tokenizer, [e.prompt for e in examples], C)
    vocab = bank.base.config.vocab_size
    comp = torch.randint(0, vocab, (len(examples), C), generator=torch.Generator().manual_seed(0))
    rollout = make_rollout(ids, mask, comp, torch.ones(len(examples), C), examples)
    where = f"{len(examples)} x {C} completion tokens, V = {vocab:,}, bf16 (one small layer)"
    rows = []
    score = lambda: teachers.score(bank, rollout, cfg.route)  # noqa: E731
    rows.append(("teacher summaries (`teachers.summarise`)",
                 f"{where}: a (B, C, V) fp32 copy for the log-sum-exp -> `log_softmax_at`, chunked",
                 memory_pair(score, score, reps)))
    g = torch.Generator().manual_seed(0)
    z_S = (torch.randn(len(examples), C, vocab, generator=g) * 2).bfloat16().requires_grad_()
    z_T = (torch.randn(len(examples), C, vocab, generator=g) * 2).bfloat16()
    ones = torch.ones(len(examples), C)
    top_lp, top_ids = z_T.float().log_softmax(-1).topk(64, dim=-1)

    def backward_of(loss_fn):
        def go():
            z_S.grad = None
            loss_fn()[0].backward()
        return go
    topk = backward_of(lambda: L.topk_reverse_kl(z_S, top_ids, top_lp, ones))
    rows.append(("`losses.topk_reverse_kl`, forward + backward", f"{where}, k = 64: a (B, C, V) fp32 upcast and "
                 "autograd's log-sum-exp (a (B, C, V) softmax in backward) -> `log_softmax_at`, a chunk of rows "
                 "at a time", memory_pair(topk, topk, reps)))
    exact = backward_of(lambda: L.reverse_kl(z_S, z_T, ones))
    rows.append(("`losses.reverse_kl`, forward + backward", f"{where}: 64 MB chunks -> 4 MB chunks",
                 memory_pair(exact, exact, reps)))
    del z_S, z_T
    with bank.use(cfg.student, trainable=True) as model:
        for loss in ("pg", "topk"):
            teacher = teachers.score(bank, rollout, cfg.route)
            lcfg = MOPDConfig.for_model("qwen3", experiment=None, progress=False, loss=loss)

            def student(lcfg=lcfg, teacher=teacher):
                model.train()
                logits = R.completion_logits(model, rollout)
                model.eval()
                objective, _ = mopd_objective(lcfg, logits, rollout, teacher)
                objective.backward()
                model.zero_grad(set_to_none=True)

            rows.append((f"student side of a step, loss `{loss}`",
                         f"{where}: completion_logits + mopd_objective (all three forms, as the trainer logs "
                         "them) + backward: (B, C, V) fp32 copies in token_logprobs and topk_reverse_kl, a copy "
                         "of the non-contiguous logits slice, 64 MB reverse_kl chunks -> none of those",
                         memory_pair(student, student, reps)))
    return rows


def fmt(entry) -> tuple[str, str, str]:
    if "ratio" in entry:
        return ms(entry["before"]), ms(entry["after"]), f"{entry['ratio']:.2f}x time"
    (tb, mb), (ta, ma) = entry["before"], entry["after"]
    return (f"{gb(mb)}, {ms(tb)}", f"{gb(ma)}, {ms(ta)}", f"{ma / mb:.2f}x memory, {ta / tb:.2f}x time")


def main(argv=None, write: bool = True):
    p = argparse.ArgumentParser(description="before/after of each speed change")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--layers", type=int, default=2, help="Qwen3 layers for the LM-head rows (of 28)")
    p.add_argument("--quick", action="store_true", help="small shapes, 1 repetition (smoke test)")
    p.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = p.parse_args(argv)
    set_threads(args.threads)
    if args.quick:
        tiny, ratio = tiny_rows(1, 2, grpo_steps=1)
        big = qwen3_vocab_rows(1, 2, 4)
    else:
        tiny, ratio = tiny_rows(args.reps, 8)
        big = qwen3_width_rows(2, 2, args.layers) + qwen3_vocab_rows(3, 16, 64)
    lines = [section_head("Speed changes, before / after", "bench.speedups", argv=argv), "",
             f"Each change against the code it replaced (kept in `bench/before.py`, from commit {before.COMMIT}), "
             "interleaved in one run; CPU time (process_time) medians, peak extra memory as in the loss-memory "
             "section. Results are unchanged by every change up to floating-point rounding (the test suite "
             "compares them to 1e-5, and each loss to the exact quantity it computes or estimates).", "",
             "| change | what and where | before | after | after / before |", "| --- | --- | --- | --- | --- |"]
    for name, what, entry in tiny + big:
        b, a, r = fmt(entry)
        lines.append(f"| {name} | {what} | {b} | {a} | {r} |")
    lines += ["", f"MOPD step / SFT step, tiny: **{ratio['before']:.2f}x before, {ratio['after']:.2f}x after** "
              "(the ratio of the medians here; the step section's figure is the median of per-repetition ratios).",
              "", PROPOSALS]
    print_and_write("speedups", "\n".join(lines), None, write and not args.no_write and not args.quick)


PROPOSALS = """**Changes this page argued for, and what became of them:**

1. *Build the random Qwen3 directly in bf16* (`models._random_qwen3`): **made.** It used to build
   the 1.7B model in fp32 and cast, so loading peaked near 8 GB before settling at 3.5 GB; it now
   builds in bf16 (`from_config(..., dtype=)`), and the real-size section's load peak is about 4 GB.
2. *Activation checkpointing of the student's forward at the Qwen3 size*: **made**, behind the
   config flag `gradient_checkpointing` (`MOPDConfig`, `GRPOConfig`), which the Qwen3 presets turn
   on and the tiny presets leave off (`AdapterBank.set_checkpointing`). It acts in train mode only,
   so sampling and teacher scoring are untouched; the real-size section measures the step with and
   without it, and the GPU script does the same.
3. *Reuse the sampling prefill for the student's training forward* (`distill.train_student` and
   `rollout.sample`): **not made.** Run the student's prompt prefill once in train mode with grad,
   sample from it (decode steps under `no_grad` from a detached copy of its KV cache), then compute
   the training logits with one forward over the C completion tokens on top of the grad-carrying
   prompt cache. It would remove one full prompt forward per step, the largest cost that MOPD adds
   (see the step section's projection), with on-policy unchanged when LoRA dropout is 0. Left out
   because it fuses sampling and the training forward into one piece of code, and the course reads
   them as separate steps; the tiny step already meets its 2x goal without it.
4. *`max_new_tokens=3` for the tiny preset*: **not made.** A FactWorld answer is a token, a period
   and EOS; a budget of 4 only lets a sample that has not stopped run one more decode step (about
   2% of a tiny MOPD step), and such a sample earns no reward either way. Too small a gain to be
   worth a budget that no longer fits a one-token answer with room to spare."""


if __name__ == "__main__":
    main()
