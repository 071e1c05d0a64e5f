"""Stage 3: MOPD, the student distilled from every domain's teacher on its own rollouts.

    bank = AdapterBank(*load_base("tiny"))
    bank.load("teacher_binding", ...); bank.load("teacher_recall", ...)
    run = train_student(bank, MOPDConfig(loss="pg"))

Each step, for a fresh student adapter (zero-initialised, so it starts AT the base):
  1. sample   prompts from every domain; the student samples ONE completion per prompt
              (temperature 1, no top-k / top-p truncation unless `top_p` < 1)
  2. route    each completion goes to its own domain's teacher (never an average of teachers)
  3. teacher  that teacher prefills prompt + completion (routing.teacher_outputs): log-probs, top-k,
              full distribution
  4. loss     per-token reverse KL on the student's own trajectory, in one of three forms:
                pg    MOPD-PG, advantage A_t = log pi_T(y_t) - log pi_S(y_t), clipped to [-c, c]
                topk  MOPD-Top-k over the teacher's top-k tokens, bias-corrected (topk_support:
                      local support matching, both renormalised over the set)
                kl    the exact full-vocabulary reverse KL
              or one of the cures for a student stuck confidently wrong (the reverse KL's
              gradient vanishes there; losses.py writes each gradient out):
                fkl   the on-policy FORWARD KL(p_T || p_S) over the full vocabulary (forward_kl
                      on the student's rollout)
                jsd   the generalised JSD with `beta` (TRL's convention: 0 forward KL, 1 reverse)
  5. update   AdamW on the student adapter only (teachers never enter the optimizer)
  6. log      per domain: exact KL (whatever the loss), advantages before the clip and the
              fraction clipped, top-k masses, tokens, on-policy reward, greedy accuracy; and the
              stuck detector (docs/stuck.md): the share of sampled tokens where the student is
              confident and the teacher rejects it, the gradient they get against the rest (closed
              form, no extra backward), the mass off the teacher's top-k; a StuckWarning, once per
              domain, when the share stays high

UCMOPD's two options (arXiv 2608.26735; off by default, `mopd_mini.ucmopd` has the maths):
  golden_gain  (GoldenGain)   m extra exploration completions per prompt, hotter and nucleus-
                              truncated; each joins the loss iff its positive-advantage density is
                              at least the anchor's. Metrics stay on the anchors (on-policy);
                              gg_kept/<domain> logs the share of exploration samples kept
  endorsement  (Endorsement)  a seeded Bernoulli keep-mask on the loss's tokens from the teacher's
                              centred log-likelihood; tef_masked/<domain> logs the share dropped
`teachers` re-routes domains: {"binding": "teacher_binding_other"} (a foreign teacher registered
with `bank.add_foreign`), {"recall": "base"} (the stage-1 base as the "general" teacher), or round-2
teachers by their names.

GKD's on-policy fraction (`lmbda`, Agarwal et al., arXiv 2306.13649): with probability 1 - lmbda a
step's prefixes are not the student's: each domain's completions are sampled by its own routed
teacher ("teacher"), or are the gold answers ("gold"); the same loss on them, the same routing.
The draw is seeded per step (resumable); the row logs `on_policy` (1 or 0).

Departures from the paper: LoRA adapters on one base instead of full models; one optimizer step
per batch (so no importance weight is needed); the exact KL is computed every step for logging
because FactWorld completions are a few tokens long.
"""

from __future__ import annotations

import time
import warnings

import torch
from tqdm.auto import tqdm

from . import cost
from . import diagnostics
from . import routing
from . import ucmopd
from .adapters import AdapterBank
from .domains import get_domains
from .evaluation import accuracy_by_length
from .losses import (jsd_loss, masked_mean, pg_loss, policy_gradient_loss, reverse_kl, forward_kl,
                     topk_reverse_kl)
from .rollout import (Rollout, check_budget, completion_logits, concat, pack, prefill_reusable, sample,
                      token_logprobs)
from .runs import Run, adamw, guarded_step, teacher_manifest, train_mode
from .validate import guarded
from . import config  # the config and its UCMOPD options live in the torch-free config module
from .config import FORMS, LOSSES, PREFIXES  # noqa: F401

__getattr__ = config.old_paths(__name__, ("MOPDConfig", "GoldenGain", "Endorsement"))  # their old path, one release

# ---------------------------------------------------------------------------------------------
# the objective: every form of the per-token reverse KL, from one student forward
# ---------------------------------------------------------------------------------------------


