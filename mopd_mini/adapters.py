"""The LoRA bank: every model in the course is a named adapter on ONE frozen base.

    bank = AdapterBank(*load_base("tiny"))
    bank.create("teacher_binding")            # fresh: B = 0, so it starts exactly AT the base
    bank.load("teacher_recall", "runs/course/teacher_recall")
    bank.copy("student", "teacher_binding_r2")  # an independent copy: round 2 starts from it
    with bank.use("teacher_binding"): ...     # one adapter active;  bank.use(BASE): none
    bank.save("student", "runs/course/student")

Because teachers and student share the base weights, "same origin" (the paper's condition for
a small initial KL) holds by construction, and two teachers plus a student cost one base model
of memory. The paper trains full models; LoRA is the course's substitution (as in the FactWorld
experiment: r = 16, alpha = 32, all linear layers, dropout 0).

Adapter folders are peft's own format (`PeftModel.from_pretrained(base, folder)` loads one),
plus `mopd_mini.json`, the fingerprint of the base and tokenizer an adapter was trained on:
loading an adapter of another (or unknown) origin is refused unless `allow_foreign=True`.

A teacher can also be a SEPARATE model (its own base plus its own adapter, e.g. a teacher of
another origin for the same-origin ablation): `bank.add_foreign("teacher_binding_other",
other_bank, "teacher_binding")` registers it under a name that routing accepts like an adapter's.
It is refused unless `allow_foreign=True` when its base differs, and always when its tokenizer
differs (token ids would not mean the same: there is no override for that).

peft holds every adapter in fp32, also over a bf16 base (the student's AdamW needs fp32 weights). A
FROZEN teacher needs none: `bank.compact("teacher_binding")` holds it in the base's dtype (bf16 or
fp16: half its bytes), and the bank then refuses to train it (reload it for fp32 weights).
`MOPDConfig(compact_teachers=True)` does this to the routed teachers (docs/benchmarks.md, scale_teachers).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import tempfile
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from peft import LoraConfig, PeftModel, get_peft_model, load_peft_weights, set_peft_model_state_dict

from .validate import guarded_methods

BASE = "base"  # the name that means "adapters disabled"
ORIGIN_FILE = "mopd_mini.json"
ROLES = {"teacher": "a GRPO adapter (train_grpo: a teacher, Mix-RL or a cascade)",
         "student": "an MOPD student (train_student)",
         "offline": "an offline student (train_offline: RFT or soft labels)",
         "merge": "a merged adapter (merge.merge)",
         "foreign": "a foreign teacher (bank.add_foreign)"}
"""what made an adapter; a trainer never trains over an adapter of another role"""
SIGNATURE = {"group_size": "teacher", "samples_per_prompt": "offline", "student": "student"}
"""a config.json field only that trainer's config has -> the role of the run folder it is in"""


def check_adapter_name(name) -> str:
    """`name` if it can name an adapter (a torch module name, and a run folder); else a ValueError."""
    if (not isinstance(name, str) or not name or name != name.strip() or name in (".", "..")
            or any(c in name for c in "./\\\0")):
        raise ValueError(f"the adapter name {name!r} must be a non-empty name without '.', '/', '\\' or "
                         "leading/trailing spaces (it names a torch module and a run folder), e.g. 'student_2'")
    return name


