"""mopd_mini: Multi-Teacher On-Policy Distillation at course scale.

Every model is a LoRA adapter on ONE frozen base: per-domain teachers trained by GRPO, and a
student distilled from all of them on its own rollouts, each rollout scored by its own domain's
teacher, minimising the per-token reverse KL. The tree reads as the pipeline:

    models, tokenizer   the base (tiny, shipped; or Qwen3-1.7B)     load_base
    adapters            the LoRA bank on that base                  AdapterBank
    rollout             prompts, on-policy sampling, masks          sample, generate_answers
    routing             the routed teachers' outputs                routing.teacher_outputs
    losses              pg_loss, topk_reverse_kl, reverse_kl        (pure tensor functions)
    grpo, distill       stage 2 (teachers) and stage 3 (MOPD)       train_grpo, train_student
    evaluation          accuracy, floors, the normalised score      evaluate, normalised_scores
    offline, cost       RFT / soft-label baselines; what runs cost  train_offline, collect, cost

The names below are imported on first use (PEP 562), so `import mopd_mini.cli` and
`mopd-mini --help` do not import torch; `mopd_mini.X` and `from mopd_mini import X` work as usual.

`mopd_mini.evaluate` is the function. The evaluation module is `mopd_mini.evaluation`; its old path
`mopd_mini.evaluate` is kept for one release as an alias module registered in sys.modules when the
package is imported (`_old_evaluate_module`), not as a file: a submodule file of that name would be
bound on the package by the import system and hide the function. The alias imports nothing until a
name is asked of it, then warns (DeprecationWarning) and gives mopd_mini.evaluation's object, so
`from mopd_mini.evaluate import accuracy_by_length` keeps working and `import mopd_mini.evaluate`
leaves `mopd_mini.evaluate` the function.
"""

import logging
import sys
import types
import warnings

# peft 0.21 reads transformers' deprecated `is_gradient_checkpointing` alias whenever an adapter is
# created, which would print a FutureWarning in every notebook cell that makes one.
warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
# `import peft` imports bitsandbytes when it is installed (the quant extra, in dev), which on a CPU with
# AVX512-BF16 logs that its fused CPU kernel (package `kernels`) is missing: a kernel models.load_base
# switches off anyway (models._keep_4bit_trainable), so the message only confuses.
logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)

__all__ = ["load_base", "generate_answers", "sample", "AdapterBank", "LoraSettings", "BASE", "GRPOConfig",
           "train_grpo", "MOPDConfig", "train_student", "evaluate", "normalised_scores", "format_table",
           "format_scores", "Domain", "DOMAINS", "get_domains", "losses", "TINY", "QWEN3_ID", "QWEN3_RANDOM"]
__all__ += ["OfflineConfig", "collect", "train_offline", "cost"]


def _load_all() -> None:
    """The package's names, all at once (the first time any is asked for)."""
    global losses, cost, BASE, AdapterBank, LoraSettings, MOPDConfig, train_student, DOMAINS, Domain
    global get_domains, evaluate, format_scores, format_table, normalised_scores, GRPOConfig, train_grpo
    global QWEN3_ID, QWEN3_RANDOM, TINY, load_base, generate_answers, sample, OfflineConfig, collect, train_offline
    from . import losses
    from .adapters import BASE, AdapterBank, LoraSettings
    from .config import GRPOConfig, MOPDConfig, OfflineConfig
    from .distill import train_student
    from .domains import DOMAINS, Domain, get_domains
    from .evaluation import evaluate, format_scores, format_table, normalised_scores  # the function, not the module
    from .grpo import train_grpo
    from .models import QWEN3_ID, QWEN3_RANDOM, TINY, load_base
    from .rollout import generate_answers, sample
    from . import cost
    from .offline import collect, train_offline


from . import deprecation  # noqa: E402  (torch-free)

_old_names = deprecation.old_names(__name__, {"train_teacher": "mopd_mini.grpo:train_grpo"})


def __getattr__(name: str):
    if name in ("losses", "cost"):  # submodules: import just that one (as `from . import cost` inside the package)
        import importlib

        return importlib.import_module(f".{name}", __name__)
    if name in __all__:
        _load_all()
        return globals()[name]
    return _old_names(name)  # a renamed name, one release (with a DeprecationWarning); else AttributeError


def __dir__():
    return sorted(set(globals()) | set(__all__))


def _old_evaluate_module() -> types.ModuleType:
    """The alias module at the old path mopd_mini.evaluate (see the package docstring)."""
    alias = types.ModuleType(f"{__name__}.evaluate", "Deprecated alias of mopd_mini.evaluation (one release).")

    def old_path(name: str):
        if name.startswith("__") and name != "__all__":  # module probes (__file__, __path__, ...): an alias has none
            raise AttributeError(name)
        warnings.warn(f"mopd_mini.evaluate as a module is deprecated and will be removed in the next release: "
                      f"import {name} from mopd_mini.evaluation (mopd_mini.evaluate is the function)",
                      DeprecationWarning, stacklevel=2)
        from . import evaluation

        return getattr(evaluation, name)

    alias.__getattr__ = old_path
    return alias


sys.modules.setdefault(f"{__name__}.evaluate", _old_evaluate_module())
