"""Record notebook 08's stuck run as the copy the notebook falls back on (`lab.recorded_stuck`).

Runs 08's sections 2's training with 08's settings (arm 2's SFT teacher, 200 steps, then 150 steps
of MOPD exact reverse KL from it, 8 chain prompts a step, 8 tokens), at seed 1 (the seed that gets
stuck), in a scratch experiment under the working folder's runs/, and writes the two adapters, the
student's metrics (the chain keys 08 reads), its warnings, its trace and the provenance (this command,
the commit, the machine, the date) to mopd_mini/data/stuck_seed1/.

With --seed 0 (the seed that learns) it writes nothing into the package: it prints the figures cell 14
reads and writes the late rows to --rows (the test fixture of a run that is not stuck).

    OMP_NUM_THREADS=1 PYTHONPATH=. python -m bench.stuck_copy            # seed 1 -> the package data
    OMP_NUM_THREADS=1 PYTHONPATH=. python -m bench.stuck_copy --seed 0 --rows tests/data/stuck_seed0_rows.json
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import torch

import mopd_mini
from mopd_mini import MOPDConfig, lab, train_student
from mopd_mini.config import OfflineConfig
from mopd_mini.offline import gold, train_offline
from mopd_mini.runs import RUNS_DIR

ROOT = Path(__file__).resolve().parents[1]


def configs(seed: int, experiment: str):
    """08's two configs (cells 13 and 14), at `seed`."""
    teacher = OfflineConfig.for_model("tiny", loss="ce", domains=("chain",), name="sft_teacher", steps=200,
                                      batch_size=8, prompts_per_domain=1600, max_new_tokens=8, eval_every=0,
                                      seed=seed, experiment=experiment)
    stuck = MOPDConfig.for_model("tiny", domains=("chain",), teachers={"chain": "sft_teacher"}, student="mopd_kl",
                                 loss="kl", steps=150, prompts_per_domain=8, max_new_tokens=8, eval_every=0,
                                 seed=seed, experiment=experiment, track_steps=(1, 150))
    return teacher, stuck


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else platform.processor()
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, torch {torch.__version__}"


def commit() -> str:
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "mopd_mini",
                                ":!mopd_mini/data/stuck_seed1"],
                               capture_output=True, text=True).stdout.strip()
        return head + (" (with uncommitted changes under mopd_mini/)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--experiment", default="stuck-copy")
    parser.add_argument("--out", type=Path, default=lab.STUCK_COPY)
    parser.add_argument("--rows", type=Path, default=None, help="seed 0: write the last 50 rows' chain keys here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    base, tokenizer = mopd_mini.load_base("tiny")
    bank = mopd_mini.AdapterBank(base, tokenizer)
    cfg_teacher, cfg_stuck = configs(args.seed, f"{args.experiment}-s{args.seed}")
    train_offline(bank, cfg_teacher, gold(tokenizer, cfg_teacher))
    run = train_student(bank, cfg_stuck)
    rows = lab.stuck_metric_rows(run.metrics)
    print(json.dumps({"seed": args.seed, "warnings": [{k: w[k] for k in ("step", "share")} for w in run.warnings],
                      "evidence": lab.stuck_evidence(rows)}, indent=1))
    if args.rows is not None:
        args.rows.parent.mkdir(parents=True, exist_ok=True)
        args.rows.write_text(json.dumps({"seed": args.seed, "command": " ".join(["python -m bench.stuck_copy", *sys.argv[1:]]),
                                         "commit": commit(), "rows": rows[-50:]}, indent=0) + "\n")
    if args.seed != 1:
        return
    out = args.out
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    folder = RUNS_DIR / cfg_stuck.experiment
    for name in ("sft_teacher", "mopd_kl"):
        (out / name).mkdir()
        for f in ("adapter_config.json", "adapter_model.safetensors", "mopd_mini.json", "config.json"):
            shutil.copy(folder / name / f, out / name / f)
    (out / "run.json").write_text(json.dumps({
        "provenance": {
            "command": "OMP_NUM_THREADS=1 PYTHONPATH=. python -m bench.stuck_copy " + " ".join(sys.argv[1:]),
            "commit": commit(), "machine": machine(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "what": "notebook 08's stuck run: arm 2's SFT teacher (200 steps, seed 1) and 150 steps of MOPD exact "
                    "reverse KL from it (seed 1), 08's settings; the student's metrics keep the chain keys 08 reads"},
        "warnings": run.warnings, "metrics": rows, "trace": run.trace}) + "\n")
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"wrote {out}: {size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
