"""bf16's noise floor in MOPD's advantage: the student scored against ITSELF as teacher.

MOPD's signal is a difference of two log-probabilities of the same token, A_t = log pi_T(y_t) -
log pi_S(y_t), and late in a run the per-token reverse KL is 0.01-0.07 nats (docs/results.md). The
teacher's log-probs come from its routed pass (`routing.teacher_outputs`, mixed or swap: one forward over
prompt + completion), the student's from its training forward (`completion_logits`: on the
sampler's own prompt prefill when the trainer reuses it, `rollout.prefill_reusable`, else a
whole forward in train mode), and the sampler's from its decode steps. In bf16 those are different
roundings of the same function. Here the student adapter is an exact COPY of the teacher (both
teachers are copies of one adapter, so the two-teacher routed pass runs too), so every nat of A is
noise, through exactly the paths `train_student` takes:

    mean and max |A_t| over the completion tokens, for each pair of paths
    the exact reverse KL(student || teacher) per token (`losses.reverse_kl`), what the trainer logs
    the norm of the chosen loss's gradient, against the same step's gradient with the student
    fresh at the base (a real first step; its KL beside it)

in two settings: the Qwen3 preset (activation checkpointing on, so the trainer runs a whole
training forward) and checkpointing off (the trainer then trains on the sampler's prefill, unless
`prefill_reusable` refuses it: in bf16 it does, because of this floor; `--allow-reuse` measures
the path it refuses, with the LM head in bf16 and in fp32). Qwen3-1.7B's width and vocabulary (hidden 2048, V = 151,936), `--layers`
of its 28 layers (2 by default), random weights, bf16, on this CPU.

    python -m bench.bf16_floor                  # about 3 minutes on 2 cores, 3 GB of RAM
    python -m bench.bf16_floor --allow-reuse    # also the refused path (the floor before the fix)
    python -m bench.bf16_floor --quick          # one small layer, full vocabulary (smoke test)
"""

from __future__ import annotations

import argparse
import time
from contextlib import contextmanager

import torch

from .common import gb, make_bank, ms, peak_extra_bytes, print_and_write, section_head, set_threads, step_examples

SMALL = dict(num_hidden_layers=1, hidden_size=64, intermediate_size=128, num_attention_heads=2,
             num_key_value_heads=1, head_dim=32)
GOAL_A, GOAL_GRAD = 1e-3, 1e-3
PAIRS = (("mixed", "train"), ("swap", "train"), ("sampler", "train"), ("mixed", "swap"))


def twins(bank, teacher: str = "teacher_binding") -> None:
    """Both teachers and the student become copies of one adapter: every A_t is then noise."""
    bank.copy(teacher, "teacher_recall")
    bank.copy(teacher, "student")


@contextmanager
def fp32_head(base, on: bool = True):
    """Inside: the LM head multiplies in fp32 (the bf16 hidden states upcast, fp32 logits out)."""
    head = base.get_output_embeddings()
    if on:
        head.forward = lambda h: torch.nn.functional.linear(h.float(), head.weight.float())
    try:
        yield
    finally:
        if on:
            del head.forward


def measure(bank, cfg, checkpointing: bool, allow_reuse: bool = False, fp32_logits: bool = False) -> dict:
    """One step's paths with student = teacher (and the same step with a fresh student, for scale)."""
    with fp32_head(bank.base, fp32_logits):
        return _measure(bank, cfg, checkpointing, allow_reuse)


