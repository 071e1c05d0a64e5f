"""The commands: each `cmd_<name>(args, cli)` runs one subcommand from its parsed flags and
returns the exit status. `cli` is the package mopd_mini.cli, through which a command loads the
base (`cli._bank`) and checks the model (`cli.check_model`), so that a replacement made there
(a test's "fail if the base loads") is the one that runs. Everything is checked before the base
loads (`prepare`)."""

from __future__ import annotations

from pathlib import Path

from .checks import ROLES, adapters_in, check_device, check_name, check_output, check_writable, run_folder
from .flags import config_from_args, config_values
from ..validate import check_value


def prepare(args, cli, experiment: str | None, writes: tuple[str, ...] = (), reads: tuple[str, ...] = (),
            role: str | None = None) -> Path:
    """Everything checked before the base loads: names, the adapters read (in the --from-experiment
    folder), the one written, the device, the model and the run folder. Returns the folder read from."""
    from ..adapters import BASE

    if experiment is not None:
        check_name("--experiment", experiment)
    source = getattr(args, "from_experiment", None) or experiment
    if reads and source is None:
        raise ValueError(f"this command loads {', '.join(reads)} from runs/<experiment>/: give --experiment "
                         "(or --from-experiment) a name")
    if source is not None:
        check_name("--from-experiment", source)
    for name in writes:
        check_name("the output adapter", name, adapter=True)
    folder = run_folder(source) if source is not None else None
    reads = tuple(r for r in reads if r != BASE)
    missing = [r for r in reads if not (folder / r / "adapter_config.json").exists()]
    if missing:
        raise ValueError(f"no trained {', '.join(missing)} in {folder}/ (found: {adapters_in(folder) or 'none'}): "
                         f"train them first (`mopd-mini teachers --experiment {source}`, same --runs-dir), or "
                         "check --runs-dir, --experiment and --from-experiment")
    if experiment is not None:
        for name in writes:
            check_output(run_folder(experiment), name, reads, getattr(args, "force", False), role,
                         teacher=args.command == "teachers")
    check_device(args.device)
    cli.check_model(args.model)
    check_writable(experiment, writes)
    args.writes_to = tuple(run_folder(experiment) / name for name in writes) if experiment is not None else ()
    return folder


def check_flags(args) -> None:
    """The command's own flags (`parsers.FLAG_TYPES`; a config's fields pass through its check())
    checked by the configs' rules, from their annotations, before any work: a ValueError naming
    the flag, the value and what it accepts (a domain twice, an unknown one, nan). Each command
    calls it first (teachers: after its configs, whose own message names an unknown domain)."""
    from .parsers import FLAG_TYPES

    for dest, (rule, tp) in FLAG_TYPES.get(args.command, {}).items():
        value = getattr(args, dest, None)
        if value is None:
            continue
        check_value("mopd-mini " + args.command, rule, tuple(value) if isinstance(value, list) else value, tp,
                    label="--" + dest.replace("_", "-"))


def trainer_kept(args, argv: list[str]) -> str:
    """What a trainer's command kept after a Ctrl-C (the line `interrupt.interruptible` prints): each
    adapter it writes, its last checkpoint's step (from the metrics saved with it), and the command
    that resumes."""
    import json

    from .interrupt import command_line

    kept = []
    for folder in getattr(args, "writes_to", ()):
        try:
            steps = json.loads((folder / "config.json").read_text()).get("steps")
            rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]
            step = max((r.get("step", 0) for r in rows), default=None)
        except (OSError, ValueError, AttributeError):
            steps = step = None
        if not (folder / "checkpoint.pt").exists() or step is None:
            kept.append(f"{folder.name}: no checkpoint yet")
        elif step == steps:
            kept.append(f"{folder.name}: finished ({folder})")
        else:
            kept.append(f"{folder.name}: checkpoint at step {step}{f' of {steps}' if steps else ''} in {folder}")
    what = "; ".join(kept) if kept else "nothing written"
    return f"{what}. Run the same command to resume from there: {command_line('mopd-mini', argv)}"


def _accuracies(row: dict) -> str:
    return ", ".join(f"{k.removeprefix('acc/')} {v:.2f}" for k, v in row.items() if k.startswith("acc/")) or "-"


def _last_eval(run) -> dict:
    return next((row for row in reversed(run.metrics) if any(k.startswith("acc/") for k in row)), {})


