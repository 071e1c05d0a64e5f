"""Loss memory: the peak extra memory and the time of one forward + backward of

    naive     the fp32 full-vocabulary reverse KL written the obvious way (log_softmax of both,
              p_S, the product: several (N, V) fp32 tensors alive at once, all kept for backward)
    chunked   the library's `losses.reverse_kl` (exact, a chunk of rows at a time, recomputed in
              backward)
    topk      the library's `losses.topk_reverse_kl` over the teacher's top-k (k = 64)
    fkl       the library's `losses.forward_kl`, the forward KL (MOPD's loss "fkl"), chunked
    jsd       the library's `losses.jsd_loss` at beta = 0.5 (MOPD's loss "jsd"), chunked

at Qwen3's vocabulary (V = 151,936) on B x T = 16 x 64 completion tokens, with the logits in
bf16 (what Qwen3 produces) and, as a second row, in fp32.

"Peak extra" is the peak resident memory during forward + backward above what was resident
before (the logits themselves, the teacher's logits or top-k). The gradient w.r.t. the student's
logits, one (N, V) tensor in the logits' dtype, is part of it for every variant: it is what the
backward must hand back to the LM head. Measured on CPU from /proc/self/status (VmHWM reset
through /proc/self/clear_refs before each run), repetitions interleaved.

    python -m bench.loss_memory                 # the full figure (about 3 GB of RAM at peak)
    python -m bench.loss_memory --quick         # a small vocabulary, for the smoke test
"""

from __future__ import annotations

import argparse
import os

import torch

from mopd_mini.losses import jsd_loss, masked_mean, reverse_kl, forward_kl, topk_reverse_kl

from .common import gb, machine, median, ms, peak_extra_bytes, print_and_write, section_head, set_threads


def naive_reverse_kl(student_logits, teacher_logits, mask):
    """The textbook version: fp32 log-softmax of both, the full (B, T, V) product, kept for backward."""
    log_p_S = student_logits.float().log_softmax(-1)                # (B, T, V)
    log_p_T = teacher_logits.float().log_softmax(-1)                # (B, T, V)
    kl = (log_p_S.exp() * (log_p_S - log_p_T)).sum(-1)              # (B, T)
    return masked_mean(kl, mask)


def variants(z_S, z_T, mask, k: int) -> dict:
    top_lp, top_ids = z_T.float().log_softmax(-1).topk(k, dim=-1)  # the teacher's top-k (inputs)

    def run(loss_fn):
        def go():
            z_S.grad = None
            loss_fn().backward()
        return go

    return {"naive fp32": run(lambda: naive_reverse_kl(z_S, z_T, mask)),
            "chunked reverse_kl": run(lambda: reverse_kl(z_S, z_T, mask)[0]),
            f"topk_reverse_kl (k={k})": run(lambda: topk_reverse_kl(z_S, top_ids, top_lp, mask)[0]),
            "chunked forward_kl (fkl)": run(lambda: forward_kl(z_S, z_T, mask)[0]),
            "chunked jsd_loss (beta=0.5)": run(lambda: jsd_loss(z_S, z_T, mask, beta=0.5)[0])}


def measure(B: int, T: int, V: int, k: int, dtype, reps: int) -> dict:
    """{variant: (median seconds, median peak extra bytes)}, repetitions interleaved."""
    g = torch.Generator().manual_seed(0)
    z_S = (torch.randn(B, T, V, generator=g) * 2).to(dtype).requires_grad_()
    z_T = (torch.randn(B, T, V, generator=g) * 2).to(dtype)
    mask = torch.ones(B, T)
    fns = variants(z_S, z_T, mask, k)
    for fn in fns.values():  # warm-up (and the first touch of every allocation path)
        fn()
    z_S.grad = None
    out = {name: ([], []) for name in fns}
    for rep in range(reps):
        names = list(fns)[rep % len(fns):] + list(fns)[:rep % len(fns)]
        for name in names:
            seconds, extra = peak_extra_bytes(fns[name])
            z_S.grad = None
            out[name][0].append(seconds)
            out[name][1].append(extra)
    return {name: (median(s), median(m)) for name, (s, m) in out.items()}


