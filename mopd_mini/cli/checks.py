"""What the commands check before any work: names, the device, the model, the run folder, and
that the adapter a command writes is its own to write. Each refusal is a ValueError (an OSError
for a missing model) whose message names the flag."""

from __future__ import annotations

from pathlib import Path


def check_name(flag: str, name: str, adapter: bool = False) -> str:
    """`name` if it can be one folder under runs/ (non-empty, no path separator, not . or ..; an
    adapter's name also no '.', a torch module name); else a ValueError naming the flag."""
    bad = (not name or name.strip() != name or name in (".", "..") or "/" in name or "\\" in name
           or "\0" in name or (adapter and "." in name))
    if bad:
        rule = "a non-empty name without '/', '\\' or '.' (adapter names are torch module names)" if adapter \
            else "one folder name: non-empty, no '/' or '\\', not '.' or '..'"
        raise ValueError(f"{flag} {name!r} is not a valid name: use {rule}")
    return name


def check_device(text: str | None) -> str | None:
    """The --device string if torch knows it and it is there; else a ValueError saying what is."""
    if text is None:
        return None
    import torch

    try:
        device = torch.device(text)
    except RuntimeError:
        raise ValueError(f"--device {text!r} is not a device name; use cpu, cuda, cuda:1, mps ...") from None
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(f"--device {text}: no CUDA GPU is available here; use --device cpu")
        if device.index is not None and device.index >= count:
            raise ValueError(f"--device {text}: this machine has {count} CUDA GPU(s), cuda:0 to cuda:{count - 1}")
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"--device {text}: MPS is not available here; use --device cpu")
    return text


def hub_reachable(timeout: float = 3.0) -> str | None:
    """None if the hub's host answers a TCP connection within `timeout`; else why not. Behind a
    proxy (HTTPS_PROXY set) the answer is left to the hub client: None."""
    import os
    import socket
    import threading
    from urllib.parse import urlparse

    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return None
    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    why: list[str] = [f"no answer from {url.hostname} within {timeout:g} s"]

    def probe():
        try:
            socket.create_connection((url.hostname, url.port or 443), timeout=timeout).close()
            why[0] = ""
        except OSError as err:
            why[0] = f"{url.hostname}: {err}"
    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout + 0.5)
    return why[0] or None


def check_model_reachable(name: str, reachable=hub_reachable) -> None:
    """A --model that is a hub id must be in the local cache, or the hub reachable: checked in a
    few seconds instead of the hub client's minute of retries (HF_HUB_OFFLINE=1: the cache only).
    `reachable()` says why the hub cannot be reached, or None (`hub_reachable`)."""
    import os

    from ..models import QWEN3_RANDOM, TINY, TINY_OTHER

    if name in (TINY, TINY_OTHER, QWEN3_RANDOM) or os.path.isdir(os.path.expanduser(name)):
        return
    if name.startswith(("/", ".", "~")):
        raise FileNotFoundError(f"--model {name!r}: no such folder; pass the folder that holds config.json, "
                                "the weights and the tokenizer files, or a hub id such as Qwen/Qwen3-1.7B")
    from huggingface_hub import constants, try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(name, "config.json")
    except ValueError as err:   # HFValidationError: not a repo id at all
        raise ValueError(f"--model {name!r} is neither tiny, tiny-other, {QWEN3_RANDOM}, a folder nor a "
                         f"hub id ({err})") from None
    if isinstance(cached, str):
        return
    why = "HF_HUB_OFFLINE is set" if constants.HF_HUB_OFFLINE else reachable()
    if why:
        raise OSError(f"--model {name!r} is not a folder here, not in the hub cache ({constants.HF_HUB_CACHE}), "
                      f"and the hub cannot be reached ({why}). Download it on a machine with a network "
                      f"(`huggingface-cli download {name} --local-dir ./model`) and pass --model ./model; "
                      f"for the course without weights use --model {TINY}")


def check_writable(experiment: str | None, names: tuple[str, ...] = ()) -> None:
    """runs/<experiment>/<name>/ can be written for each adapter `names` a command writes, before any
    compute, creating nothing (as `runs.writable`: the folder, or the nearest one above it that
    exists, is a folder this user may write; a refused command leaves no empty runs/<experiment>/
    behind). A folder that holds a checkpoint is left to the trainer, which reads it first
    (`Run.open`): a finished run reloads from a read-only folder, as the library does; one that would
    train on is refused there, before any step."""
    import os

    from .. import runs

    if experiment is None:
        return
    folder = runs.RUNS_DIR / experiment
    for name in names:
        if (folder / name / "checkpoint.pt").exists():
            continue
        at = folder / name
        while not at.exists() and at != at.parent:
            at = at.parent
        if not at.is_dir():
            why = f"{at} is a file, not a folder"
        elif not os.access(at, os.W_OK | os.X_OK):
            why = f"{at} is not writable by this user"
        else:
            continue
        raise ValueError(f"the run folder {folder} cannot be written ({why}); pick a writable --runs-dir "
                         "(or another --experiment)")


ROLES = {"group_size": "a GRPO run (teachers, mix-rl, cascade)", "student": "a MOPD student (distill)",
         "samples_per_prompt": "an offline student (rft, soft-labels)"}
"""a key only that trainer's config.json has: the role of a run folder"""


def _role(there: Path) -> str | None:
    import json

    try:
        config = json.loads((there / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return next((role for key, role in ROLES.items() if isinstance(config, dict) and key in config), None)


def check_output(folder: Path, name: str, inputs: tuple[str, ...] = (), force: bool = False,
                 role: str | None = None, teacher: bool = False) -> None:
    """The adapter a command writes may not be one it reads, a teacher's (teacher_<domain>, unless
    the command trains teachers), an adapter that no resumable run owns (a teacher copied in, a
    merge, ...; unless `force`, for merge), nor a run of another trainer than `role`."""
    from .. import DOMAINS
    from ..evaluation import TEACHER_OF

    if name in inputs:
        raise ValueError(f"{name!r} is both an input of this command and the adapter it writes; give "
                         "the output another name (--name, --student)")
    if not teacher and name in {TEACHER_OF.format(d) for d in DOMAINS}:
        raise ValueError(f"{name!r} is a teacher's name: only `mopd-mini teachers` trains teacher_<domain>; "
                         "give the output another name (--name, --student)")
    there = folder / name
    if not (there / "adapter_config.json").exists():
        return
    if not (there / "checkpoint.pt").exists() and not force:
        raise ValueError(f"{there} already holds an adapter that is not a training run of this command "
                         "(no checkpoint.pt: a teacher, a merge or a copied adapter); give the output "
                         "another name, or delete that folder if it is really not needed")
    found = _role(there)
    if role is not None and found is not None and found != role:
        raise ValueError(f"{there} holds {found}, and this command trains {role}; give the output another "
                         "name (--name, --student): the folder is kept as it is")


def adapters_in(folder: Path | None) -> list[str]:
    names = [p.name for p in sorted(folder.iterdir()) if (p / "adapter_config.json").exists()] \
        if folder is not None and folder.is_dir() else []
    return sorted(names, key=lambda n: (not n.startswith("teacher_"), n))


def run_folder(experiment: str) -> Path:
    from .. import runs

    return runs.RUNS_DIR / experiment