def _report(name: str, run) -> None:
    print(f"{name}: {run.dir or '(in memory)'} | greedy accuracy: {_accuracies(_last_eval(run))}")


def _grpo(args, cli, configs: list) -> int:
    """Train each GRPO config in turn (teachers, Mix-RL, a cascade), its init_from loaded first."""
    from .. import train_grpo

    experiment = configs[0].experiment
    inputs = tuple(c.init_from for c in configs if c.init_from)
    folder = prepare(args, cli, experiment, writes=tuple(c.adapter for c in configs), reads=inputs,
                     role=ROLES["group_size"])
    bank = cli._bank(args, folder, inputs)
    for cfg in configs:
        _report(cfg.adapter, train_grpo(bank, cfg))
    return 0


def cmd_teachers(args, cli) -> int:
    from ..config import GRPOConfig
    from ..domains import DOMAINS

    domains = getattr(args, "domain", None) or list(DOMAINS)
    domains = [domains] if isinstance(domains, str) else list(domains)
    if len(domains) > 1 and (getattr(args, "name", None) or getattr(args, "init_from", None)):
        raise ValueError("--name and --init-from name ONE adapter, and teachers trains one adapter per domain "
                         "(teacher_<domain>): give one --domain, or train one adapter on several domains "
                         "with `mopd-mini mix-rl`")
    configs = [config_from_args(GRPOConfig, args, args.model, domain=d) for d in domains]  # each domain known
    check_flags(args)                                                                     # ... and named once
    return _grpo(args, cli, configs)


def cmd_mix_rl(args, cli) -> int:
    from ..config import GRPOConfig
    from ..domains import DOMAINS

    domains = tuple(getattr(args, "domain", None) or DOMAINS)
    if len(domains) < 2:
        raise ValueError(f"Mix-RL trains one adapter on several domains; got --domain {' '.join(domains)}. "
                         "For one domain, train a teacher: `mopd-mini teachers --domain ...`")
    return _grpo(args, cli, [config_from_args(GRPOConfig, args, args.model, domain=domains)])


def _trained_domains(folder: Path, adapter: str) -> tuple[str, ...]:
    """The domains a saved GRPO run trained on, from its config.json (() when unknown)."""
    import json

    try:
        domain = json.loads((folder / adapter / "config.json").read_text()).get("domain", ())
    except (OSError, ValueError, AttributeError):
        return ()
    return (domain,) if isinstance(domain, str) else tuple(domain)


def cmd_cascade(args, cli) -> int:
    """Cascade RL as the course runs it: GRPO on --domain started from --init-from, named
    cascade_<first>_<domain>, with the first stage's domains kept in the evaluation."""
    from ..config import GRPOConfig
    from ..config import TEACHER_OF

    source = getattr(args, "from_experiment", None) or GRPOConfig.for_model(
        args.model, **config_values(GRPOConfig, args)).experiment
    first = _trained_domains(run_folder(source), args.init_from) if source else ()
    domain = args.domain
    tag = "_".join(first) if first else args.init_from.removeprefix(TEACHER_OF.format(""))
    fixed = {"domain": domain}
    if not hasattr(args, "name"):
        fixed["name"] = f"cascade_{tag}_{domain}"
    if not hasattr(args, "eval_domains"):
        fixed["eval_domains"] = tuple(d for d in first if d != domain)
    return _grpo(args, cli, [config_from_args(GRPOConfig, args, args.model, **fixed)])


def cmd_distill(args, cli) -> int:
    from ..config import MOPDConfig
    from ..distill import train_student

    cfg = config_from_args(MOPDConfig, args, args.model)
    if cfg.experiment is None:
        raise ValueError("distill loads its teachers from runs/<experiment>/: give --experiment a name")
    inputs = (*cfg.route.values(), *([cfg.init_from] if cfg.init_from else []))
    folder = prepare(args, cli, cfg.experiment, writes=(cfg.student,), reads=inputs, role=ROLES["student"])
    run = train_student(cli._bank(args, folder, inputs), cfg)
    _report(cfg.student, run)
    print(f"next: mopd-mini evaluate --experiment {cfg.experiment}" + (
        f" --runs-dir {args.runs_dir}" if args.runs_dir else ""))
    return 0