def main(argv=None, write: bool = True) -> dict:
    p = argparse.ArgumentParser(description="loss memory at Qwen3's vocabulary")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--tokens", type=int, default=64, help="completion tokens per sequence")
    p.add_argument("--vocab", type=int, default=151_936)
    p.add_argument("--k", type=int, default=64)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--quick", action="store_true", help="V = 4,096 and 1 repetition (smoke test)")
    p.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = p.parse_args(argv)
    if args.quick:
        args.vocab, args.reps, args.batch, args.tokens = 4096, 1, 4, 16
    set_threads(args.threads)
    info = machine()
    load = ["{:.1f}".format(os.getloadavg()[0])]
    results = {str(dt).replace("torch.", ""): measure(args.batch, args.tokens, args.vocab, args.k, dt, args.reps)
               for dt in (torch.bfloat16, torch.float32)}
    load.append("{:.1f}".format(os.getloadavg()[0]))
    N, V = args.batch * args.tokens, args.vocab
    lines = [section_head("Loss memory at Qwen3's vocabulary", "bench.loss_memory", info, argv), "",
             f"Student and teacher logits of {args.batch} x {args.tokens} = {N:,} completion tokens over "
             f"V = {V:,}; one (N, V) tensor is {gb(N * V * 2)} in bf16, {gb(N * V * 4)} in fp32. "
             f"Forward + backward, medians of {args.reps} interleaved repetitions; load average (1 min) before and after: "
             f"{' -> '.join(load)} on {os.cpu_count()} cores (the times are wall-clock: a loaded machine slows them "
             "all; the memory is not affected).", "",
             "| logits | variant | peak extra memory | vs naive | time | vs naive |",
             "| --- | --- | --- | --- | --- | --- |"]
    figures = {}
    for dt, res in results.items():
        base_mem, base_t = res["naive fp32"][1], res["naive fp32"][0]
        for name, (t, mem) in res.items():
            lines.append(f"| {dt} | {name} | {gb(mem)} | {mem / base_mem:.1%} | {ms(t)} | {t / base_t:.2f}x |")
        if dt == "bfloat16":
            topk = next(v for n, v in res.items() if n.startswith("topk"))
            figures["loss memory: top-k vs naive (bf16 logits)"] = {
                "goal": "<= 10%", "measured": f"{topk[1] / base_mem:.1%}", "ok": topk[1] / base_mem <= 0.10}
            chunk = res["chunked reverse_kl"][1]
            figures["loss memory: chunked vs naive (bf16 logits)"] = {
                "goal": "<= 25%", "measured": f"{chunk / base_mem:.1%}", "ok": chunk / base_mem <= 0.25}
            for name, label in (("chunked forward_kl (fkl)", "fkl"), ("chunked jsd_loss (beta=0.5)", "jsd")):
                mem = res[name][1]
                figures[f"loss memory: {label} vs naive (bf16 logits)"] = {
                    "goal": "<= 25%, as the chunked reverse KL", "measured": f"{mem / base_mem:.1%}",
                    "ok": mem / base_mem <= 0.25}
    naive_bf16 = results["bfloat16"]["naive fp32"][1]
    floor = N * V * 2 / naive_bf16
    topk_bf16 = next(v for n, v in results["bfloat16"].items() if n.startswith("topk"))[1] / naive_bf16
    lines += ["", f"**The floor.** Every variant hands back the gradient w.r.t. the student's logits, one (N, V) "
              f"tensor in the logits' dtype: {gb(N * V * 2)} in bf16, which is **{floor:.1%} of the naive peak**, "
              f"and {gb(N * V * 4)} in fp32. `topk_reverse_kl` holds nothing else but one 4 MB chunk of fp32 "
              f"temporaries and a few (N, k) tensors: {topk_bf16:.1%} measured against a goal of 10%, while its "
              f"gradient alone is {floor:.2%}. Going much under 10% would "
              "need the loss fused into the LM head (the gradient of the hidden states computed chunk by chunk, "
              "never the (N, V) gradient), which changes what the losses take (logits) and is not done here. "
              "The goals are judged on the bf16 row, the dtype Qwen3 runs in; with fp32 logits the gradient "
              "alone is a fifth of the naive peak. Peak memory is read from the resident set, so it carries a "
              "few MB of allocator noise.",
              "", "**The cures hold the same bound.** `forward_kl` (the on-policy forward KL, loss \"fkl\") and "
              "`jsd_loss` (loss \"jsd\") run the same chunked forward and recomputed backward as the reverse KL: "
              f"{gb(results['bfloat16']['chunked forward_kl (fkl)'][1])} and "
              f"{gb(results['bfloat16']['chunked jsd_loss (beta=0.5)'][1])} with bf16 logits, against "
              f"{gb(results['bfloat16']['chunked reverse_kl'][1])} for the reverse KL. The JSD does more work per "
              "element (the mixture's log and two KLs), so its time is the larger."]
    print_and_write("loss_memory", "\n".join(lines), None if args.quick else figures,
                    write and not args.no_write and not args.quick)
    return results


if __name__ == "__main__":
    main()