def _measure(bank, cfg, checkpointing: bool, allow_reuse: bool) -> dict:
    from mopd_mini import rollout as rollouts
    from mopd_mini import routing
    from mopd_mini.distill import mopd_objective
    from mopd_mini.losses import masked_mean
    from mopd_mini.rollout import completion_logits, sample, token_logprobs
    from mopd_mini.runs import train_mode

    bank.set_checkpointing(checkpointing)
    params = list(bank.parameters("student").values())
    with bank.use("student", trainable=True) as model:
        reuse = rollouts.prefill_reusable(model, checkpointing)           # as train_student decides
        if allow_reuse and not checkpointing:
            reuse = True
        rollout = sample(model, bank.tokenizer, step_examples(cfg), temperature=cfg.temperature,
                         max_new_tokens=cfg.max_new_tokens, generator=torch.Generator().manual_seed(0),
                         grad_prefill=reuse)
        scores = {m: routing.teacher_outputs(bank, rollout, cfg.route, mode=m, k=cfg.topk) for m in ("mixed", "swap")}

        def objective(teacher):
            with train_mode(model, enabled=not reuse):
                logits = completion_logits(model, rollout, prefill=rollout.prefill)
            return logits, mopd_objective(cfg, logits, rollout, teacher)

        logits, (loss, info) = objective(scores[cfg.scoring])
        grad = torch.autograd.grad(loss, params, allow_unused=True)
    mask = rollout.completion_mask.bool()
    logp = {"train": token_logprobs(logits.detach(), rollout.completion_ids), "sampler": rollout.sample_logprobs,
            **{m: s.logprobs for m, s in scores.items()}}
    out = {"reuse": reuse, "shape": tuple(rollout.input_ids.shape), "tokens": int(mask.sum()),
           "kl": masked_mean(info["kl"], rollout.completion_mask).item(),
           "grad": _norm(grad), "loss": cfg.loss}
    for a, b in PAIRS:
        d = (logp[a] - logp[b])[mask].abs()
        out[f"{a}-{b}"] = (d.mean().item(), d.max().item())
    # the same step with a fresh student (at the base): a real first step's gradient and KL
    bank.create("fresh", seed=0)
    with bank.use("fresh", trainable=True) as model:
        with train_mode(model):
            fresh_logits = completion_logits(model, rollout)
        loss, info = mopd_objective(cfg, fresh_logits, rollout, scores["mixed"])
        out["real_grad"] = _norm(torch.autograd.grad(loss, list(bank.parameters("fresh").values()), allow_unused=True))
        out["real_kl"] = masked_mean(info["kl"], rollout.completion_mask).item()
    return out


def _norm(grads) -> float:
    return torch.sqrt(sum((g.float() ** 2).sum() for g in grads if g is not None)).item()


def cost_of_the_fix(bank, cfg) -> dict:
    """What refusing the prefill costs, checkpointing off: the student's training forward + backward
    on the sampler's prefill (reuse) against a whole training forward (the fix), time and peak RSS."""
    from mopd_mini.distill import mopd_objective
    from mopd_mini import routing
    from mopd_mini.rollout import completion_logits, sample
    from mopd_mini.runs import train_mode

    bank.set_checkpointing(False)
    out = {}
    with bank.use("student", trainable=True) as model:
        for name, reuse in (("prefill reused", True), ("whole forward (the fix)", False)):
            def step():
                r = sample(model, bank.tokenizer, step_examples(cfg), max_new_tokens=cfg.max_new_tokens,
                           generator=torch.Generator().manual_seed(0), grad_prefill=reuse)
                t = routing.teacher_outputs(bank, r, cfg.route, k=cfg.topk)
                start = time.process_time()
                with train_mode(model, enabled=not reuse):
                    logits = completion_logits(model, r, prefill=r.prefill)
                loss, _ = mopd_objective(cfg, logits, r, t)
                loss.backward()
                return time.process_time() - start
            times = []
            wall, peak = peak_extra_bytes(lambda: times.append(step()))
            times += [step() for _ in range(2)]
            out[name] = {"cpu": sorted(times)[1], "peak": peak, "wall": wall}
    bank.set_checkpointing(cfg.gradient_checkpointing)
    return out


