"""mopd_mini: Multi-Teacher On-Policy Distillation at course scale.

Every model is a LoRA adapter on ONE frozen base: per-domain teachers trained by GRPO, and a
student distilled from all of them on its own rollouts, each rollout scored by its own domain's
teacher, minimising the per-token reverse KL. The tree reads as the pipeline:

    models, tokenizer   the base (tiny, shipped; or Qwen3-1.7B)     load_base
    adapters            the LoRA bank on that base                  AdapterBank
    rollout             prompts, on-policy sampling, masks          sample, generate_answers
    teachers            routed teacher scoring                      teachers.score
    losses              pg_loss, topk_reverse_kl, reverse_kl        (pure tensor functions)
    grpo, distill       stage 2 (teachers) and stage 3 (MOPD)       train_teacher, train_student
    evaluate            accuracy, floors, the normalised score      evaluate, normalised_scores
    offline, cost       RFT / soft-label baselines; what runs cost  train_offline, collect, cost
"""

import logging
import warnings

# peft 0.21 reads transformers' deprecated `is_gradient_checkpointing` alias whenever an adapter is
# created, which would print a FutureWarning in every notebook cell that makes one.
warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
# `import peft` imports bitsandbytes when it is installed (the quant extra, in dev), which on a CPU with
# AVX512-BF16 logs that its fused CPU kernel (package `kernels`) is missing: a kernel models.load_base
# switches off anyway (models._keep_4bit_trainable), so the message only confuses.
logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)

from . import losses  # noqa: E402
from .adapters import BASE, AdapterBank, LoraSettings  # noqa: E402
from .distill import MOPDConfig, train_student  # noqa: E402
from .domains import DOMAINS, Domain, get_domains  # noqa: E402
from .evaluate import evaluate, format_scores, format_table, normalised_scores  # noqa: E402
from .grpo import GRPOConfig, train_teacher  # noqa: E402
from .models import QWEN3_ID, QWEN3_RANDOM, TINY, load_base  # noqa: E402
from .rollout import generate_answers, sample  # noqa: E402
from . import cost  # noqa: E402
from .offline import OfflineConfig, collect, train_offline  # noqa: E402

__all__ = ["load_base", "generate_answers", "sample", "AdapterBank", "LoraSettings", "BASE", "GRPOConfig",
           "train_teacher", "MOPDConfig", "train_student", "evaluate", "normalised_scores", "format_table",
           "format_scores", "Domain", "DOMAINS", "get_domains", "losses", "TINY", "QWEN3_ID", "QWEN3_RANDOM"]
__all__ += ["OfflineConfig", "collect", "train_offline", "cost"]
