"""The same experiment on verl: folded teachers, parquet prompts, a reward file and the config.

    python -m mopd_mini.export verl --run runs/course --out build/verl_export
    python -m mopd_mini.export verl --teacher binding=runs/course/teacher_binding \\
                                    --teacher recall=runs/course/teacher_recall --out build/verl_export

When an experiment outgrows one GPU, it moves to verl (0.9.1, `pip install verl`), an existing
distributed engine with multi-teacher on-policy distillation, rather than to more home-made code.
The export writes everything verl needs, in verl's own formats:

    <out>/
      student_base/           the base as a full checkpoint (+ tokenizer): the student starts here
      teachers/<domain>/      each teacher adapter folded into a full checkpoint (+ tokenizer)
      data/train.parquet      the course's training prompts, in the course's batch order
      data/val.parquet        the test prompts the course evaluates on
      reward/factworld_reward.py   FactWorld's relaxed score as verl's `compute_score`
      verl_config.yaml        the Hydra overrides (and the command line) that map MOPDConfig on verl
      run_verl.sh             that command line, ready to launch on a cluster
      export.json             what was exported from where, and the fold checks

All or nothing: the run's settings, the teachers' folders and origins, the GPU layout and --out are
checked before anything is written; the export is built in a hidden staging folder beside --out
and renamed into place at the end (swapped with an existing one in one atomic step where Linux can),
so a failed, interrupted (SIGINT, SIGTERM, SIGHUP) or killed export leaves --out as it was, and the
next export removes a dead one's staging folder. A non-empty --out is refused unless --force, which
replaces a previous export (a folder holding the export's marker, which lists every file the export
wrote with its size and sha256, and nothing else anywhere in its tree: a file added or changed since
is refused by name) by removing exactly the files the marker lists; never the working folder or one
above it, a repository, a home or root folder, the run or a teacher; an empty --out is an error.
Files get the modes the umask gives (the group can read them).

Faithful to the run: every setting comes from the run's config.json (a missing key is an error naming
it); each teacher's domain comes from its own record and a mismatch with the routing is refused unless
--allow-domain-mismatch (recorded in export.json, as is every setting a flag overrides, in
"overridden"); a teacher under a name the student's record names (its checkpoint's copy of
teacher_manifest.json, which the file must match) must have the weights the student read. With
--run, each domain's teacher is the one the student was distilled from
(MOPDConfig.teachers: a round-2 teacher by its folder in the run, or "base", the base itself), and
every MOPDConfig field is carried into the config (CARRIED), has no effect on what is trained
(NO_EFFECT), or is refused by name when set (REFUSED: init_from, UCMOPD's golden_gain and
endorsement, GKD's lmbda), as are a LoRA dropout and the losses below.

verl's loader is the judge of the config, not this module: `make check-verl` loads the YAML into
verl 0.9.1's own Hydra config, `validate_config` and distillation dataclass, in its own venv
(tools/check_verl.py). The mapping, what carries over exactly and what does not, is in
docs/scale_out.md.

What does not carry over, and is refused rather than exported as another objective:
  * loss="topk": verl's only top-k mode, forward_kl_topk, is the FORWARD KL over the teacher's
    top-k, and its per-token top-k term is computed by a fixed function inside the actor's forward,
    so a loss registered in verl's registry cannot supply the bias-corrected reverse KL.
  * loss="kl": verl's teachers return the sampled token's log-prob or a top-k, never the full
    distribution, so the exact full-vocabulary reverse KL cannot be formed. (verl's loss_mode
    "kl" is the single-sample k1 estimator, the same as "k1": not our "kl".)
  * loss="fkl" and loss="jsd" (the stuck student's cures): both need the teacher's full
    distribution, which verl's teachers never return (its forward_kl_topk covers the top-k only).

The module is a package of files, each one job: for_verl (what verl reads: the layout, data, reward,
config and what carries over), fold (the teachers folded into the base), run (the run read and checked,
an old checkpoint upgraded), folder (--out: all or nothing), write (the whole export), command (the
command line; `python -m mopd_mini.export` runs its main). Every name is importable from here.
"""

from __future__ import annotations

from .command import interrupted, main, parser  # noqa: F401
from .fold import FOLD_TOLERANCE, check_origins, fold_teacher, probe_ids, save_base  # noqa: F401
from .folder import (EXPORT_NAMES, MARKER, check_out, cleaned_on_signal, clear_stale, file_sha256,  # noqa: F401
                     foreign_files, marker, protected, remove_export, swap_into_place)
from .for_verl import (CARRIED, MAPPING, NO_EFFECT, NOT_IN_VERL, REFUSED, REWARD_NAME, VERL_VERSION, Layout,  # noqa: F401
                       fit, hydra_value, max_prompt_tokens, messages, reward_source, row, train_rows, unexportable,
                       val_rows, verl_command, verl_overrides, write_parquet)
from .run import (check_manifest, check_routing, check_teachers, config_from_json, lora_of, read_run,  # noqa: F401
                  teacher_domains)
from .write import build, export_verl, tiny_run, write_yaml  # noqa: F401

from .. import deprecation  # noqa: E402

__getattr__ = deprecation.old_names(__name__, {"merge_teacher": "mopd_mini.export.fold:fold_teacher",  # one release
                                               "MERGE_TOLERANCE": "mopd_mini.export.fold:FOLD_TOLERANCE"})
