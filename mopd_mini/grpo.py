"""The GRPO loop (`train_grpo`), with FactWorld's verifiable reward: stage 2's teacher on one domain,
Mix-RL on several, Cascade RL by resuming on another (the two RL baselines are this same loop).

    bank = AdapterBank(*load_base("tiny"))
    train_grpo(bank, GRPOConfig(domain="binding"))                    # a teacher, ~1 CPU minute
    train_grpo(bank, GRPOConfig(domain=("binding", "recall")))        # Mix-RL: one adapter, both
    train_grpo(bank, GRPOConfig(domain="recall", init_from="teacher_binding",
                                name="cascade_binding_recall", eval_domains=("binding",)))  # Cascade RL

Each step: P training prompts of each domain; G completions per prompt sampled from the adapter
at temperature 1; reward = relaxed match with the gold answer of the prompt's OWN domain (0 for
a completion that runs out of tokens without ending: see `Rollout.rewards`); advantage = the
reward normalised within its group; groups whose G rewards are all equal carry no signal and
are skipped; loss = token-mean policy gradient; AdamW with gradient clip 1.0.

With several domains this loop IS Mix-RL (the paper's baseline: one RL run on the union of the
domains' prompts and rewards, balanced: P prompts of every domain in every step). A cascade is
this loop on domain B started from the adapter trained on domain A (`init_from`), with A kept in
the evaluation (`eval_domains`) so the forgetting curve is logged.

We call it GRPO, as the FactWorld experiment does, but with one update per batch of fresh
samples it is on-policy REINFORCE with a group baseline: the policy ratio is always 1, so there
is no PPO clip and no reference-model KL term.
"""

from __future__ import annotations

import time

import torch
from tqdm.auto import tqdm

from . import cost
from .adapters import AdapterBank
from .domains import get_domains
from .evaluation import accuracy_by_length
from .losses import group_advantages, policy_gradient_loss
from .rollout import check_budget, completion_logits, prefill_reusable, sample, token_logprobs
from .runs import Run, adamw, guarded_step, train_mode
from .validate import guarded
from . import config, deprecation  # the config lives in the torch-free config module

# old names, one release: the config's old path, and train_teacher (the loop trains Mix-RL and Cascade too)
__getattr__ = deprecation.old_names(__name__, {"GRPOConfig": "mopd_mini.config:GRPOConfig",
                                               "train_teacher": "mopd_mini.grpo:train_grpo"})


@guarded
def train_grpo(bank: AdapterBank, cfg: config.GRPOConfig) -> Run:
    """Create (or copy from `cfg.init_from`, or resume) the adapter and train it with GRPO on
    `cfg.domain` (one domain: a teacher; several: Mix-RL; from another domain's adapter with
    `init_from`: a cascade)."""
    cfg.check()
    domains = get_domains(cfg.domains)
    evaluated = get_domains(dict.fromkeys(cfg.domains + cfg.eval_domains))
    check_budget(bank.tokenizer, domains, cfg.max_new_tokens)
    if cfg.init_from is not None:
        bank.check(cfg.init_from)
    bank.claim(cfg.adapter, "teacher")
    run = Run.open(cfg.experiment, cfg.adapter, cfg)  # names, the folder's role, the checkpoint's config
    bank.start(cfg.adapter, cfg.init_from, seed=cfg.seed, role="teacher")
    bank.set_checkpointing(cfg.gradient_checkpointing)
    params = list(bank.parameters(cfg.adapter).values())
    optimizer = adamw(params, cfg.lr)
    generator = torch.Generator().manual_seed(cfg.seed)
    start = run.resume(bank, cfg.adapter, optimizer, generator)
    P, G, D = cfg.prompts_per_step, cfg.group_size, len(domains)
    with bank.use(cfg.adapter, trainable=True) as model:
        # prefill once: ONE grad prefill per distinct prompt, shared by its G completions (the
        # sampler's; see rollout.completion_logits); where train mode differs from eval mode, a second pass
        reuse = prefill_reusable(model, cfg.gradient_checkpointing)
        for step in tqdm(range(start, cfg.steps + 1), desc=cfg.adapter, disable=not cfg.progress,
                         initial=start - 1, total=cfg.steps):
            # --- sample: G completions for each of P prompts of every domain, from the adapter -----
            started = time.perf_counter()
            prompts = [ex for d in domains.values() for ex in d.train_examples(step, P, cfg.seed)]  # D*P
            rollout = sample(model, bank.tokenizer, [ex for ex in prompts for _ in range(G)],
                             temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens, generator=generator,
                             grad_prefill=reuse)
            # --- reward (each prompt's own domain) and group-normalised advantage ----------------
            rewards = rollout.rewards(bank.tokenizer).view(D * P, G)      # (D*P, G) in {0, 1}
            advantages, keep = group_advantages(rewards)                  # (D*P, G), (D*P,)
            row = {"step": step, "reward": rewards.mean().item(), "groups_kept": keep.float().mean().item(),
                   **cost.sampled(rollout, trains=bool(keep.any()))}
            if D > 1:                                                     # Mix-RL: per domain too
                for i, d in enumerate(domains):
                    row[f"reward/{d}"] = rewards[i * P:(i + 1) * P].mean().item()
            # --- policy gradient on the kept groups only ------------------------------------
            if keep.any():
                mask = rollout.completion_mask * keep.repeat_interleave(G)[:, None]   # (D*P*G, C)
                with train_mode(model, enabled=not reuse):
                    logits = completion_logits(model, rollout, prefill=rollout.prefill)  # (D*P*G, C, V)
                logprobs = token_logprobs(logits, rollout.completion_ids)               # (D*P*G, C)
                loss, _ = policy_gradient_loss(logprobs, advantages.view(-1), mask)
                row.update(loss=loss.item(), **guarded_step(loss, params, optimizer, cfg.grad_clip))
                row.update({**cost.trained(rollout), "cost/loss_tokens": int(mask.sum())})  # forward over all rows
            run.seconds += time.perf_counter() - started  # wall time, kept out of the (deterministic) metrics
            # --- evaluate, log, checkpoint ------------------------------------------------------
            if cfg.eval_every and (step % cfg.eval_every == 0 or step == cfg.steps):
                row.update(accuracy_by_length(model, bank.tokenizer, evaluated, cfg.eval_n, cfg.eval_split))
            run.log(row)
            if step % cfg.checkpoint_every == 0 or step == cfg.steps:
                run.save(step, bank, cfg.adapter, optimizer, generator)
    run.finish(bank, cfg.adapter)
    return run
