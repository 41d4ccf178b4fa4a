"""Making what was written survive a power loss: fsync of a file, and of a directory's entries.

A rename or a new file is durable only once its directory is fsynced too; some filesystems refuse to
open or fsync a directory, so that half is best effort (the data itself was fsynced already).
"""
from __future__ import annotations

import os
from pathlib import Path


def fsync_file(path: Path | str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path | str) -> None:
    """Make a directory's new or renamed entries durable, where the filesystem allows it."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace `path` with `data` so that a reader (or a crash) sees the old file or the new one, never
    half of either: a temporary file of this process beside it, renamed over it. `durable`: fsynced,
    and its directory, before this returns (a file the home depends on); otherwise a crash may keep
    the old one (a heartbeat, a lease, a cache)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)