def role_of_folder(folder: str | Path) -> str | None:
    """The role (ROLES) of the run in `folder`, from its config.json; None if it has none (or it is
    unreadable): an adapter folder that no trainer of this course wrote."""
    try:
        config = json.loads((Path(folder) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return role_of_config(config)


def role_of_config(config) -> str | None:
    """The role (ROLES) of the trainer whose config (as a dict) this is; None if none of them."""
    if not isinstance(config, dict):
        return None
    return next((role for key, role in SIGNATURE.items() if key in config), None)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def share(path: str | Path) -> None:
    """Give `path` (a file, or a folder and all it holds) the mode a plain open() or mkdir() would:
    0o666 / 0o777 less the umask. mkstemp and mkdtemp make 0o600 / 0o700 files, and safetensors
    writes through them too, so on a shared (group) folder nobody else could read an adapter."""
    path, mask = Path(path), _umask()
    for p in [path, *(path.rglob("*") if path.is_dir() else ())]:
        if not p.is_symlink():
            p.chmod((0o777 if p.is_dir() else 0o666) & ~mask)


@dataclass
class LoraSettings:
    """LoRA hyper-parameters (defaults: the FactWorld MOPD experiment's)."""

    r: int = 16
    """rank of the update  delta W = (alpha / r) B A"""
    alpha: int = 32
    """scaling numerator"""
    dropout: float = 0.0
    """dropout on the adapter's input"""
    target_modules: str | tuple[str, ...] = "all-linear"
    """which linear layers get an adapter ("all-linear": every one but the output head)"""

    def peft_config(self) -> LoraConfig:
        targets = self.target_modules if isinstance(self.target_modules, str) else list(self.target_modules)
        return LoraConfig(r=self.r, lora_alpha=self.alpha, lora_dropout=self.dropout,
                          target_modules=targets, init_lora_weights=True, task_type="CAUSAL_LM")


def origin_of(base, tokenizer) -> dict:
    """What makes two models "of the same origin": the base weights and the tokenizer."""
    cfg = base.config
    emb = base.get_input_embeddings().weight
    sample = (emb[:64, :64].detach().float().cpu() * 1000).round().to(torch.int32).numpy().tobytes()
    dims = f"{cfg.model_type}|{cfg.vocab_size}|{cfg.hidden_size}|{cfg.num_hidden_layers}"
    vocab = json.dumps(sorted(tokenizer.get_vocab().items()))
    return {"base": hashlib.sha256(dims.encode() + sample).hexdigest()[:16],
            "tokenizer": hashlib.sha256(vocab.encode()).hexdigest()[:16],
            "base_name": str(getattr(cfg, "_name_or_path", "") or "")}


def atomic_write(path: Path, data: bytes) -> None:
    """Write to a temporary name, then rename: a kill mid-write leaves the old file intact."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0o600 would keep the group out
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:  # a failed write (disk full, Ctrl-C) leaves no half file behind
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass
class ForeignTeacher:
    """A teacher that is not an adapter on the bank's base: `adapter` (or BASE) in another bank."""

    bank: "AdapterBank"
    """the other model's own bank (its base, its tokenizer, its adapters)"""
    adapter: str
    """which of its adapters scores (BASE: its base alone)"""


def same_tokenizer(a, b) -> list[str]:
    """What differs between two tokenizers for token ids to mean the same ([] if nothing):
    the vocabulary (every token and its id), the special tokens, the chat template."""
    differs = []
    if a.get_vocab() != b.get_vocab():
        differs.append("vocabulary")
    for attr in ("pad_token_id", "eos_token_id", "bos_token_id", "unk_token_id"):
        if getattr(a, attr, None) != getattr(b, attr, None):
            differs.append(attr)
    if getattr(a, "chat_template", None) != getattr(b, "chat_template", None):
        differs.append("chat_template")
    return differs


@guarded_methods
class AdapterBank:
    """Named LoRA adapters on one frozen base. `model` is the peft model once one adapter exists."""

    def __init__(self, base, tokenizer, lora: LoraSettings | None = None):
        base.requires_grad_(False)
        self.base, self.tokenizer = base, tokenizer
        self.lora = lora or LoraSettings()
        self.model = base  # becomes a PeftModel at the first create/load
        self.origin = origin_of(base, tokenizer)
        self.foreign: dict[str, ForeignTeacher] = {}  # teachers that are separate models, by name
        self.roles: dict[str, str] = {}  # adapter -> the role (ROLES) of what made it, where known
        self.compacted: set[str] = set()  # adapters held in the base's 16-bit dtype (`compact`): never trained

    def add_foreign(self, name: str, bank: "AdapterBank", adapter: str, allow_foreign: bool = False) -> None:
        """Register `adapter` of ANOTHER bank (another base) as a teacher called `name`: routing
        (`routing.teacher_outputs`) then sends a domain's rows to that model. Refused when the tokenizers
        differ (always) or, unless `allow_foreign=True`, when the bases differ."""
        bank.check(adapter)
        check_adapter_name(name)
        if name == BASE or name in self.names:
            raise ValueError(f"{name!r} is already an adapter of this bank (or reserved); give the "
                             "foreign teacher another name, e.g. f'{adapter}_other'")
        differs = same_tokenizer(self.tokenizer, bank.tokenizer)
        if differs or bank.base.config.vocab_size != self.base.config.vocab_size:
            raise ValueError(
                f"the foreign teacher {name!r} has another tokenizer ({', '.join(differs) or 'vocab_size'} "
                "differ): the student's token ids would mean other tokens to it, so its log-probs say "
                "nothing about the student's samples. allow_foreign cannot override this; use a model "
                "with this bank's tokenizer.")
        if bank.origin["base"] != self.origin["base"] and not allow_foreign:
            raise ValueError(
                f"the teacher {name!r} sits on another base ({bank.origin['base_name'] or 'unnamed'}) than "
                "this bank's: not of the same origin, so its initial KL to the student can be large (the "
                "paper's section 4.4.2). Pass allow_foreign=True to use it anyway (the same-origin "
                "ablation does this on purpose).")
        self.foreign[name] = ForeignTeacher(bank, adapter)

    def is_teacher(self, name: str) -> bool:
        """True for every name routing accepts: an adapter of this bank, BASE, or a foreign teacher."""
        return name == BASE or name in self.names or name in self.foreign

    # -- what is in the bank ------------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        return list(self.model.peft_config) if isinstance(self.model, PeftModel) else []

    def check(self, name: str) -> str:
        """`name` if it is an adapter in the bank (or BASE); else a ValueError listing them."""
        if name != BASE and name not in self.names:
            raise ValueError(f"unknown adapter {name!r}; the bank holds: {[BASE] + self.names}")
        return name

    def parameters(self, name: str) -> dict[str, torch.nn.Parameter]:
        """The adapter's own weights (lora_A / lora_B of every wrapped layer), by name."""
        self.check(name)
        return {n: p for n, p in self.model.named_parameters() if f".{name}." in n and "lora_" in n}

    # -- create, load, save -------------------------------------------------------------------

    def create(self, name: str, lora: LoraSettings | None = None, seed: int = 0) -> None:
        """A fresh adapter: A random (seeded), B = 0, so delta W = B A = 0 and it starts AT the base.
        An adapter of the same name is replaced (re-running a notebook cell does not stack)."""
        self._add(name, (lora or self.lora).peft_config(), seed)

    def copy(self, source: str, name: str) -> None:
        """A new adapter `name` with `source`'s LoRA settings and weights: identical outputs, but
        its own tensors (training one never moves the other). Cascade RL's second stage and
        multi-round MOPD start from a copy. An adapter called `name` is replaced."""
        self.check(source)
        if source == BASE:
            raise ValueError(f"{BASE!r} has no adapter weights to copy; use create({name!r}) for a fresh "
                             "adapter (B = 0: exactly the base)")
        if name == source:
            raise ValueError(f"cannot copy {source!r} onto itself; pick another name")
        config, weights = copy.deepcopy(self.model.peft_config[source]), self.state(source)
        self._add(name, config, seed=0)
        self.load_state(name, {n.replace(f".{source}.", f".{name}."): t for n, t in weights.items()})

    def claim(self, name: str, role: str) -> None:
        """A ValueError if `name` is an adapter of the bank made by another role (ROLES) than `role`,
        a foreign teacher, or compacted (`compact`): what a trainer checks before it trains `name`."""
        self._refuse_compacted(name)
        if name in self.foreign:
            raise ValueError(f"{name!r} is a foreign teacher of this bank (bank.add_foreign); "
                             f"{ROLES[role]} never trains over it: give it another name")
        held = self.roles.get(name) if name in self.names else None
        if held is not None and held != role:
            raise ValueError(f"{name!r} in the bank is {ROLES[held]}; {ROLES[role]} never trains over it: "
                             "give it another name")

    def start(self, name: str, init_from: str | None = None, seed: int = 0, role: str | None = None) -> None:
        """What every trainer does first: a fresh adapter (`init_from=None`) or a copy of one;
        `role` (ROLES): refused over an adapter of another role (`claim`), and recorded; refused
        over a compacted adapter (`compact`: a frozen teacher)."""
        self._refuse_compacted(name)
        if role is not None:
            self.claim(name, role)
        if init_from is None:
            self.create(name, seed=seed)
        else:
            self.copy(init_from, name)
        if role is not None:
            self.roles[name] = role

    def load(self, name: str, path: str | Path, allow_foreign: bool = False) -> None:
        """Load a saved adapter (peft folder) under `name`, frozen. Refuses another origin; on a
        corrupt folder raises and leaves the bank as it was (minus any adapter of that name)."""
        path = Path(path)
        if not (path / "adapter_config.json").exists():
            raise FileNotFoundError(f"no adapter at {path} (adapter_config.json missing); train it first "
                                    f"or check the path (saved adapters live in runs/<experiment>/<name>/)")
        unreadable = [f.name for f in path.iterdir() if f.is_file() and not os.access(f, os.R_OK)]
        if unreadable:
            raise PermissionError(f"the adapter at {path} is there but this user cannot read {unreadable}; "
                                  f"ask its owner to make it readable (chmod -R g+rX {path}); the files are fine")
        self._check_origin(path, allow_foreign)
        try:
            self._add(name, LoraConfig.from_pretrained(str(path)), seed=0)
            weights = load_peft_weights(str(path), device=str(self.base.device))
            result = set_peft_model_state_dict(self.model, weights, adapter_name=name)
            missing = [k for k in result.missing_keys if f".{name}." in k and "lora_" in k]
            if missing or result.unexpected_keys:
                raise ValueError(f"weights do not fit: missing {missing[:3]}, unexpected {result.unexpected_keys[:3]}")
        except Exception as err:  # a corrupt or truncated file, or an adapter of another shape
            self._drop(name)
            raise ValueError(f"could not load the adapter at {path}: {err}. Delete the folder and "
                             "re-create the adapter (re-run the training that made it).") from err
        self.roles[name] = role_of_folder(path)
        self._settle()

    def _add(self, name: str, config: LoraConfig, seed: int) -> None:
        """Replace-or-add an adapter with this config; A drawn from `seed`, B = 0."""
        if name == BASE:
            raise ValueError(f"{BASE!r} is reserved for the adapter-free base; pick another name")
        check_adapter_name(name)
        if name in self.foreign:
            raise ValueError(f"{name!r} is already a foreign teacher of this bank (bank.add_foreign), and "
                             "routing would take it; give the adapter another name, or drop the foreign "
                             f"teacher first (del bank.foreign[{name!r}])")
        self._drop(name)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            if isinstance(self.model, PeftModel):
                self.model.add_adapter(name, config)
            else:
                self.model = get_peft_model(self.base, config, adapter_name=name)
        self._settle()

    def _drop(self, name: str) -> None:
        self.roles.pop(name, None)
        self.compacted.discard(name)  # an adapter made again under this name is peft's fp32 one
        if name not in self.names:
            return
        if len(self.names) == 1:
            self.model = self.model.unload()  # back to the plain base: its LoRA layers removed
        else:
            self.model.delete_adapter(name)
        self._settle()

    def _settle(self) -> None:
        """The bank's resting state: eval mode (trainers switch to train mode only for the
        student's own forward) and EVERY adapter frozen (`use(..., trainable=True)` unfreezes one)."""
        self.model.eval()
        for n, p in self.model.named_parameters():
            if "lora_" in n:
                p.requires_grad_(False)

    def save(self, name: str, path: str | Path) -> Path:
        """Save `name` as a peft folder (plus its origin); files are swapped in atomically. The weights
        are written in the dtype they are held in: fp32, or the base's bf16 / fp16 for a compacted
        adapter (exactly what it computes with); `load` and peft's `from_pretrained` read either."""
        path = Path(path)
        self.check(name)
        with tempfile.TemporaryDirectory(dir=path.parent if path.parent.exists() else None) as tmp:
            self.model.save_pretrained(tmp, selected_adapters=[name])
            src = Path(tmp) / name  # peft writes a non-default adapter into a sub-folder
            src = src if src.exists() else Path(tmp)
            (src / ORIGIN_FILE).write_text(json.dumps(self.origin, indent=1))
            share(src)  # the group may read it, as the umask says (mkdtemp and safetensors: 0o600)
            path.mkdir(parents=True, exist_ok=True)
            for f in src.iterdir():
                os.replace(f, path / f.name)
        return path

    def _check_origin(self, path: Path, allow_foreign: bool) -> None:
        if allow_foreign:
            return
        if not (path / ORIGIN_FILE).exists():
            raise ValueError(f"the adapter at {path} has no {ORIGIN_FILE} (it was not saved by AdapterBank.save), "
                             "so nothing shows it was trained on this base and tokenizer. Pass "
                             "allow_foreign=True to load it if you know it was.")
        try:
            saved = json.loads((path / ORIGIN_FILE).read_text())
        except ValueError:  # not JSON (a truncated or overwritten file)
            saved = None
        if not isinstance(saved, dict):
            raise ValueError(f"the adapter's origin file {path / ORIGIN_FILE} is corrupt; re-create the "
                             "adapter (re-run the training that made it), or pass allow_foreign=True "
                             "to load it without the same-origin check")
        differs = [k for k in ("base", "tokenizer") if saved.get(k) != self.origin[k]]
        if differs:
            name = saved.get("base_name")
            trained_on = f"it was trained on {name!r}" if name else "its base has no name"
            raise ValueError(
                f"the adapter at {path} was trained on another {' and '.join(differs)} than this bank's "
                f"({trained_on}); its token ids or weights would not mean the same here. Pass "
                "allow_foreign=True to load it anyway (the same-origin ablation does this on purpose).")

    # -- a frozen adapter in the base's dtype --------------------------------------------------

    def compact(self, name: str) -> torch.dtype:
        """Hold the adapter `name` in the base's dtype when that is a 16-bit float (bf16, fp16): half
        the bytes of peft's fp32 adapter, and in the routed pass (mopd_mini.routing) its update is
        one fused addmm into the base's output. For a FROZEN adapter (a teacher): the rounding to 16
        bits is done once and its scores then differ from the fp32 adapter's by about what the bf16
        base's own rounding does (tests/test_compact.py measures both), and the bank refuses to train
        it from then on (`use(..., trainable=True)`, `start`, every trainer): AdamW needs fp32
        weights. To undo, load it again (`bank.load(name, folder)`: fp32 again, from a folder saved
        before compacting) or re-create it. On an fp32 (or fp64) base nothing changes: the adapter is
        already in the base's dtype and is not marked. Returns the dtype the adapter is held in."""
        self.check(name)
        if name == BASE:
            raise ValueError(f"{BASE!r} has no adapter weights to compact; name an adapter: {self.names}")
        dtype = self.base.dtype
        if not (dtype.is_floating_point and torch.finfo(dtype).bits == 16):
            return next(iter(self.parameters(name).values())).dtype   # fp32 base: nothing to halve
        with torch.no_grad():
            for p in self.parameters(name).values():
                p.requires_grad_(False)
                p.data = p.data.to(dtype)   # the fp32 storage goes (nothing else holds it)
        self.compacted.add(name)
        return dtype

    def _refuse_compacted(self, name: str) -> None:
        if name in self.compacted:
            raise ValueError(
                f"{name!r} is compacted (bank.compact: held in {self.base.dtype} as a frozen teacher), and "
                "an adapter in 16 bits is not trained here (AdamW needs fp32 weights). Load it again "
                f"(bank.load({name!r}, folder): fp32 from a folder saved before compacting) or train another "
                f"adapter (init_from={name!r} copies it into a new fp32 one)")

    # -- which adapter runs -------------------------------------------------------------------

    def freeze(self, name: str) -> None:
        for p in self.parameters(name).values():
            p.requires_grad_(False)

    @contextmanager
    def use(self, name: str, trainable: bool = False):
        """Run with exactly one adapter active (BASE: none); `trainable` unfreezes that adapter only.
        Every other adapter stays frozen, and the previous state comes back on exit. A compacted
        adapter (`compact`) is refused as trainable."""
        self.check(name)
        if trainable:
            self._refuse_compacted(name)
        if not self.names:  # no adapter yet: the model is the plain base
            yield self.model
            return
        previous = self.model.active_adapter
        grads = {p: p.requires_grad for n, p in self.model.named_parameters() if "lora_" in n}
        try:
            if name == BASE:
                with self.model.disable_adapter():
                    yield self.model
            else:
                self.model.set_adapter(name, inference_mode=not trainable)
                yield self.model
        finally:
            self.model.set_adapter(previous)
            for p, flag in grads.items():  # exactly the trainable set we found
                p.requires_grad_(flag)

    def set_checkpointing(self, on: bool) -> None:
        """Activation checkpointing of the base in train mode (the student's forward): recompute
        each layer's activations in the backward instead of keeping them. About 2x less activation
        memory for a few % more time; sampling and teacher scoring (eval mode) are unaffected."""
        if on:
            self.base.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        elif self.base.is_activation_checkpointing:
            self.base.activation_checkpointing_disable()

    def state(self, name: str) -> dict[str, torch.Tensor]:
        """A copy of the adapter's weights (for checkpoints and tests)."""
        return {n: p.detach().clone() for n, p in self.parameters(name).items()}

    def load_state(self, name: str, state: dict[str, torch.Tensor]) -> None:
        params = self.parameters(name)
        with torch.no_grad():
            for n, t in state.items():
                params[n].copy_(t)

    def describe(self) -> dict:
        return {"adapters": self.names, "lora": asdict(self.lora), "origin": self.origin}