def mopd_objective(cfg: config.MOPDConfig, student_logits, rollout: Rollout, teacher: routing.TeacherOutputs,
                   loss_mask=None, pg_weight=None):
    """The chosen loss (with grad) and the per-token tensors of all three forms (for logging).

    student_logits: (B, C, V) with grad. The exact reverse KL needs `teacher.logits`.
    loss_mask: (B, C), the tokens the loss averages over (UCMOPD's filters; None: every completion
    token); the logged tensors always cover every completion token (fkl's and jsd's own per-token
    loss: the tokens it averages over). pg_weight: (B, C), a per-token weight on MOPD-PG's clipped
    advantage (Golden-Gain's optional importance weight).

    The three MOPD loss forms (pg, topk, kl; Top-k is a generalised KL on the teacher's top-k set, not
    the reverse KL) are computed every step (the exact KL is always logged);
    fkl and jsd only when chosen."""
    ids, mask = rollout.completion_ids, rollout.completion_mask              # (B, C)
    student_logprobs = token_logprobs(student_logits, ids)                   # (B, C) log pi_S(y_t)
    losses = {
        "pg": pg_loss(student_logprobs, teacher.logprobs, mask, clip=cfg.clip),
        "topk": topk_reverse_kl(student_logits, teacher.topk_ids, teacher.topk_logprobs, mask,
                                correction=cfg.topk_correction, support=cfg.topk_support),
        "kl": reverse_kl(student_logits, teacher.logits, mask),
    }
    m = mask if loss_mask is None else loss_mask
    if cfg.loss == "fkl":    # the on-policy forward KL: soft-label distillation's function on the student's rollout
        losses["fkl"] = forward_kl(student_logits, teacher.logits, m)
    elif cfg.loss == "jsd":
        losses["jsd"] = jsd_loss(student_logits, teacher.logits, m, beta=cfg.beta)
    loss = losses[cfg.loss][0]
    pg, topk, kl = (losses[k][1] for k in FORMS)
    if cfg.loss in FORMS and (loss_mask is not None or pg_weight is not None):  # UCMOPD: the same loss on the kept tokens
        m = mask if loss_mask is None else loss_mask
        loss = {"pg": lambda: policy_gradient_loss(
                    student_logprobs, pg["advantage"] * (1 if pg_weight is None else pg_weight), m)[0],
                "topk": lambda: topk_reverse_kl(student_logits, teacher.topk_ids, teacher.topk_logprobs, m,
                                                correction=cfg.topk_correction, support=cfg.topk_support)[0],
                "kl": lambda: reverse_kl(student_logits, teacher.logits, m)[0]}[cfg.loss]()
    per_token_loss = {"pg": lambda: -pg["advantage"] * student_logprobs.detach(), "topk": lambda: topk["per_token"],
                      "kl": lambda: kl["kl"], "fkl": lambda: losses["fkl"][1]["kl"],
                      "jsd": lambda: losses["jsd"][1]["jsd"]}[cfg.loss]()
    info = {"kl": kl["kl"], "sampled_kl": pg["sampled_kl"], "advantage_raw": pg["advantage_raw"],
            "advantage": pg["advantage"], "clipped": pg["clipped"].float(), "loss": per_token_loss,
            "student_topk_mass": topk["student_topk_mass"], "teacher_topk_mass": topk["teacher_topk_mass"],
            "student_logprob": student_logprobs.detach(), "teacher_logprob": teacher.logprobs}
    info.update(stuck_info(cfg, student_logits, rollout, teacher, student_logprobs, pg["advantage"]
                           if pg_weight is None else pg["advantage"] * pg_weight, topk["student_topk_mass"]))
    return loss, info


