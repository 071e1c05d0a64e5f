"""The export's folder, --out: the marker listing what an export wrote, the checks that refuse any
other folder, the staging folder swapped into place at the end, and the clean-up on a signal."""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import signal
import tempfile
from contextlib import contextmanager
from pathlib import Path

from .for_verl import VERL_VERSION


# ---------------------------------------------------------------------------------------------
# the export folder: all or nothing, and never a folder the export did not write
# ---------------------------------------------------------------------------------------------


MARKER = ".mopd_mini_export"
"""the file every export writes into its folder: every file it wrote, by path, with its size and sha256
(`marker`); --force replaces only a folder that holds it and nothing else (`check_out`)"""
EXPORT_NAMES = frozenset({"student_base", "teachers", "data", "reward", "verl_config.yaml", "run_verl.sh",
                          "export.json", MARKER})
"""everything an export writes at the top of its folder"""


def file_sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def marker(folder: Path) -> dict:
    """The export's marker for the files in `folder` (the staging folder, every file written):
    {relative path: {"size", "sha256"}} of each (the marker itself aside)."""
    files = {}
    for f in sorted(folder.rglob("*")):
        if f.is_file() and not f.is_symlink() and f.relative_to(folder).as_posix() != MARKER:
            files[f.relative_to(folder).as_posix()] = {"size": f.stat().st_size, "sha256": file_sha256(f)}
    return {"written_by": "mopd_mini.export", "verl": VERL_VERSION, "files": files}


def foreign_files(out: Path) -> list[str]:
    """What in a previous export `out` is not a file its marker lists with that size and sha256 (a
    user's or verl's file anywhere in the tree, a listed file changed since, a link; an empty folder
    holds nothing to lose and is removed with the export); a ValueError if the marker is unreadable or from before exports listed their
    files (then nothing tells the export's files from others)."""
    try:
        held = json.loads((out / MARKER).read_text())
        if not isinstance(held, dict) or not all(isinstance(v, dict) for v in (
                held["files"].values() if isinstance(held.get("files"), dict) else ())):
            raise ValueError("not a JSON object of the export's files")
    except (OSError, ValueError) as err:
        raise ValueError(f"--out {out}: its {MARKER} is unreadable ({err}), so --force cannot tell the export's "
                         "files from others. Move what you keep out of it, delete it, and export again (the same "
                         "command without --force, or --out to a new folder)") from err
    listed = held.get("files")
    if not isinstance(listed, dict):  # an export made before the marker listed every file (a list of names, or none)
        raise ValueError(f"--out {out} was written by an older export whose {MARKER} lists no files, so --force "
                         "cannot tell its files from ones added since (by you or verl, in any subfolder). Move "
                         "what you keep out of it, delete it, and export again (the same command without --force, "
                         "or --out to a new folder): the new export's marker lists every file it writes")
    extra = []
    for f in sorted(out.rglob("*")):
        rel = f.relative_to(out).as_posix()
        if rel == MARKER or f.is_dir() and not f.is_symlink():   # a folder: what it holds is checked
            continue
        if f.is_symlink():
            extra.append(f"{rel} (a link)")
        elif rel not in listed:
            extra.append(rel)
        elif f.stat().st_size != listed[rel].get("size") or file_sha256(f) != listed[rel].get("sha256"):
            extra.append(f"{rel} (changed since the export wrote it)")
    return extra


def remove_export(folder: Path, listed: dict) -> list[str]:
    """Delete exactly the files `listed` (a marker's) in `folder`, the marker, then the folders left
    empty; returns what is left (nothing, unless a file appeared after `check_out`: then the folder is
    kept and named)."""
    for name in listed:
        (folder / name).unlink(missing_ok=True)
    (folder / MARKER).unlink(missing_ok=True)
    for d in sorted((p for p in folder.rglob("*") if p.is_dir() and not p.is_symlink()),
                    key=lambda p: len(p.parts), reverse=True):
        try:
            d.rmdir()
        except OSError:
            pass
    left = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if not p.is_dir())
    if not left:
        shutil.rmtree(folder, ignore_errors=True)
    return left


def _overlaps(a: Path, b: Path) -> bool:
    """`a` is `b`, or one holds the other."""
    return a == b or a in b.parents or b in a.parents


def protected(out: Path, inputs=()) -> str | None:
    """Why the export may never write or replace `out` (None if it may): the working folder or a
    folder above it, a repository (a folder with .git), a home or root folder, or a folder that is, or
    holds, or is inside, one of the export's `inputs` ((what, path) pairs: the run, each teacher)."""
    cwd = Path.cwd().resolve()
    if out == cwd or out in cwd.parents:
        return f"it is the working folder{'' if out == cwd else ' ' + str(cwd) + ' or a folder above it'}"
    if out == Path(out.anchor) or out == Path.home().resolve() or out in Path.home().resolve().parents:
        return "it is a home or root folder"
    if (out / ".git").exists():
        return "it is a repository (it holds .git)"
    for what, given in dict(inputs).items():
        given = Path(given).resolve()
        if _overlaps(out, given):
            where = "it is" if out == given else "it holds" if out in given.parents else "it is inside"
            return f"{where} {what}, {given}: an input of this export"
    return None


