"""The trainers' configs, without torch: what a config is, its presets and its checks.

    MOPDConfig     stage 3, the MOPD student (distill.train_student); its UCMOPD options
                   GoldenGain and Endorsement (ucmopd has their maths)
    GRPOConfig     stage 2, a teacher; Mix-RL and Cascade RL (grpo.train_grpo)
    OfflineConfig  the offline baselines, RFT and soft labels, and SFT on gold (offline.train_offline)

Each is a plain dataclass: the string under a field is its documentation (and the command line's
help for its flag, `mopd_mini.cli`), `for_model` gives a model size's preset (MOPD_FAST=1: the CI
mode's), `check()` refuses a setting the trainer cannot use with a ValueError naming the field.
Nothing here imports torch, so `mopd-mini <command> --help` builds its flags without it. The classes'
one public path is this module (and the package: `from mopd_mini import MOPDConfig`); their old paths
in the trainers' modules (`from mopd_mini.distill import MOPDConfig`) still work for one release, with a
DeprecationWarning (`old_paths`).
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

from . import deprecation
from .domains import get_domains
from .validate import validate

FAST = os.environ.get("MOPD_FAST", "") not in ("", "0")
"""the CI mode: fewer steps through the trainers' presets, same code paths"""


def fast_or(full: int, fast: int) -> int:
    """`fast` in the CI mode (MOPD_FAST=1), else `full`."""
    return fast if FAST else full


def experiment_name(name: str = "course") -> str:
    """Runs of the CI mode live apart from full ones, so neither resumes the other."""
    return f"{name}-fast" if FAST else name


