"""Why AdamW does not move 08's stuck tokens, measured on the stuck run's last state.

Late in 08's stuck run the stuck tokens' reverse-KL gradient (w.r.t. the logits) is larger than the
rest's (docs/stuck.md). This script takes the run's state after its last step (the student, its
teacher, AdamW's moments from checkpoint.pt), samples fresh batches the way train_student does
(steps 151, 152, ...: 8 chain prompts, 8 tokens), and splits the reverse-KL loss into the part on the
stuck tokens and the part on the rest (the loss is a weighted sum over tokens, so the two parts add up
to it exactly). For each batch it reports, on the LoRA parameters:

  * the two parts' gradient norms, and their cosine;
  * AdamW's update for the whole gradient (after the trainer's clip at 1.0), split exactly into the
    momentum carried from earlier steps and the two parts' share of this step's gradient (they share
    one denominator, sqrt(v_hat) + eps), with the update's size against lr (a constant-sign gradient
    moves each parameter by about lr);
  * the first-order change of log p_S(wrong) on the stuck tokens from each piece (h . delta, with h the
    gradient of the stuck tokens' mean log p_S(y)), and the change after the real step (re-measured).

Then it continues training (the real trainer's loss, clip and AdamW) for --steps more steps and
re-measures p_S(wrong) on the first batch's stuck tokens after each. And the reverse KL's gradient
norm at each stuck token against the forward KL's at the same token (diagnostics.grad_norms).

    OMP_NUM_THREADS=1 PYTHONPATH=. python -m bench.stuck_copy         # makes runs/stuck-copy-s1/ (if not there)
    OMP_NUM_THREADS=1 PYTHONPATH=. python -m bench.stuck_adamw
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

import mopd_mini
from mopd_mini import diagnostics, routing
from mopd_mini.config import MOPDConfig
from mopd_mini.domains import get_domains
from mopd_mini.losses import masked_mean
from mopd_mini.rollout import token_logprobs
from mopd_mini.rollout import completion_logits, sample  # noqa: E402
from mopd_mini.runs import adamw, load_checkpoint


def flat(tensors) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, default=Path("runs/stuck-copy-s1"))
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--extend", type=int, default=None,
                        help="first continue the run to this many steps (arm 2's 300), in a copy of its folder")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    base, tokenizer = mopd_mini.load_base("tiny")
    bank = mopd_mini.AdapterBank(base, tokenizer)
    if args.extend:
        import shutil
        from dataclasses import replace

        from mopd_mini import runs, train_student
        root = args.run.parent / f"extend{args.extend}"
        if not (root / args.run.name).exists():
            shutil.copytree(args.run, root / args.run.name)
        runs.RUNS_DIR = root
        bank.load("sft_teacher", root / args.run.name / "sft_teacher")
        cfg = MOPDConfig(**json.loads((args.run / "mopd_kl" / "config.json").read_text()))
        run = train_student(bank, replace(cfg, steps=args.extend, progress=False))
        print(f"extended to step {args.extend}: warnings at {[w['step'] for w in run.warnings]}; last rows "
              + json.dumps([{k: r[k] for k in ('step', 'stuck_share/chain', 'kl_grad_stuck/chain', 'kl_grad_rest/chain',
                                                'kl_stuck/chain', 'kl_rest/chain', 'grad_norm')} for r in run.metrics[-3:]]))
        args.run = root / args.run.name
    bank.load("sft_teacher", args.run / "sft_teacher")
    bank.load("mopd_kl", args.run / "mopd_kl")
    ckpt = load_checkpoint(args.run / "mopd_kl" / "checkpoint.pt")
    cfg = MOPDConfig(**{k: v for k, v in json.loads((args.run / "mopd_kl" / "config.json").read_text()).items()})
    cfg = MOPDConfig(**{**cfg.__dict__, "steps": ckpt["step"]})   # the state after the checkpoint's step
    params = list(bank.parameters("mopd_kl").values())
    optimizer = adamw(params, cfg.lr)
    optimizer.load_state_dict(ckpt["optimizer"])
    beta1, beta2 = optimizer.param_groups[0]["betas"]
    eps, lr = optimizer.param_groups[0]["eps"], optimizer.param_groups[0]["lr"]
    chain = get_domains(("chain",))["chain"]
    generator = torch.Generator().manual_seed(1234)
    out = {"batches": [], "grad_forms": [], "continued": []}
    probe = None

    def batch(step):
        examples = chain.train_examples(step, cfg.prompts_per_domain, cfg.seed)
        with bank.use("mopd_kl") as model:
            with torch.no_grad():
                rollout = sample(model, tokenizer, examples, temperature=1.0, max_new_tokens=cfg.max_new_tokens,
                                 generator=generator)
        teacher = routing.teacher_outputs(bank, rollout, cfg.route, mode=cfg.scoring, k=cfg.topk)
        return rollout, teacher

    def logp_at(rollout, where) -> torch.Tensor:
        with bank.use("mopd_kl") as model, torch.no_grad():
            lp = token_logprobs(completion_logits(model, rollout), rollout.completion_ids)
        return lp[where]

    for i in range(args.batches):
        step = cfg.steps + 1 + i
        rollout, teacher = batch(step)
        ids, mask = rollout.completion_ids, rollout.completion_mask
        with bank.use("mopd_kl", trainable=True) as model:
            logits = completion_logits(model, rollout)                                  # (B, C, V)
            log_p_S, log_p_T = logits.log_softmax(-1), teacher.logits.log_softmax(-1)
            kl = (log_p_S.exp() * (log_p_S - log_p_T)).sum(-1)                           # (B, C)
            lp_y = log_p_S.gather(-1, ids.unsqueeze(-1)).squeeze(-1)
            stuck = diagnostics.stuck_mask(lp_y.detach(), teacher.logprobs, mask, cfg.stuck_p,
                                           cfg.stuck_teacher_logp).to(kl.dtype)
            if stuck.sum() == 0:
                continue
            rest = mask.to(kl.dtype) * (1 - stuck)
            parts = {"stuck": masked_mean(kl * stuck, mask), "rest": masked_mean(kl * rest, mask)}
            grads = {k: flat(torch.autograd.grad(v, params, retain_graph=True)) for k, v in parts.items()}
            h = flat(torch.autograd.grad((lp_y * stuck).sum() / stuck.sum(), params, retain_graph=True))
            with torch.no_grad():
                norms = diagnostics.grad_norms(["kl", "fkl"], logits.detach(), mask, teacher_logits=teacher.logits)
        where = stuck.bool()
        out["grad_forms"] += [{"kl": a, "fkl": b} for a, b in zip(norms["kl"][where].tolist(), norms["fkl"][where].tolist())]
        g = grads["stuck"] + grads["rest"]
        scale = min(1.0, cfg.grad_clip / (g.norm().item() + 1e-6))                     # clip_grad_norm_
        state = [optimizer.state[p] for p in params]
        m, v = flat([s["exp_avg"] for s in state]), flat([s["exp_avg_sq"] for s in state])
        t = int(state[0]["step"]) + 1
        v_new = beta2 * v + (1 - beta2) * (scale * g) ** 2
        denom = (v_new / (1 - beta2 ** t)).sqrt() + eps
        piece = {"momentum": -lr * beta1 * m / (1 - beta1 ** t) / denom,
                 "stuck": -lr * (1 - beta1) * scale * grads["stuck"] / (1 - beta1 ** t) / denom,
                 "rest": -lr * (1 - beta1) * scale * grads["rest"] / (1 - beta1 ** t) / denom}
        total = sum(piece.values())
        before = logp_at(rollout, where)
        # the real step: the trainer's loss (the reverse KL over every token), clip, AdamW
        for p, gp in zip(params, torch.split(scale * g, [p.numel() for p in params])):
            p.grad = gp.view_as(p).clone()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        after = logp_at(rollout, where)
        row = {"step": step, "stuck_tokens": int(stuck.sum()), "tokens": int(mask.sum()),
               "p_wrong": before.exp().mean().item(),
               "grad_norm": {k: v.norm().item() for k, v in grads.items()},
               "cosine_stuck_rest": torch.nn.functional.cosine_similarity(grads["stuck"], grads["rest"], 0).item(),
               "clip_scale": scale,
               "update_norm": {k: v.norm().item() for k, v in piece.items()} | {"total": total.norm().item()},
               "update_rms_over_lr": (total.norm() / total.numel() ** 0.5 / lr).item(),
               "dlogp_wrong_first_order": {k: (h @ v).item() for k, v in piece.items()} | {"total": (h @ total).item()},
               "dlogp_wrong_measured": (after - before).mean().item()}
        out["batches"].append(row)
        if probe is None:
            probe = (rollout, where)
    # continue training for --steps steps (the loss the trainer uses) and follow the probe's stuck tokens
    from mopd_mini.losses import reverse_kl
    for j in range(args.steps):
        rollout, teacher = batch(cfg.steps + 1 + args.batches + j)
        with bank.use("mopd_kl", trainable=True) as model:
            loss = reverse_kl(completion_logits(model, rollout), teacher.logits, rollout.completion_mask)[0]
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        out["continued"].append(logp_at(*probe).exp().mean().item())
    rows = out["batches"]
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    print(json.dumps(out, indent=1))
    print("\nsummary over", len(rows), "batches (steps", rows[0]["step"], "-", rows[-1]["step"], "of the stuck run's state):")
    print(f"  stuck tokens {sum(r['stuck_tokens'] for r in rows)} of {sum(r['tokens'] for r in rows)}; mean p_S(wrong) "
          f"{mean([r['p_wrong'] for r in rows]):.4f}")
    for k in ("stuck", "rest"):
        print(f"  gradient of the {k} tokens' part of the loss, on the LoRA parameters: {mean([r['grad_norm'][k] for r in rows]):.4f}")
    print(f"  cosine between the two: {mean([r['cosine_stuck_rest'] for r in rows]):+.3f}")
    for k in ("momentum", "stuck", "rest", "total"):
        print(f"  AdamW update from {k:8s}: norm {mean([r['update_norm'][k] for r in rows]):.2e}; first-order change of "
              f"log p_S(wrong) on the stuck tokens {mean([r['dlogp_wrong_first_order'][k] for r in rows]):+.2e}")
    print(f"  update RMS per parameter / lr: {mean([r['update_rms_over_lr'] for r in rows]):.3f}")
    print(f"  measured change of log p_S(wrong) after the real step: {mean([r['dlogp_wrong_measured'] for r in rows]):+.2e}")
    fk = out["grad_forms"]
    print(f"  per stuck token ({len(fk)}): reverse-KL gradient norm (logits) {min(r['kl'] for r in fk):.3f}-"
          f"{max(r['kl'] for r in fk):.3f}, forward KL's {min(r['fkl'] for r in fk):.3f}-{max(r['fkl'] for r in fk):.3f}, "
          f"ratio fkl/kl {min(r['fkl'] / r['kl'] for r in fk):.0f}-{max(r['fkl'] / r['kl'] for r in fk):.0f}")
    c = out["continued"]
    print(f"  {args.steps} more steps of reverse KL: p_S(wrong) on the first batch's stuck tokens "
          f"{rows[0]['p_wrong']:.4f} -> " + ", ".join(f"{x:.4f}" for x in c[4::5]))


if __name__ == "__main__":
    main()