@torch.no_grad()
def stuck_info(cfg: config.MOPDConfig, student_logits, rollout: Rollout, teacher: routing.TeacherOutputs,
               student_logprobs, advantage, student_topk_mass) -> dict:
    """The stuck detector's per-token tensors (docs/stuck.md; `diagnostics` has the maths), all (B, C):
    `stuck` (1.0 where p_S(y) > stuck_p and log p_T(y) < stuck_teacher_logp), `grad_norm` (the trained
    loss's per-position gradient norm with respect to the student's logits, in closed form: no extra
    backward; the support-matching form for topk with topk_support, diagnostics.form_of), `kl_grad_norm` (the exact
    reverse KL's), `off_support` (the student's mass outside the teacher's top-k set)."""
    ids, mask = rollout.completion_ids, rollout.completion_mask
    stuck = diagnostics.stuck_mask(student_logprobs, teacher.logprobs, mask, cfg.stuck_p, cfg.stuck_teacher_logp)
    trained = diagnostics.form_of(cfg.loss, cfg.topk_support)
    forms = [f for f in dict.fromkeys((trained, "kl")) if f in diagnostics.GRAD_NORMS]
    norms = diagnostics.grad_norms(forms, student_logits, mask, teacher_logits=teacher.logits, ids=ids,
                                   advantage=advantage, topk_ids=teacher.topk_ids, topk_logprobs=teacher.topk_logprobs,
                                   topk_correction=cfg.topk_correction, beta=cfg.beta)
    out = {"stuck": stuck.float(), "kl_grad_norm": norms["kl"], "off_support": (1 - student_topk_mass).clamp(min=0)}
    if trained in norms:
        out["grad_norm"] = norms[trained]
    return out


def domain_metrics(info: dict, rollout: Rollout, rewards) -> dict:
    """Per-domain means of the per-token tensors (named metric/domain), plus token counts and the
    stuck detector's metrics (`diagnostics.stuck_metrics`)."""
    row = {}
    for d in dict.fromkeys(rollout.domains):
        idx = torch.tensor([i for i, x in enumerate(rollout.domains) if x == d])
        mask = rollout.completion_mask[idx]                                   # (b, C)
        for name in ("loss", "kl", "sampled_kl", "clipped", "student_topk_mass", "teacher_topk_mass", "off_support"):
            row[f"{name}/{d}"] = masked_mean(info[name][idx], mask).item()
        row.update(diagnostics.stuck_metrics(info, idx, mask, d))
        adv = info["advantage_raw"][idx][mask.bool()]                        # this domain's tokens
        row.update({f"adv_mean/{d}": adv.mean().item(), f"adv_min/{d}": adv.min().item(),
                    f"adv_max/{d}": adv.max().item(), f"tokens/{d}": int(mask.sum().item()),
                    f"reward/{d}": rewards[idx].mean().item()})
    return row


def ucmopd_objective(cfg: config.MOPDConfig, step: int, student_logits, rollout: Rollout,
                     teacher: routing.TeacherOutputs, anchors: int):
    """mopd_objective on the tokens UCMOPD keeps: (loss, info, per-domain metrics).

    Rows [0, anchors) are the anchors, one per prompt; rows after them (golden gain) are each
    prompt's m exploration samples, prompt by prompt.

    The filters are `ucmopd.filters` (tests/test_ucmopd.py computes a case by hand): both read the
    UNCLIPPED advantage A_t = log pi_T(y_t) - log pi_S(y_t) under the student's temperature-1
    log-probs (not the sampler's). Golden-Gain first keeps or drops whole rows, each row's density
    taken over all of its completion tokens; Teacher-Endorsement then masks tokens of the rows kept
    (`tef_masked` is a share of those). The loss is the chosen form's `masked_mean` over the KEPT tokens: each
    row's mean over its kept tokens, then the mean over the rows that keep any. The paper's 1/T
    reads as the full completion length; this averages over the kept ones. The mask applies to
    MOPD-Top-k and the exact KL as well as MOPD-PG: an extension beyond the paper."""
    ids, mask = rollout.completion_ids, rollout.completion_mask              # (B, C)
    with torch.no_grad():
        student_logprobs = token_logprobs(student_logits, ids)               # (B, C) at temperature 1
    advantage = teacher.logprobs - student_logprobs                          # (B, C) A_t, before the clip
    loss_mask, pg_weight, row = ucmopd.filters(cfg, step, advantage, mask, rollout.domains, anchors, teacher.logprobs,
                                               teacher.logits, student_logprobs, rollout.sample_logprobs)
    loss, info = mopd_objective(cfg, student_logits, rollout, teacher, loss_mask=loss_mask, pg_weight=pg_weight)
    return loss, info, row


# ---------------------------------------------------------------------------------------------
# GKD's on-policy fraction: whose prefixes a step trains on
# ---------------------------------------------------------------------------------------------