def cmd_offline(args, cli) -> int:
    """RFT (loss ce) or soft labels (loss soft): the teachers sample once (cached), the student trains."""
    from ..config import OfflineConfig
    from ..offline import collect, train_offline

    cfg = config_from_args(OfflineConfig, args, args.model, loss=args.offline_loss)
    inputs = tuple(cfg.route.values())
    folder = prepare(args, cli, cfg.experiment, writes=(cfg.adapter,), reads=inputs, role=ROLES["samples_per_prompt"])
    bank = cli._bank(args, folder, inputs)
    data = collect(bank, cfg)
    counts = ", ".join(f"{d} {c['correct']}/{c['sampled']}" for d, c in data.counts().items())
    print(f"teachers' samples (correct/sampled): {counts}; training on {len(data.kept(cfg.keep))} ({cfg.keep})")
    _report(cfg.adapter, train_offline(bank, cfg, data))
    return 0


def cmd_merge(args, cli) -> int:
    """Param-Merge: merge.merge on the named adapters, saved as runs/<experiment>/<name>/."""
    import json

    from .. import runs
    from ..adapters import atomic_write

    check_flags(args)
    weights = dict(args.weights)
    if len(weights) < len(args.weights):
        raise ValueError(f"--weights names an adapter twice: {[w for w, _ in args.weights]}")
    if len(weights) < 2:
        raise ValueError(f"merge needs at least two adapters in --weights, got {list(weights)}")
    name = args.name or f"merge_{args.how}"
    for adapter in weights:
        check_name("--weights", adapter, adapter=True)
    folder = prepare(args, cli, args.experiment, writes=(name,), reads=tuple(weights))
    if (runs.RUNS_DIR / args.experiment / name / "checkpoint.pt").exists():
        raise ValueError(f"{runs.RUNS_DIR / args.experiment / name} holds a training run; a merge cannot "
                         "replace it: give the merge another --name")
    from ..merge import merge

    bank = cli._bank(args, folder, weights)
    merge(bank, name, weights, how=args.how, density=args.density,
          majority_sign_method=args.majority_sign_method, seed=args.seed)
    out = bank.save(name, runs.RUNS_DIR / args.experiment / name)
    record = {"weights": weights, "how": args.how, "density": args.density, "seed": args.seed,
              "majority_sign_method": args.majority_sign_method, "from": str(folder)}
    atomic_write(out / "merge.json", json.dumps(record, indent=1).encode())
    print(f"{name}: {out} | {args.how} of {', '.join(f'{a} x {w:g}' for a, w in weights.items())}")
    return 0


def evaluate_folder(args, cli) -> str:
    """The accuracy table of base + every adapter of runs/<experiment>/, and the normalised score
    of every non-teacher adapter whose domains all have a teacher there."""
    check_name("--experiment", args.experiment)
    check_flags(args)
    if args.n < 1:
        raise ValueError(f"--n (test prompts per domain and length) must be >= 1, got {args.n}")
    folder = run_folder(args.experiment)
    found = adapters_in(folder)
    names = args.adapters or found
    absent = sorted(set(names) - set(found))
    if absent or not names:
        raise ValueError(f"no trained adapter {absent or ''} in {folder}/ (found: {found or 'none'}); "
                         "check --runs-dir and --experiment, or train with `mopd-mini teachers` / `distill`")
    check_device(args.device)
    cli.check_model(args.model)
    from .. import BASE, evaluate, format_scores, format_table, normalised_scores
    from ..domains import get_domains
    from ..config import TEACHER_OF

    domains = get_domains(args.domains)   # the course's by default; the regime study's by name
    bank = cli._bank(args, folder, names)
    table = evaluate(bank, [BASE] + names, domains, n=args.n, seed=args.seed)
    out = [f"{folder}: greedy accuracy on {args.n} test prompts per cell", "", format_table(table)]
    teachers = {d: TEACHER_OF.format(d) for d in domains}
    for name in names:
        if name not in teachers.values() and all(t in names for t in teachers.values()):
            out += ["", f"normalised score of {name}: (model - base) / (teacher - base)", "",
                    format_scores(normalised_scores(table, student=name, base=BASE))]
    return "\n".join(out)


def cmd_evaluate(args, cli) -> int:
    print(evaluate_folder(args, cli))
    return 0


RUNS = {"teachers": cmd_teachers, "mix-rl": cmd_mix_rl, "cascade": cmd_cascade, "distill": cmd_distill,
        "rft": cmd_offline, "soft-labels": cmd_offline, "merge": cmd_merge, "evaluate": cmd_evaluate,
        "results": cmd_evaluate}
"""what each command runs (`results`: the table of evaluate where the results page cannot be imported)"""
