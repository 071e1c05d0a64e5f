"""The offline baselines: a student trained on trajectories the TEACHERS sampled, once, up front.

    data = collect(bank, OfflineConfig())                     # each teacher samples its own domain
    train_offline(bank, OfflineConfig(loss="ce"), data)       # RFT: cross-entropy on the correct samples
    train_offline(bank, OfflineConfig(loss="soft"), data)     # soft labels on the same trajectories
    train_offline(bank, cfg, gold(bank.tokenizer, cfg))        # SFT on the generator's gold answers

One trainer, two losses (the critique's baselines, arXiv 2610.04272):

  collect   for every domain d, d's teacher samples K completions (temperature 1, no truncation)
            of each of the first `prompts_per_domain` training prompts of d; each completion is
            graded by d's verifiable reward (relaxed match, and it must end: as in GRPO).
            `keep="correct"` keeps the correct ones only: rejection sampling.
  ce        cross-entropy of the given completions: on the kept samples it is RFT,
            rejection-sampled fine-tuning; on `gold`'s answers, SFT on gold,
            L = masked_mean( -log pi_S(y_t | x, y_<t) )                       (losses.cross_entropy)
  soft      soft-label distillation: at every position of the same kept completions, the
            forward KL from the routed teacher's full distribution,
            L = masked_mean( sum_v p_T(v) log(p_T(v) / p_S(v)) )             (losses.forward_kl)
            the teacher (the completion's own domain's) prefills each batch again when it is
            trained on: its logits are not stored (at Qwen3's vocabulary they would be 0.6 MB a
            token), so soft labels cost a teacher prefill per trained completion per epoch.

Both train a fresh student adapter (B = 0: it starts AT the base) on the kept completions of
BOTH domains, shuffled together, `batch_size` completions a step, a new seeded permutation every
epoch. The kept set is the same for both losses by default, so the two differ in the loss only
(`keep="all"` gives soft labels every sample, wrong ones included: the teacher's distribution is
informative on them too).

Against MOPD: the student never samples. It learns on the teacher's trajectories (off-policy:
the positions are those the teacher visits, not the student's own), and every completion was
sampled before training began. The collected set is cached in runs/<experiment>/collect/, keyed
by the teachers' weights and the sampling settings, so RFT and soft labels (and a re-run) share
it; its sampling cost is recorded with it. `teachers` routes a domain to another adapter than
teacher_<domain> (as MOPDConfig.teachers): RFT from a teacher that SFT on gold traces built.
`gold` gives the generator's answers in the same form (one per prompt, all correct, nothing
sampled), so the same trainer is SFT on gold.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

import factworld

from . import cost
from . import routing
from .adapters import AdapterBank, atomic_write
from .domains import get_domains
from .evaluation import accuracy_by_length
from .validate import guarded
from .losses import cross_entropy, forward_kl
from .rollout import completion_logits, pack, sample
from . import runs
from .runs import Run, adamw, guarded_step
from . import config  # the config lives in the torch-free config module
from .config import KEEP  # noqa: F401
from .config import OFFLINE_LOSSES as LOSSES  # noqa: F401

__getattr__ = config.old_paths(__name__, ("OfflineConfig",))  # its old path, one release

# ---------------------------------------------------------------------------------------------
# the teachers' samples
# ---------------------------------------------------------------------------------------------


@dataclass
class Collected:
    """The teachers' samples: one entry per sampled completion, whether kept or not."""

    examples: list            # factworld.Example of each sample (its prompt, repeated K times)
    completions: list         # token ids of each completion, up to and including EOS (or the budget)
    correct: list             # 1.0 if the verifiable reward was 1, else 0.0
    cost: dict = field(default_factory=dict)   # cost/* totals of the sampling
    seconds: float = 0.0      # wall time of the sampling

    def kept(self, keep: str = "correct") -> list[int]:
        """Indices of the samples to train on: the correct ones, or all (never an empty completion)."""
        return [i for i, (c, ok) in enumerate(zip(self.completions, self.correct))
                if c and (keep == "all" or ok == 1.0)]

    def counts(self) -> dict:
        """Per domain: samples drawn and samples correct (kept by rejection sampling)."""
        out = {}
        for ex, ok in zip(self.examples, self.correct):
            d = out.setdefault(ex.task, {"sampled": 0, "correct": 0})
            d["sampled"] += 1
            d["correct"] += int(ok == 1.0)
        return out

    def to_json(self) -> bytes:
        rows = [{"example": asdict(e), "completion": c, "correct": ok}
                for e, c, ok in zip(self.examples, self.completions, self.correct)]
        return json.dumps({"rows": rows, "cost": self.cost, "seconds": self.seconds}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "Collected":
        d = json.loads(data)
        rows = d["rows"]
        return cls([factworld.Example(**r["example"]) for r in rows], [r["completion"] for r in rows],
                   [r["correct"] for r in rows], d["cost"], d["seconds"])


def gold(tokenizer, cfg: config.OfflineConfig) -> Collected:
    """The generator's own answers as a `Collected`: for every domain, its first
    `prompts_per_domain` training prompts (the prompts `collect` samples), each ONCE with its gold
    completion (the answer's tokens and the end of turn; for a trace domain, chain, the worked
    trace), all marked correct. What the offline trainer needs to be SFT on gold: an
    SFT-on-gold-traces teacher, or a student trained on the gold. Nothing is sampled (its cost is
    empty); `samples_per_prompt` is not used (one gold per prompt)."""
    cfg.check()
    out = Collected([], [], [])
    for d in get_domains(cfg.domains).values():
        for ex in d.train_examples(0, cfg.prompts_per_domain, cfg.seed):   # indices 0 .. P-1, as collect
            ids = tokenizer(ex.answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            if len(ids) > cfg.max_new_tokens:
                raise ValueError(f"the gold answer {ex.answer!r} of {d.name} takes {len(ids)} tokens with its end "
                                 f"of turn, more than max_new_tokens={cfg.max_new_tokens}; raise max_new_tokens "
                                 "(every method of a domain shares one completion budget)")
            out.examples.append(ex)
            out.completions.append(ids)
            out.correct.append(1.0)
    return out


def _collect_key(bank: AdapterBank, cfg: config.OfflineConfig) -> str:
    """What the collected set depends on: the teachers' weights and the sampling settings."""
    h = hashlib.sha256()
    for d, teacher in sorted(cfg.route.items()):
        h.update(f"{d}={teacher}".encode())
        for n, t in sorted(bank.state(teacher).items()):
            h.update(n.encode() + t.float().cpu().numpy().tobytes())
    h.update(json.dumps([cfg.samples_per_prompt, cfg.prompts_per_domain, cfg.temperature, cfg.max_new_tokens,
                         cfg.seed, list(cfg.domains)]).encode())
    return h.hexdigest()[:16]


def read_cache(path: Path, rows: int) -> Collected | None:
    """The collected set cached at `path`, or None after setting aside a cache that does not parse,
    lacks a key or holds another number of samples than `rows` (a truncated write, a hand edit): a
    warning names it and its new name, `<name>.corrupt-<time>`, and the caller samples again."""
    try:
        data = Collected.from_json(path.read_bytes())
        if len(data.examples) != rows:
            raise ValueError(f"{len(data.examples)} samples where these settings draw {rows}")
        return data
    except (ValueError, KeyError, TypeError, AttributeError) as err:  # JSONDecodeError is a ValueError
        aside = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
        os.replace(path, aside)
        warnings.warn(f"the collect cache {path} is unreadable ({type(err).__name__}: {err}); set aside as "
                      f"{aside.name}, sampling it again from the teachers", stacklevel=4)
        return None


@guarded
@torch.no_grad()
def collect(bank: AdapterBank, cfg: config.OfflineConfig) -> Collected:
    """Each domain's teacher samples K completions of each of its first `prompts_per_domain`
    training prompts; every sample is graded. Cached on disk (see the module docstring)."""
    cfg.check()
    domains = get_domains(cfg.domains)
    for teacher in cfg.route.values():
        if teacher not in bank.names:
            raise ValueError(f"the bank has no {teacher!r}; train it (train_grpo) or load it "
                             f"(bank.load) first. The bank holds: {bank.names}")
    path = None if cfg.experiment is None else runs.RUNS_DIR / cfg.experiment / "collect" / f"{_collect_key(bank, cfg)}.json"
    if path is not None and path.exists():
        cached = read_cache(path, cfg.samples_per_prompt * cfg.prompts_per_domain * len(domains))
        if cached is not None:
            return cached
    generator = torch.Generator().manual_seed(cfg.seed)
    K, out = cfg.samples_per_prompt, Collected([], [], [])
    started = time.perf_counter()
    per_batch = max(1, cfg.collect_batch // K)                     # prompts per sampling batch
    for name, d in domains.items():
        prompts = d.train_examples(0, cfg.prompts_per_domain, cfg.seed)   # indices 0 .. P-1
        with bank.use(cfg.route[name]) as model:
            for i in tqdm(range(0, len(prompts), per_batch), desc=f"collect {name}", disable=not cfg.progress):
                batch = [ex for ex in prompts[i:i + per_batch] for _ in range(K)]
                rollout = sample(model, bank.tokenizer, batch, temperature=cfg.temperature,
                                 max_new_tokens=cfg.max_new_tokens, generator=generator)
                rewards = rollout.rewards(bank.tokenizer)
                for b, ex in enumerate(batch):
                    n = int(rollout.completion_mask[b].sum())
                    out.examples.append(ex)
                    out.completions.append(rollout.completion_ids[b, :n].tolist())
                    out.correct.append(float(rewards[b]))
                out.cost = cost.add(out.cost, cost.sampled(rollout))
    out.seconds = time.perf_counter() - started
    if path is not None:
        atomic_write(path, out.to_json())
    return out


# ---------------------------------------------------------------------------------------------
# the trainer
# ---------------------------------------------------------------------------------------------


def batch_indices(n: int, batch_size: int, step: int, seed: int) -> list[int]:
    """The positions (into the kept set of n) of one step's batch: a pure function of (step, seed).
    The data is a sequence of epochs, each a fresh seeded permutation of range(n)."""
    out, perms, start = [], {}, (step - 1) * batch_size
    for pos in range(start, start + batch_size):
        epoch, offset = divmod(pos, n)
        if epoch not in perms:
            perms[epoch] = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 1_000_003 + epoch)).tolist()
        out.append(perms[epoch][offset])
    return out


@guarded
def train_offline(bank: AdapterBank, cfg: config.OfflineConfig, data: Collected | None = None) -> Run:
    """Create (or resume) a fresh student adapter and train it on the teachers' kept samples of
    every domain, by cross-entropy (ce) or by the forward KL from the routed teacher (soft)."""
    cfg.check()
    domains = get_domains(cfg.domains)
    if cfg.adapter in cfg.route.values():
        raise ValueError(f"name={cfg.adapter!r} is a teacher's name; give the student another name")
    bank.claim(cfg.adapter, "offline")
    run = Run.open(cfg.experiment, cfg.adapter, cfg)  # names, the folder's role, the checkpoint's config
    data = data if data is not None else collect(bank, cfg)
    kept = data.kept(cfg.keep)
    if not kept:
        raise ValueError(f"no {cfg.keep} teacher samples to train on ({data.counts()}); sample more "
                         "(samples_per_prompt, prompts_per_domain) or train the teachers first")
    bank.start(cfg.adapter, None, seed=cfg.seed, role="offline")
    bank.set_checkpointing(cfg.gradient_checkpointing)
    params = list(bank.parameters(cfg.adapter).values())
    optimizer = adamw(params, cfg.lr)
    generator = torch.Generator().manual_seed(cfg.seed)   # unused by the loop: the data order is seeded per epoch
    start = run.resume(bank, cfg.adapter, optimizer, generator)
    if start == 1:   # the teachers' sampling is this run's first cost: a step-0 row
        counts = data.counts()
        run.log({"step": 0, **data.cost, "kept": len(kept), "sampled": len(data.completions),
                 **{f"{k}/{d}": v for d, c in counts.items() for k, v in c.items()}})
        run.seconds += data.seconds
    with bank.use(cfg.adapter, trainable=True) as model:
        for step in tqdm(range(start, cfg.steps + 1), desc=cfg.adapter, disable=not cfg.progress,
                         initial=start - 1, total=cfg.steps):
            started = time.perf_counter()
            rows = [kept[i] for i in batch_indices(len(kept), cfg.batch_size, step, cfg.seed)]
            order = list(domains)   # domain blocks: each teacher's rows are a slice (one fused routed pass)
            rows.sort(key=lambda i: order.index(data.examples[i].task))
            rollout = pack(model, bank.tokenizer, [data.examples[i] for i in rows],
                           [data.completions[i] for i in rows])
            row = {"step": step, "epoch": (step - 1) * cfg.batch_size / len(kept)}
            if cfg.loss == "soft":   # the routed teachers prefill the batch (no grad), as MOPD's scoring
                teacher_logits = routing.teacher_outputs(bank, rollout, cfg.route, k=1).logits
                row["cost/teacher_prefill_tokens"] = cost.forward_tokens(rollout)
            model.train()
            logits = completion_logits(model, rollout)                       # (B, C, V)
            model.eval()
            if cfg.loss == "ce":
                loss, info = cross_entropy(logits, rollout.completion_ids, rollout.completion_mask)
            else:
                loss, info = forward_kl(logits, teacher_logits, rollout.completion_mask)
            row.update(loss=loss.item(), **guarded_step(loss, params, optimizer, cfg.grad_clip), **cost.trained(rollout))
            for d in domains:
                idx = [i for i, ex in enumerate(rollout.examples) if ex.task == d]
                row[f"rows/{d}"] = len(idx)
            run.seconds += time.perf_counter() - started
            if cfg.eval_every and (step % cfg.eval_every == 0 or step == cfg.steps):
                row.update(accuracy_by_length(model, bank.tokenizer, domains, cfg.eval_n, cfg.eval_split))
            run.log(row)
            if step % cfg.checkpoint_every == 0 or step == cfg.steps:
                run.save(step, bank, cfg.adapter, optimizer, generator)
    run.finish(bank, cfg.adapter)
    return run


# every public function (and class method) of this module: its annotated arguments checked at a call from outside
# the package (mopd_mini.validate.guard_public); the package's own calls, e.g. the training loop's, skip the checks
from .validate import guard_public  # noqa: E402

guard_public(globals())