def on_policy(cfg: config.MOPDConfig, step: int) -> bool:
    """Whether this step trains on the student's own samples: always at lmbda = 1 (no draw), else a
    Bernoulli(lmbda) draw from its own seeded stream, one per step and apart from the sampler's
    generator, so a resumed run draws exactly what the uninterrupted one did."""
    if cfg.lmbda >= 1:
        return True
    generator = torch.Generator().manual_seed((cfg.seed * 1_000_003 + step) * 1_013 + 1)
    return torch.rand(1, generator=generator).item() < cfg.lmbda


@torch.no_grad()
def off_policy_rollout(bank: AdapterBank, cfg: config.MOPDConfig, examples: list,
                       generator: torch.Generator) -> tuple[Rollout, dict]:
    """An off-policy step's trajectories and what making them cost.

    "teacher": each domain's prompts are completed by that domain's routed teacher (an adapter of the
    bank, "base", or a foreign teacher), at the student's temperature and budget, without the
    student's top_p, drawing from the run's generator (checkpointed: resumable). The cost is the
    teachers' sampling, in the ledger's sampler keys: their prompt prefill and generated tokens.
    "gold": the gold answer's tokens and the end of turn (as offline.gold), nothing sampled (cost 0).
    Either way the rows are laid out as a student rollout (`pack`), in the examples' order, so the
    routing, the scoring and the loss run on them unchanged."""
    tokenizer = bank.tokenizer
    if cfg.lmbda_prefix == "gold":
        completions = [tokenizer(ex.answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
                       for ex in examples]
        return pack(bank.model, tokenizer, examples, completions), {
            "cost/sample_prefill_tokens": 0, "cost/generated_tokens": 0}
    completions, spent = [None] * len(examples), {}
    for domain, teacher in cfg.route.items():
        rows = [i for i, ex in enumerate(examples) if ex.task == domain]
        if not rows:
            continue
        foreign = bank.foreign.get(teacher)
        owner, name = (foreign.bank, foreign.adapter) if foreign is not None else (bank, teacher)
        with owner.use(name) as model:
            r = sample(model, tokenizer, [examples[i] for i in rows], temperature=cfg.temperature,
                       max_new_tokens=cfg.max_new_tokens, min_new_tokens=cfg.min_new_tokens, generator=generator)
        for b, i in enumerate(rows):
            completions[i] = r.completion_ids[b, :int(r.completion_mask[b].sum())].tolist()
        spent = cost.add(spent, cost.sampled(r))
    return pack(bank.model, tokenizer, examples, completions), spent


# ---------------------------------------------------------------------------------------------
# per-token records of a few fixed prompts, for the plots
# ---------------------------------------------------------------------------------------------


def token_names(tokenizer, ids: list[int]) -> list[str]:
    """The tokenizer's name of each id; ids past the tokenizer's end (Qwen3's model has 151,936 rows
    for 151,669 tokens: padding rows that random weights do sample) get `<id N>`, not None."""
    return [t if t is not None else f"<id {i}>" for t, i in zip(tokenizer.convert_ids_to_tokens(ids), ids)]


@torch.no_grad()
def track(bank: AdapterBank, cfg: config.MOPDConfig, examples: list, step: int) -> list[dict]:
    """Sample the tracked prompts from the current student and record every token's KL, advantage,
    reverse-KL gradient norm and stuck flag (diagnostics). Uses its own generator, so tracking never
    changes the training run."""
    generator = torch.Generator().manual_seed(cfg.seed * 100_003 + step)
    rollout = sample(bank.model, bank.tokenizer, examples, temperature=cfg.temperature, top_p=cfg.top_p,
                     max_new_tokens=cfg.max_new_tokens, generator=generator)
    teacher = routing.teacher_outputs(bank, rollout, cfg.route, mode=cfg.scoring, k=cfg.topk)
    _, info = mopd_objective(cfg, completion_logits(bank.model, rollout), rollout, teacher)
    records = []
    for b, ex in enumerate(examples):
        n = int(rollout.completion_mask[b].sum())
        ids = rollout.completion_ids[b, :n].tolist()
        records.append({"step": step, "domain": ex.task, "prompt": ex.prompt, "answer": ex.answer,
                        "tokens": token_names(bank.tokenizer, ids),
                        **{k: info[k][b, :n].tolist() for k in ("kl", "advantage_raw", "advantage",
                                                                 "student_logprob", "teacher_logprob",
                                                                 "kl_grad_norm")},
                        "stuck": [bool(x) for x in info["stuck"][b, :n].tolist()]})
    return records


# ---------------------------------------------------------------------------------------------
# the trainer
# ---------------------------------------------------------------------------------------------


@guarded
def train_student(bank: AdapterBank, cfg: config.MOPDConfig) -> Run:
    """Create (or resume) the student adapter and distil every domain's teacher into it."""
    cfg.check()
    domains = get_domains(cfg.domains)
    check_budget(bank.tokenizer, domains, cfg.max_new_tokens)
    vocab = bank.base.config.vocab_size
    if cfg.topk > vocab:
        raise ValueError(f"topk={cfg.topk} exceeds the vocabulary of {vocab} tokens; pick topk <= {vocab}")
    for teacher in cfg.route.values():
        if not bank.is_teacher(teacher):
            raise ValueError(f"the bank has no {teacher!r}; train it (train_grpo) or load it "
                             f"(bank.load) first. The bank holds: {bank.names}, foreign: {list(bank.foreign)}")
    if cfg.init_from is not None and cfg.init_from == cfg.student:
        raise ValueError(f"init_from={cfg.init_from!r} is the student being trained; start from another adapter")
    if cfg.init_from is not None:
        bank.check(cfg.init_from)
    taught = sorted(d for d, t in cfg.route.items() if t == cfg.student)
    if taught:  # it would distil from itself (KL 0) and overwrite the teacher
        raise ValueError(f"student={cfg.student!r} is the teacher of {taught}; a student never overwrites a "
                         "teacher: give the student another name (student=...)")
    bank.claim(cfg.student, "student")
    run = Run.open(cfg.experiment, cfg.student, cfg)  # names, the folder's role, the checkpoint's config
    run.check_teachers(teacher_manifest(bank, cfg.route))  # the teachers it read, by their weights' sha256
    bank.start(cfg.student, cfg.init_from, seed=cfg.seed, role="student")
    if cfg.compact_teachers:  # after the start: a student copied from a teacher copies its fp32 weights
        for teacher in sorted(set(cfg.route.values()) & set(bank.names)):
            bank.compact(teacher)
    bank.set_checkpointing(cfg.gradient_checkpointing)
    params = list(bank.parameters(cfg.student).values())
    optimizer = adamw(params, cfg.lr)
    generator = torch.Generator().manual_seed(cfg.seed)
    start = run.resume(bank, cfg.student, optimizer, generator)
    tracked = [ex for d in domains.values()
               for ex in d.test_examples(d.eval_lengths[0], cfg.track_prompts, cfg.seed + 1)]
    with bank.use(cfg.student, trainable=True) as model:
        # prefill once: the sampler's prompt prefill runs with grad and the training forward reuses it
        # (see rollout.completion_logits); where train mode differs from eval mode, a second pass
        reuse = prefill_reusable(model, cfg.gradient_checkpointing) and cfg.golden_gain is None
        for step in tqdm(range(start, cfg.steps + 1), desc=cfg.student, disable=not cfg.progress,
                         initial=start - 1, total=cfg.steps):
            if step in cfg.track_steps:
                run.trace += track(bank, cfg, tracked, step)
            # --- 1. sample: one completion per prompt, from the student, every domain --------
            #        (GKD's lmbda < 1: on an off-policy step, from each domain's teacher, or the gold)
            started = time.perf_counter()
            examples = [ex for d in domains.values()
                        for ex in d.train_examples(step, cfg.prompts_per_domain, cfg.seed)]
            student_prefixes = on_policy(cfg, step)
            if student_prefixes:
                rollout = sample(model, bank.tokenizer, examples, temperature=cfg.temperature, top_p=cfg.top_p,
                                 max_new_tokens=cfg.max_new_tokens, min_new_tokens=cfg.min_new_tokens,
                                 generator=generator, grad_prefill=reuse)
                sampled = cost.sampled(rollout)
            else:                                            # no student prefill to reuse: prefill is None
                rollout, sampled = off_policy_rollout(bank, cfg, examples, generator)
            anchors = len(examples)
            if cfg.golden_gain is not None:                  # UCMOPD: m hotter samples per prompt too
                gg = cfg.golden_gain
                explore = sample(model, bank.tokenizer, [ex for ex in examples for _ in range(gg.samples)],
                                 temperature=gg.temperature, top_p=gg.top_p,
                                 max_new_tokens=cfg.max_new_tokens, generator=generator)
                sampled = cost.add(sampled, cost.sampled(explore))   # a second sampling: its own prompt prefill
                rollout = concat(rollout, explore, bank.tokenizer.pad_token_id)
            # --- 2-3. route each completion to its domain's teacher, which scores it -----------
            teacher = routing.teacher_outputs(bank, rollout, cfg.route, mode=cfg.scoring, k=cfg.topk)
            # --- 4. the student's logits with grad (on its sampling prefill when reused); the loss
            with train_mode(model, enabled=not reuse):
                student_logits = completion_logits(model, rollout, prefill=rollout.prefill)  # (B, C, V)
            if cfg.golden_gain is None and cfg.endorsement is None:
                loss, info = mopd_objective(cfg, student_logits, rollout, teacher)
                extra = {}
            else:
                loss, info, extra = ucmopd_objective(cfg, step, student_logits, rollout, teacher, anchors)
            # --- 5. update the student only -----------------------------------------------------
            row = {"step": step, "loss": loss.item(), **guarded_step(loss, params, optimizer, cfg.grad_clip),
                   **sampled, "cost/teacher_prefill_tokens": cost.forward_tokens(rollout),
                   **cost.trained(rollout)}
            # --- 6. log per domain, evaluate, checkpoint ---------------------------------------
            if anchors < len(rollout.examples):              # golden gain: the metrics of the anchors
                rollout = rollout.rows(list(range(anchors)))
                info = {k: v[:anchors] if torch.is_tensor(v) and v.dim() == 2 else v for k, v in info.items()}
            row.update(domain_metrics(info, rollout, rollout.rewards(bank.tokenizer)))
            row["kl"] = masked_mean(info["kl"], rollout.completion_mask).item()
            row.update(extra)
            if cfg.lmbda < 1:
                row["on_policy"] = float(student_prefixes)
            run.seconds += time.perf_counter() - started  # wall time, kept out of the (deterministic) metrics
            if cfg.eval_every and (step % cfg.eval_every == 0 or step == cfg.steps):
                row.update(accuracy_by_length(model, bank.tokenizer, domains, cfg.eval_n, cfg.eval_split))
            run.log(row)
            warn_if_stuck(run, cfg)
            if step % cfg.checkpoint_every == 0 or step == cfg.steps:
                run.save(step, bank, cfg.student, optimizer, generator)
    run.finish(bank, cfg.student)
    return run


# ---------------------------------------------------------------------------------------------
# the stuck warning
# ---------------------------------------------------------------------------------------------


class StuckWarning(UserWarning):
    """A domain's stuck share stayed above MOPDConfig.stuck_warn_share for stuck_window steps."""


REMEDIES = ('the on-policy forward KL (loss="fkl"), the generalised JSD (loss="jsd" with beta), teacher '
            'prefixes for part of the batches (lmbda < 1), Top-k over the teacher\'s support with local support '
            'matching, or top_p on the student\'s rollouts (MOPDConfig options; docs/stuck.md)')


def warn_if_stuck(run: Run, cfg: config.MOPDConfig) -> list[dict]:
    """After a step is logged: warn (StuckWarning) and record it in `run.warnings` (checkpoint.pt and
    warnings.json) when a domain's stuck_share has been above cfg.stuck_warn_share for the last
    cfg.stuck_window logged steps; at most once per domain and run. Read from `run.metrics`, which a
    resumed run restores with its warnings: a resume continues the streak and never warns twice."""
    warned = {w["domain"] for w in run.warnings if w.get("kind") == "stuck"}
    last, new = run.metrics[-cfg.stuck_window:], []
    for d in cfg.domains:
        shares = [r.get(f"stuck_share/{d}") for r in last]
        if d in warned or len(last) < cfg.stuck_window or not all(
                s is not None and s > cfg.stuck_warn_share for s in shares):
            continue
        message = (f"the student looks stuck on {d}: {shares[-1]:.1%} of its sampled tokens at step "
                   f"{last[-1]['step']} (more than {cfg.stuck_warn_share:.0%} for {cfg.stuck_window} steps) are "
                   f"ones it gives p > {cfg.stuck_p} and the teacher log p < {cfg.stuck_teacher_logp}; there "
                   f"the reverse KL's gradient vanishes. Remedies: {REMEDIES}")
        entry = {"kind": "stuck", "step": last[-1]["step"], "domain": d, "share": shares[-1],
                 "window": cfg.stuck_window, "threshold": cfg.stuck_warn_share, "message": message}
        run.warnings.append(entry)
        new.append(entry)
        warnings.warn(message, StuckWarning, stacklevel=3)
    return new