def report(res: dict, args, argv) -> tuple[str, dict]:
    head = section_head("bf16's noise floor in the advantage (student = teacher)", "bench.bf16_floor", argv=argv)
    size = "one small layer (--quick)" if args.quick else f"{args.layers} of Qwen3-1.7B's 28 layers at its width (hidden 2048)"
    lines = [head, "", f"Random weights in bf16, {size}, vocabulary 151,936, LoRA r = 16 on every linear layer; "
             f"both teachers and the student are copies of one adapter, so every nat of A is rounding. "
             f"{res['shape'][0]} rows x {res['shape'][1]} tokens ({res['tokens']} completion tokens), the Qwen3 "
             f"preset's loss `{res['loss']}`. Pairs of paths: `mixed` / `swap` the routed teacher's two modes, `train` "
             "the student's training forward as `train_student` runs it, `sampler` the sampler's own log-probs. "
             "A real run's per-token KL late in training: 0.01-0.07 nats (docs/results.md).", "",
             "| setting | student's training forward | " + " | ".join(f"\\|{a} - {b}\\| mean / max" for a, b in PAIRS)
             + " | exact KL per token | gradient vs a real step's |",
             "| --- | --- | " + " | ".join("---" for _ in PAIRS) + " | --- | --- |"]
    figures = {}
    for label, r in res["settings"].items():
        path = "on the sampler's prefill" if r["reuse"] else "whole forward"
        ratio = r["grad"] / r["real_grad"]
        cells = " | ".join(f"{r[f'{a}-{b}'][0]:.1e} / {r[f'{a}-{b}'][1]:.1e}" for a, b in PAIRS)
        lines.append(f"| {label} | {path} | {cells} | {r['kl']:.1e} | {ratio:.1e} (real step: KL {r['real_kl']:.3f}) |")
        if not label.endswith("(refused)"):
            mean = r["mixed-train"][0]
            figures[f"bf16 floor, mean |A| ({label})"] = {"goal": f"<= {GOAL_A:.0e}", "measured": f"{mean:.1e}",
                                                          "ok": mean <= GOAL_A}
            figures[f"bf16 floor, gradient vs a real step's ({label})"] = {
                "goal": f"<= {GOAL_GRAD:.0e}", "measured": f"{ratio:.1e}", "ok": ratio <= GOAL_GRAD}
    if res.get("cost"):
        c = res["cost"]
        a, b = c["prefill reused"], c["whole forward (the fix)"]
        lines += ["", "The fix's cost (checkpointing off, the student's training forward + loss + backward, CPU time "
                  "median of 3, peak RSS of the first above the resident set): "
                  f"on the sampler's prefill {ms(a['cpu'])}, {gb(a['peak'])}; whole forward {ms(b['cpu'])} "
                  f"({b['cpu'] / a['cpu']:.2f}x), {gb(b['peak'])}."]
    return "\n".join(lines), figures


def main(argv=None, write: bool = True):
    p = argparse.ArgumentParser(description="bf16's noise floor in MOPD's advantage, student = teacher")
    p.add_argument("--layers", type=int, default=2, help="layers of Qwen3-1.7B (28 in all)")
    p.add_argument("--prompts", type=int, default=2, help="prompts per domain")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--allow-reuse", action="store_true", help="also measure the prefill path that bf16 refuses")
    p.add_argument("--no-cost", dest="cost", action="store_false", help="skip timing the fix")
    p.add_argument("--quick", action="store_true", help="one small layer, full vocabulary (smoke test)")
    p.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = p.parse_args(argv)
    from mopd_mini import MOPDConfig

    set_threads(args.threads)
    bank = make_bank("qwen3-1.7b-random", shrink=SMALL if args.quick else {"num_hidden_layers": args.layers})
    twins(bank)
    cfg = MOPDConfig.for_model("qwen3", experiment=None, progress=False, prompts_per_domain=args.prompts)
    settings = {"Qwen3 preset (checkpointing on)": (True, False, False), "checkpointing off": (False, False, False)}
    if args.allow_reuse:
        settings["checkpointing off, prefill reused (refused)"] = (False, True, False)
        settings["checkpointing off, prefill reused, fp32 LM head (refused)"] = (False, True, True)
    res = {"settings": {}}
    for label, (ckpt, allow, fp32) in settings.items():
        r = measure(bank, cfg, ckpt, allow, fp32)
        res["settings"][label] = r
        res.update(shape=r["shape"], tokens=r["tokens"], loss=r["loss"])
    if args.cost:
        res["cost"] = cost_of_the_fix(bank, cfg)
    body, figures = report(res, args, argv)
    print_and_write("bf16_floor", body, None if args.quick else figures, write and not args.no_write and not args.quick)
    return res


if __name__ == "__main__":
    main()