def check_out(out: Path, force: bool, inputs=()) -> None:
    """`out` can be replaced by the export: not a file, not `protected`; empty, or `force` and a
    folder a previous export wrote (its MARKER, and nothing beside what an export writes); its parent
    writable."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file; give a folder for the export")
    why = protected(out, inputs)
    if why:
        raise ValueError(f"--out {out}: the export never writes there ({why}); give a new folder, e.g. "
                         "--out build/verl_export")
    held = sorted(f.name for f in out.iterdir()) if out.is_dir() else []
    listed = f"{', '.join(held[:6])}{', ...' if len(held) > 6 else ''}"
    if held and not force:
        raise ValueError(f"--out {out} exists and is not empty ({listed}); pass --force (force=True) to replace a "
                         "previous export whole, or give another --out")
    if held:
        foreign = sorted(set(held) - EXPORT_NAMES)
        if MARKER not in held or foreign:
            what = (f"it holds {', '.join(foreign[:6])}{', ...' if len(foreign) > 6 else ''}, which no export writes"
                    if foreign else f"it has no {MARKER}, the file every export writes")
            raise ValueError(f"--out {out} is not a previous export ({what}), so --force does not replace it: "
                             "--force replaces only a folder an export wrote. Give another --out")
        foreign = foreign_files(out)   # the whole tree against the marker's list, not the top-level names
        if foreign:
            raise ValueError(f"--out {out} holds {len(foreign)} file(s) its export did not write: "
                             f"{', '.join(foreign[:6])}{', ...' if len(foreign) > 6 else ''}; --force removes only "
                             f"the files the export's {MARKER} lists. Move them out of {out} (or give another "
                             "--out), then export again")
    parent = out.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write the export beside {out}: {parent} is not a writable folder")
    if out.exists() and not os.access(out.parent, os.W_OK | os.X_OK):
        raise ValueError(f"cannot replace {out}: its folder {out.parent} is not writable")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def clear_stale(out: Path) -> list[str]:
    """Remove the staging (and set-aside) folders that a dead export of `out` left beside it (a
    SIGKILL, a power cut): their names carry the process id. Returns what it removed; a warning
    names each one it cannot tell is dead (no process id: an older export's)."""
    import warnings

    removed = []
    if not out.parent.is_dir():
        return removed
    for p in sorted(out.parent.iterdir()):
        m = re.fullmatch(rf"\.{re.escape(out.name)}\.(staging|old)-(\d+)-.*", p.name)
        if m and not _alive(int(m.group(2))):
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p.name)
        elif not m and re.fullmatch(rf"\.{re.escape(out.name)}\.(staging|old)-.*", p.name):
            warnings.warn(f"{p} looks like the staging folder of an interrupted export of {out} (an older export, "
                          "which did not name its process); delete it if no export is running", stacklevel=2)
    return removed


class _Terminated(BaseException):
    """SIGTERM or SIGHUP during an export: unwinds like Ctrl-C, so its staging folder is removed."""


@contextmanager
def cleaned_on_signal():
    """SIGTERM and SIGHUP raise inside the export (as SIGINT does) for as long as it runs, so the
    `except` that removes the staging folder runs; the previous handlers come back after. Outside the
    main thread (where Python cannot install handlers) nothing changes."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise _Terminated(f"export stopped by signal {signal.Signals(signum).name}")

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders in one atomic step (Linux renameat2 RENAME_EXCHANGE); False where the
    system or the file system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def swap_into_place(staging: Path, out: Path) -> None:
    """Rename the finished `staging` folder to `out`. An existing `out` is swapped with it in one
    atomic step where the system can, so `out` is always the old export whole or the new one whole;
    elsewhere the old one is renamed aside first (a kill between the two renames leaves it whole at
    .<name>.old-*/). Of the old export exactly the files its marker lists are then deleted
    (`remove_export`); anything else (a file that appeared after `check_out`) is kept, and named."""
    import warnings

    listed = {}
    if out.exists():
        try:
            listed = json.loads((out / MARKER).read_text()).get("files") or {}
        except (OSError, ValueError, AttributeError):
            listed = {}
    if not out.exists():
        os.replace(staging, out)
        return
    aside = None
    if _exchange(staging, out):
        old = staging  # it now holds the old export
    else:
        aside = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old-{os.getpid()}-"))
        os.replace(out, aside / out.name)
        os.replace(staging, out)
        old = aside / out.name
    left = remove_export(old, listed if isinstance(listed, dict) else {})
    if left:
        keep = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.kept-"))
        os.replace(old, keep / out.name)
        warnings.warn(f"the previous export of {out} held files its marker does not list ({', '.join(left[:6])}); "
                      f"they are kept in {keep / out.name}", stacklevel=2)
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)   # empty now: its export removed or moved to .kept-