def preset(config_cls, model: str, qwen3: dict, overrides: dict):
    """A trainer config for a model size: the class defaults (tuned on the tiny model) or the
    `qwen3` values for any other model; under MOPD_FAST=1 steps halve, evaluations shrink and the
    runs move to runs/<experiment>-fast/; then the caller's overrides."""
    cfg = config_cls(**({} if model == "tiny" else qwen3))
    if FAST:
        cfg = replace(cfg, steps=max(1, cfg.steps // 2), eval_n=min(cfg.eval_n, 32),
                      experiment=experiment_name(cfg.experiment))
    return replace(cfg, **overrides)


def check_experiment(experiment) -> str | None:
    """`experiment` if it names a folder inside RUNS_DIR (it may nest, as "ablations/other_strong"),
    or None (in memory); else a ValueError naming the value: an empty name would write into runs/
    itself, '..' or an absolute path outside it."""
    if experiment is None:
        return None
    parts = str(experiment).replace("\\", "/").split("/") if isinstance(experiment, str) else None
    if (parts is None or Path(experiment).is_absolute() or experiment != experiment.strip()
            or any(p in ("", ".", "..") or p != p.strip() or "\0" in p for p in parts)):
        raise ValueError(f"experiment={experiment!r} is not a folder name inside {_runs_dir()}/: give a non-empty "
                         "name (letters, digits, '-', '_'; 'a/b' nests), without '..', an absolute path or "
                         "leading/trailing spaces; e.g. experiment='course' (or None to keep the run in memory)")
    return experiment

def _runs_dir() -> Path:
    """mopd_mini.runs.RUNS_DIR, the folder the runs live in (a caller may have moved it), read without
    importing that module: until it is imported nobody can have moved it from runs/."""
    runs = sys.modules.get(f"{__package__}.runs")
    return runs.RUNS_DIR if runs is not None else Path("runs")


def check_loop(cfg) -> None:
    """The settings every trainer's config shares (steps, lr, sampling, evaluation, checkpoints):
    a ValueError naming the field and the fix for a value the loop cannot use."""
    if not cfg.temperature > 0:
        raise ValueError(f"temperature must be > 0 (1: on-policy sampling), got {cfg.temperature}")
    if not cfg.lr > 0:
        raise ValueError(f"lr must be > 0, got {cfg.lr}")
    if not cfg.grad_clip > 0:
        raise ValueError(f"grad_clip must be > 0 (the max gradient norm; 1e9 turns the clip off), got {cfg.grad_clip}")
    for name in ("steps", "max_new_tokens", "eval_n", "checkpoint_every"):
        if getattr(cfg, name) < 1:
            raise ValueError(f"{name} must be >= 1, got {getattr(cfg, name)}")
    if getattr(cfg, "eval_split", "test") not in ("test", "val"):
        raise ValueError(f"eval_split must be 'test' or 'val', got {cfg.eval_split!r}")
    if cfg.eval_every < 0:
        raise ValueError(f"eval_every must be >= 0 (0: never evaluate), got {cfg.eval_every}")
    check_experiment(cfg.experiment)


HOWS = ("linear", "cat", "ties", "dare_ties")
"""how `merge.merge` combines adapters: peft's factor-wise linear, the exact weighted sum (cat), ties, dare_ties"""
TEACHER_OF = "teacher_{}"  # the adapter name of domain d's teacher
SCORING_MODES = ("mixed", "swap")
"""how the routed teachers score a batch (`routing.teacher_outputs`): one pass with per-row adapters, or one pass per teacher"""


# ---------------------------------------------------------------------------------------------
# UCMOPD's options, as MOPDConfig fields (None: off)
# ---------------------------------------------------------------------------------------------


@dataclass
class GoldenGain:
    """Golden-Gain Enhancement: per prompt, the anchor (the student's usual sample at temperature
    1) plus `samples` exploration completions at `temperature` with nucleus `top_p`; an
    exploration completion joins the loss iff its positive-advantage density is at least the
    anchor's (`golden_gain_keep`).

    How the loss treats the kept exploration samples: exactly like the anchor (the paper's choice).
    Their per-token advantage is recomputed under the student's own temperature-1 distribution,
    A_t = log pi_T(y_t) - log pi_S(y_t), so each token still says "the teacher likes this token more
    (or less) than the student does, here"; no importance weight pi_S / q corrects for the tokens
    having been drawn from the hotter, truncated q. The objective is then the reverse KL at the
    prefixes of a MIXTURE of visit distributions, tilted towards samples with much to gain: biased
    on purpose (that tilt is the method) and of bounded variance, where a ratio pi_S / q of
    several tokens can be large. `importance_cap` switches the correction on for MOPD-PG (a
    per-token weight min(pi_S(y_t) / q(y_t), cap), stopgrad; anchors get 1), to measure what the
    choice costs. MOPD-Top-k and the exact KL are full-distribution objectives at each prefix, so
    for them an exploration sample only adds prefixes and no weight applies.
    """

    samples: int = 3
    """m: exploration completions per prompt (the paper: 3 to 7)"""
    temperature: float = 1.5
    """their sampling temperature (the paper: 1.5)"""
    top_p: float = 0.9
    """their nucleus (the paper: 0.9)"""
    importance_cap: float | None = None
    """None: no importance weight (the paper's choice); a float: MOPD-PG weights exploration tokens
    by min(pi_S / q, cap)"""

    def check(self) -> None:
        validate(self)
        if self.samples < 1:
            raise ValueError(f"golden_gain.samples must be >= 1 (exploration completions per prompt), got {self.samples}")
        if not self.temperature > 0:
            raise ValueError(f"golden_gain.temperature must be > 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"golden_gain.top_p must be in (0, 1], got {self.top_p}")
        if self.importance_cap is not None and not self.importance_cap > 0:
            raise ValueError(f"golden_gain.importance_cap must be > 0 or None, got {self.importance_cap}")


@dataclass
class Endorsement:
    """Teacher-Endorsement Filtering: a seeded Bernoulli keep-mask on the loss's tokens
    (`endorsement_mask`); the mask of step t is drawn from seed (MOPDConfig.seed, t, `seed`), so a
    resumed run draws the same masks."""

    seed: int = 0
    """offset of the mask's random stream (0: derived from the run's seed and the step alone)"""

    def check(self) -> None:
        validate(self)


# ---------------------------------------------------------------------------------------------
# stage 3: the MOPD student
# ---------------------------------------------------------------------------------------------

FORMS = ("pg", "topk", "kl")
"""the three MOPD loss forms (PG and the exact KL on the per-token reverse KL; Top-k a generalised KL on the
teacher's top-k set, notebook 04 section 3), computed every step for logging whatever the loss"""
LOSSES = FORMS + ("fkl", "jsd")
"""every loss MOPDConfig.loss can name: the three forms, then the cures (computed only when chosen)"""
PREFIXES = ("teacher", "gold")

READ_ONLY_WITH = {  # field: (the settings that read it, in words; whether a config has them)
    "clip": ("loss='pg'", lambda c: c.loss == "pg"),
    "topk_correction": ("loss='topk' without topk_support", lambda c: c.loss == "topk" and not c.topk_support),
    "topk_support": ("loss='topk'", lambda c: c.loss == "topk"),
    "beta": ("loss='jsd'", lambda c: c.loss == "jsd"),
    "lmbda_prefix": ("lmbda < 1", lambda c: c.lmbda < 1),
}
"""the MOPDConfig options that act only with some settings: anywhere else a value other than the
default would be recorded (config.json, the export) as if it acted, so check() refuses it, naming
both (GoldenGain.importance_cap: loss='pg' only, checked beside them)"""


@dataclass
class MOPDConfig:
    """Settings for the MOPD student (defaults: the tiny model's; see `for_model`)."""

    loss: str = "pg"
    """which loss to minimise: a form of the reverse KL, pg (the paper's default), topk or kl; or fkl
    (the on-policy forward KL) or jsd (the generalised JSD with `beta`)"""
    clip: float | None = 5.0
    """pg: the advantage is clipped to [-clip, clip] (None: no clip); the paper uses 5"""
    topk: int = 64
    """topk: size of the teacher's top-k set (the paper uses 64); also the logged top-k masses"""
    topk_correction: bool = True
    """topk: add the paper's `- p_S + p_T` bias correction (False: the naive truncated sum)"""
    topk_support: bool = False
    """topk: local support matching, the reverse KL between student and teacher both renormalised over the
    teacher's top-k set (arXiv 2603.25562); topk_correction then has no effect (its terms sum to 0)"""
    beta: float = 0.5
    """jsd: the interpolation, TRL's GKD convention: M = beta p_T + (1 - beta) p_S; 0 is the forward KL, 1 the reverse KL"""
    lmbda: float = 1.0
    """GKD's on-policy fraction: with probability 1 - lmbda a step's prefixes come from `lmbda_prefix`
    instead of the student's samples (1: always on-policy); < 1 needs a full-distribution loss (not pg).
    Where the student is stuck (p_S(y) -> 1 on a token y with p_T(y) -> 0) it changes WHICH positions
    train, not the gradient at one: the loss at a position reads the full distributions, whoever wrote
    the prefix, so at the stuck position the reverse KL's gradient vanishes as on-policy; an off-policy
    step trains the positions after the teacher's tokens, which the stuck student's own samples never
    reach. Its stuck share says nothing there (the teacher's token is not one it rejects): the detector
    reads on-policy steps only (docs/stuck.md)"""
    lmbda_prefix: str = "teacher"
    """where an off-policy step's prefixes come from: "teacher" (each domain's completions sampled by its own
    routed teacher) or "gold" (the gold answer's tokens and the end of turn)"""
    top_p: float = 1.0
    """nucleus truncation of the student's rollouts (1: none; arXiv 2603.25562 samples with top-p; the nucleus
    always keeps the most likely token, so a tiny top_p samples greedily); the loss
    still reads the student's untruncated distribution. It cannot free a stuck student: where p_S(y) -> 1
    on a wrong token y, p_S(y) >= top_p and the nucleus is y alone, so the student samples y every time
    and trains on the same vanishing gradient; top_p only cuts the tail below (rollout.nucleus)"""
    steps: int = 300
    """optimizer steps"""
    prompts_per_domain: int = 8
    """prompts of each domain per step, one student completion each (N = 1)"""
    domains: tuple[str, ...] = ("binding", "recall")
    """the domains to compose; each needs a teacher adapter named teacher_<domain>"""
    lr: float = 1e-3
    """AdamW learning rate of the student adapter (Qwen3 in the original: 1e-4)"""
    temperature: float = 1.0
    """student sampling temperature (1: on-policy; the paper uses 1)"""
    max_new_tokens: int = 4
    """completion budget: the answer, its period and the end of turn (tiny: 3 tokens; Qwen3's tokenizer: up to 6, e.g. `v127.`)"""
    min_new_tokens: int = 0
    """no end of turn before this many tokens (0: none); only bench.scaling sets it, to time long completions"""
    grad_clip: float = 1.0
    """max global gradient norm"""
    scoring: str = "mixed"
    """how teachers run: "mixed" (one pass, per-row adapters) or "swap" (one pass per teacher)"""
    eval_every: int = 25
    """greedy accuracy on test prompts every this many steps (0: never)"""
    eval_n: int = 64
    """test prompts per domain and evaluated length"""
    eval_split: str = "test"
    """which split the periodic evaluations use: "test", or "val" when choosing hyperparameters"""
    track_steps: tuple[int, ...] = (1, 10, 25, 50, 100, 200, 300)
    """steps at which per-token tensors of the tracked prompts are recorded (before that step's update)"""
    track_prompts: int = 4
    """fixed test prompts per domain whose per-token KL and advantage are recorded"""
    student: str = "student"
    """the student adapter's name (re-created fresh: zero-initialised)"""
    init_from: str | None = None
    """an adapter in the bank the student starts from (a copy; e.g. multi-round MOPD); None: fresh, B = 0"""
    seed: int = 0
    """seeds the student's init, the prompts and the sampling"""
    experiment: str | None = "course"
    """runs/<experiment>/<student>/ holds the run; None keeps it in memory"""
    checkpoint_every: int = 50
    """steps between checkpoints (a killed run resumes from the last one)"""
    progress: bool = True
    """show a progress bar"""
    gradient_checkpointing: bool = False
    """recompute activations in the backward (on in the Qwen3 presets: fits a 24 GB GPU)"""
    compact_teachers: bool = False
    """hold the routed teacher adapters in the base's dtype when it is bf16 / fp16 (`AdapterBank.compact`:
    half their memory, the fused routed update; scores within bf16's own rounding, tests/test_compact.py).
    They stay compacted in the bank after the run (frozen: reload one to train it). No effect on an
    fp32 base, on "base" or on foreign teachers. Off by default"""
    teachers: dict[str, str] | None = None
    """domain -> teacher name where it is not teacher_<domain>: another adapter, "base" (the stage-1
    base), or a foreign teacher (`bank.add_foreign`); None: every domain to teacher_<domain>"""
    golden_gain: GoldenGain | None = None
    """UCMOPD's Golden-Gain Enhancement (None: off; GoldenGain() the paper's settings)"""
    endorsement: Endorsement | None = None
    """UCMOPD's Teacher-Endorsement Filtering (None: off; Endorsement() to switch it on)"""
    stuck_p: float = 0.9
    """the stuck detector (logged, never trained on; docs/stuck.md): a sampled token is stuck when the
    student gives it more than this probability and the teacher less than e^stuck_teacher_logp"""
    stuck_teacher_logp: float = -5.0
    """the stuck detector: the teacher's log-prob of the token below this (-5: under 0.67%)"""
    stuck_warn_share: float = 0.02
    """a StuckWarning (once per domain and run, kept in warnings.json) when a domain's stuck share
    stays above this for stuck_window consecutive steps (1: never); 0.02 is about one stuck token a
    step in a batch of 8 chain completions"""
    stuck_window: int = 50
    """the stuck detector: consecutive steps above stuck_warn_share before it warns (longer than the
    early streaks of a student that is still learning: docs/stuck.md)"""

    def __post_init__(self):
        if isinstance(self.domains, list):  # a str stays one, for check() to refuse (validate)
            self.domains = tuple(self.domains)

    @classmethod
    def for_model(cls, model: str = "tiny", **overrides) -> "MOPDConfig":
        """Defaults for a model size: the tiny model's, or the FactWorld experiment's for Qwen3.
        Under MOPD_FAST=1 (the CI mode) steps halve and runs go to runs/<experiment>-fast/."""
        qwen3 = dict(lr=1e-4, max_new_tokens=8, steps=200, eval_n=100, gradient_checkpointing=True,
                     track_steps=(1, 10, 25, 50, 100, 200))
        return preset(cls, model, qwen3, overrides)

    def check(self) -> None:
        validate(self)  # every field by its annotation first: the checks below compare numbers
        if self.loss not in LOSSES:
            raise ValueError(f"unknown loss {self.loss!r}; valid losses: {LOSSES}")
        if self.scoring not in SCORING_MODES:
            raise ValueError(f"unknown scoring {self.scoring!r}; valid: {SCORING_MODES}")
        if self.clip is not None and not self.clip > 0:
            raise ValueError(f"clip must be > 0, or None for no clip; got {self.clip}")
        if self.topk < 1:
            raise ValueError(f"topk must be >= 1, got {self.topk}")
        if not 0 <= self.beta <= 1:
            raise ValueError(f"beta must be in [0, 1] (0: forward KL, 1: reverse KL; jsd), got {self.beta}")
        if not 0 <= self.lmbda <= 1:
            raise ValueError(f"lmbda (the on-policy fraction) must be in [0, 1], got {self.lmbda}")
        if self.lmbda_prefix not in PREFIXES:
            raise ValueError(f"unknown lmbda_prefix {self.lmbda_prefix!r}; valid: {PREFIXES}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1] (1: no truncation), got {self.top_p}")
        self.check_ignored()
        if self.lmbda < 1 and self.loss == "pg":
            raise ValueError("lmbda < 1 needs a loss on the teacher's full distribution (kl, fkl, jsd or topk): "
                             "MOPD-PG's advantage is a single-sample estimate that holds only for tokens the "
                             "student sampled, and an off-policy step's tokens are the teacher's (or the gold)")
        if self.lmbda < 1 and self.golden_gain is not None:
            raise ValueError("lmbda < 1 and golden_gain cannot be combined: Golden-Gain compares the student's "
                             "own samples, which an off-policy step does not have; use one of them")
        if self.prompts_per_domain < 1:
            raise ValueError(f"prompts_per_domain must be >= 1, got {self.prompts_per_domain}")
        get_domains(self.domains)
        unknown = sorted(set(self.teachers or {}) - set(self.domains))
        if unknown:
            raise ValueError(f"teachers names domain(s) {unknown} that are not in domains={self.domains}; "
                             "route only the domains being distilled")
        if self.golden_gain is not None:
            self.golden_gain.check()
        if not 0 <= self.stuck_p < 1:
            raise ValueError(f"stuck_p must be in [0, 1) (a probability the student exceeds), got {self.stuck_p}")
        if not self.stuck_teacher_logp <= 0:
            raise ValueError(f"stuck_teacher_logp must be <= 0 (a log-prob; -5 is 0.67%), got {self.stuck_teacher_logp}")
        if not 0 <= self.stuck_warn_share <= 1:
            raise ValueError(f"stuck_warn_share must be in [0, 1] (1: never warn), got {self.stuck_warn_share}")
        if self.stuck_window < 1:
            raise ValueError(f"stuck_window must be >= 1 (steps), got {self.stuck_window}")
        check_loop(self)

    def check_ignored(self) -> None:
        """A ValueError for an option set away from its default where the chosen settings ignore it
        (`READ_ONLY_WITH`), naming the option, its value and the setting that ignores it."""
        defaults = MOPDConfig.__dataclass_fields__
        for name, (reads, acts) in READ_ONLY_WITH.items():
            value, default = getattr(self, name), defaults[name].default
            if value != default and not acts(self):
                raise ValueError(f"{name}={value!r} has no effect with {self._ignoring(name)}: {name} acts only "
                                 f"with {reads}; leave {name} at its default {default!r}, or choose {reads}")
        gg = self.golden_gain
        if isinstance(gg, GoldenGain) and gg.importance_cap is not None and self.loss != "pg":
            raise ValueError(f"golden_gain.importance_cap={gg.importance_cap!r} has no effect with loss={self.loss!r}: "
                             "the importance weight acts only with loss='pg' (Top-k and the KLs read the full "
                             "distribution at each prefix); leave it at None, or choose loss='pg'")

    def _ignoring(self, name: str) -> str:
        """The setting that makes option `name` idle, as the user gave it."""
        if name == "lmbda_prefix":
            return f"lmbda={self.lmbda!r}"
        if name == "topk_correction" and self.loss == "topk":
            return "topk_support=True"
        return f"loss={self.loss!r}"

    @property
    def route(self) -> dict[str, str]:
        return {d: (self.teachers or {}).get(d, TEACHER_OF.format(d)) for d in self.domains}


# ---------------------------------------------------------------------------------------------
# stage 2: a teacher (and the RL baselines)
# ---------------------------------------------------------------------------------------------


@dataclass
class GRPOConfig:
    """Settings for one teacher (defaults: the tiny model's, tuned; see `for_model`)."""

    domain: str | tuple[str, ...] = "binding"
    """the domain this adapter learns ("binding" or "recall"), or a tuple of domains (Mix-RL)"""
    steps: int = 200
    """optimizer steps"""
    prompts_per_step: int = 8
    """P: distinct prompts of each domain per step"""
    group_size: int = 8
    """G: completions sampled per prompt; the advantage is normalised within each group"""
    lr: float = 1e-3
    """AdamW learning rate (LoRA on the tiny model: 1e-3; Qwen3 in the original: 1e-4)"""
    temperature: float = 1.0
    """sampling temperature of the rollouts"""
    max_new_tokens: int = 4
    """completion budget: the answer, its period and the end of turn (tiny: 3 tokens; Qwen3's tokenizer: up to 6, e.g. `v127.`)"""
    grad_clip: float = 1.0
    """max global gradient norm"""
    eval_every: int = 25
    """greedy accuracy on held-out test prompts every this many steps (0: never)"""
    eval_n: int = 64
    """test prompts per evaluated length"""
    eval_split: str = "test"
    """which split the periodic evaluations use: "test", or "val" when choosing hyperparameters"""
    seed: int = 0
    """seeds the adapter's init, the prompts and the sampling"""
    experiment: str | None = "course"
    """runs/<experiment>/<adapter>/ holds the run; None keeps it in memory"""
    checkpoint_every: int = 50
    """steps between checkpoints (a killed run resumes from the last one)"""
    progress: bool = True
    """show a progress bar"""
    gradient_checkpointing: bool = False
    """recompute activations in the backward (on in the Qwen3 presets: fits a 24 GB GPU)"""
    name: str | None = None
    """the adapter's name (None: teacher_<domain> for one domain, mixrl for several)"""
    init_from: str | None = None
    """an adapter in the bank to start from (a copy of it; Cascade RL, multi-round); None: fresh, B = 0"""
    eval_domains: tuple[str, ...] = ()
    """domains evaluated besides the trained ones (a cascade keeps its first domain here)"""

    def __post_init__(self):
        if isinstance(self.eval_domains, list):  # a str stays one, for check() to refuse (validate)
            self.eval_domains = tuple(self.eval_domains)

    @classmethod
    def for_model(cls, model: str = "tiny", **overrides) -> "GRPOConfig":
        """Defaults for a model size: the tiny model's, or the FactWorld experiment's for Qwen3.
        Under MOPD_FAST=1 (the CI mode) steps halve and runs go to runs/<experiment>-fast/."""
        qwen3 = dict(lr=1e-4, max_new_tokens=8, eval_n=100, gradient_checkpointing=True)
        return preset(cls, model, qwen3, overrides)

    def check(self) -> None:
        """A ValueError naming the field and the fix for any setting the trainer cannot use."""
        validate(self)  # every field by its annotation first: the checks below compare numbers
        get_domains(self.domains)
        if self.eval_domains:
            get_domains(self.eval_domains)
        if self.init_from is not None and self.init_from == self.adapter:
            raise ValueError(f"init_from={self.init_from!r} is the adapter being trained; start from "
                             "another adapter, or give this run another name")
        if self.prompts_per_step < 1:
            raise ValueError(f"prompts_per_step must be >= 1, got {self.prompts_per_step}")
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2: the advantage compares the completions of one "
                             f"prompt, and a group of one never learns; got {self.group_size}")
        check_loop(self)

    @property
    def domains(self) -> tuple[str, ...]:
        return (self.domain,) if isinstance(self.domain, str) else tuple(self.domain)

    @property
    def adapter(self) -> str:
        if self.name:
            return self.name
        return TEACHER_OF.format(self.domain) if len(self.domains) == 1 else "mixrl"


# ---------------------------------------------------------------------------------------------
# the offline baselines
# ---------------------------------------------------------------------------------------------

OFFLINE_LOSSES = ("ce", "soft")
"""the losses OfflineConfig.loss can name: cross-entropy (RFT on the teachers' samples, SFT on gold),
soft labels' forward KL"""
RENAMED_VALUES = {"loss": {"sft": "ce"}}
"""setting values renamed since some runs were saved, {field: {old: new}}: OfflineConfig.loss "sft" is
"ce" (it is cross-entropy on whatever data it is given, RFT's or gold). A config that names the old
value warns once and takes the new one (one release); a saved run's config that names it is the same
run (`new_values`: runs.Run.checkpoint and the stuck copy's check compare with it)"""
KEEP = ("correct", "all")


def new_values(saved: dict) -> dict:
    """A saved config (as a dict) with every value renamed since it was written (RENAMED_VALUES)
    given its new name: what the same settings read as today."""
    return {k: RENAMED_VALUES.get(k, {}).get(v, v) if isinstance(v, str) else v for k, v in saved.items()}


@dataclass
class OfflineConfig:
    """Settings for an offline student: cross-entropy (loss="ce": RFT on the teachers' kept samples, or
    SFT on gold with `offline.gold`'s data) or soft-label distillation (loss="soft")."""

    loss: str = "ce"
    """ce: cross-entropy on the given completions (RFT: the kept teacher samples; SFT on gold: the gold
    answers); soft: forward KL from the teacher's full distribution ("sft", its old name, warns and reads ce)"""
    samples_per_prompt: int = 4
    """K: completions each teacher samples per training prompt of its domain"""
    prompts_per_domain: int = 256
    """distinct training prompts per domain (the first ones of the train split, as every trainer's step 1, 2, ...)"""
    keep: str = "correct"
    """which samples are trained on: correct (rejection sampling; the default for both losses) or all"""
    steps: int = 200
    """optimizer steps (epochs = steps x batch_size / kept samples)"""
    batch_size: int = 16
    """kept completions per step, both domains shuffled together (16: MOPD's 8 prompts per domain)"""
    lr: float = 1e-3
    """AdamW learning rate of the student adapter"""
    temperature: float = 1.0
    """the teachers' sampling temperature (1: their own distribution)"""
    max_new_tokens: int = 4
    """completion budget of the teachers' samples (a completion that does not end is wrong)"""
    grad_clip: float = 1.0
    """max global gradient norm"""
    domains: tuple[str, ...] = ("binding", "recall")
    """the domains to compose; each needs a teacher adapter named teacher_<domain> (or routed by `teachers`)"""
    teachers: dict[str, str] | None = None
    """domain -> the adapter that samples (and, for soft labels, scores) it where it is not
    teacher_<domain>, as MOPDConfig.teachers: e.g. {"chain": "sft_teacher"}; None: teacher_<domain>"""
    collect_batch: int = 256
    """completions sampled per teacher forward batch in `collect` (memory only; same samples)"""
    eval_every: int = 25
    """greedy accuracy every this many steps (0: never)"""
    eval_n: int = 64
    """evaluation prompts per domain and length"""
    eval_split: str = "test"
    """which split the periodic evaluations use: "test", or "val" when choosing hyperparameters"""
    seed: int = 0
    """seeds the teachers' sampling, the student's init and the data order"""
    name: str | None = None
    """the student adapter's name (None: rft for ce, soft for soft)"""
    experiment: str | None = "course"
    """runs/<experiment>/<name>/ holds the run; None keeps it (and the collected set) in memory"""
    checkpoint_every: int = 50
    """steps between checkpoints (a killed run resumes from the last one)"""
    progress: bool = True
    """show a progress bar"""
    gradient_checkpointing: bool = False
    """recompute activations in the backward (on in the Qwen3 presets)"""

    def __post_init__(self):
        renamed = RENAMED_VALUES["loss"].get(self.loss) if isinstance(self.loss, str) else None
        if renamed is not None:
            warnings.warn(f"OfflineConfig(loss={self.loss!r}) is deprecated and will be refused in the next release: "
                          f"write loss={renamed!r} (the same cross-entropy)", DeprecationWarning, stacklevel=3)
            self.loss = renamed

    @classmethod
    def for_model(cls, model: str = "tiny", **overrides) -> "OfflineConfig":
        """Defaults for a model size (Qwen3: the FactWorld experiment's lr and budget).
        Under MOPD_FAST=1 (the CI mode) steps halve and runs go to runs/<experiment>-fast/."""
        qwen3 = dict(lr=1e-4, max_new_tokens=8, eval_n=100, collect_batch=64, gradient_checkpointing=True)
        return preset(cls, model, qwen3, overrides)

    def check(self) -> None:
        validate(self)  # every field by its annotation first: the checks below compare numbers
        if self.loss not in OFFLINE_LOSSES:
            raise ValueError(f"unknown loss {self.loss!r}; valid losses: {OFFLINE_LOSSES}")
        if self.keep not in KEEP:
            raise ValueError(f"unknown keep {self.keep!r}; valid: {KEEP}")
        for name in ("samples_per_prompt", "prompts_per_domain", "batch_size", "collect_batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        get_domains(self.domains)
        unknown = sorted(set(self.teachers or {}) - set(self.domains))
        if unknown:
            raise ValueError(f"teachers names domain(s) {unknown} that are not in domains={self.domains}; "
                             "route only the domains being trained")
        check_loop(self)

    @property
    def adapter(self) -> str:
        return self.name or {"ce": "rft", "soft": "soft"}[self.loss]

    @property
    def route(self) -> dict[str, str]:
        return {d: (self.teachers or {}).get(d, TEACHER_OF.format(d)) for d in self.domains}


def old_paths(module: str, names: tuple[str, ...]):
    """The module-level `__getattr__` of a module the config classes `names` used to be imported from:
    it gives this module's class with a DeprecationWarning (for one release), and refuses any other name."""
    return deprecation.old_names(module, {name: f"{__name__}:{name}" for name in names})
