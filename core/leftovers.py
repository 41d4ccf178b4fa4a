"""What a killed command leaves behind, swept by the next command of its kind once its owner is gone.

A command that writes through a temporary file (an import's plan, a snapshot being written, a log being
repaired, a prepared model being staged) names the file with its pid. When the command is killed the file
stays; the next command of the same kind removes every such file whose pid names no running process on
this host (core/process.py tells), and never one a running process still writes: a pid the kernel has
given to another program since reads as running, so at worst a leftover waits for a later sweep.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import time
from pathlib import Path

from .process import HOST, Holder

log = logging.getLogger("crewlet.leftovers")


def owner_gone(pid: int) -> bool:
    """True when no process with this pid runs on this host (this process is never gone)."""
    if pid <= 0 or pid == os.getpid():
        return False
    return not Holder(HOST, pid, 0).running()


def sweep(directory: Path, pattern: re.Pattern[str], *, companions: tuple[str, ...] = ()) -> list[Path]:
    """Remove the entries of `directory` whose name `pattern` matches in full and whose `pid` group names a
    process that is gone (a file, or a folder with what it holds), each with its `companions` (suffixes:
    SQLite's "-journal", "-wal"). Returns what was removed; a directory that cannot be listed is left alone."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    removed: list[Path] = []
    for name in names:
        m = pattern.fullmatch(name)
        if m is None or not owner_gone(int(m.group("pid"))):
            continue
        for path in [directory / name, *(directory / (name + suffix) for suffix in companions)]:
            try:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
            except FileNotFoundError:
                continue
            except OSError as exc:
                log.debug("could not remove the leftover %s: %s", path, exc)
                continue
            removed.append(path)
    if removed:
        log.info("removed %d leftover(s) of killed commands in %s", len(removed), directory)
    return removed


def sweep_cache(cache_dir: Path, prefix: str, suffix: str, keep: set[str], *, stale_tmp_s: float) -> list[Path]:
    """Remove the cache files `prefix`*`suffix` of `cache_dir` whose name is not in `keep` (a space no longer
    stored, a model no longer configured), and the `prefix`*.tmp files a killed save left behind — older than
    `stale_tmp_s`, since a younger one may be another process's save in flight. Returns what went."""
    gone: list[Path] = []
    try:
        entries = list(os.scandir(cache_dir))
    except OSError:
        return gone
    now = time.time()
    for entry in entries:
        name = entry.name
        if not name.startswith(prefix):
            continue
        try:
            if (name.endswith(suffix) and name not in keep) or \
                    (name.endswith(".tmp") and now - entry.stat().st_mtime > stale_tmp_s):
                os.unlink(entry.path)
                gone.append(Path(entry.path))
        except OSError:           # gone already, or not ours to remove: the next sweep sees it again
            continue
    return gone
