"""Whether another process has a home's database open, and which: asked before the file is replaced under it (a
repair's rebuild), where such a process would go on reading and writing the old file, kept aside, and every write
it made after the swap would be lost.

SQLite says it itself: every connection of a database in WAL mode holds a read lock on the "dead man switch" byte of
its -shm file for as long as it has the database open (os_unix.c, `unixOpenSharedMemory`: byte 128, after the eight
WAL lock bytes at 120). Asking the kernel who would stop a write lock on that byte (`F_GETLK`) names the pid of such
a process; this process's own locks never conflict with its own request, so its own connections are not counted.
A database opened immutable (a full disk's read-only open) uses no -shm and is not seen; it writes nothing either.
"""
from __future__ import annotations

import fcntl
import os
import struct
import sys
from pathlib import Path

# os_unix.c: UNIX_SHM_BASE ((22 + SQLITE_SHM_NLOCK) * 4) = 120, UNIX_SHM_DMS = UNIX_SHM_BASE + SQLITE_SHM_NLOCK
SHM_DEAD_MAN_SWITCH = 128
# struct flock on Linux (x86-64, aarch64): short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid
_FLOCK = "hhqqi4x"


def holder_pid(db: Path) -> int | None:
    """The pid of another process that has `db` open, else None (no -shm: nobody has it open in WAL mode)."""
    if not sys.platform.startswith("linux"):
        return None   # the struct above is Linux's; elsewhere the app's leases alone say who runs
    shm = db.with_name(db.name + "-shm")
    try:
        fd = os.open(shm, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        asked = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, SHM_DEAD_MAN_SWITCH, 1, 0)
        kind, _whence, _start, _len, pid = struct.unpack(_FLOCK, fcntl.fcntl(fd, fcntl.F_GETLK, asked))
    except OSError:
        return None
    finally:
        os.close(fd)
    return pid if kind != fcntl.F_UNLCK and pid > 0 else None


def command_of(pid: int) -> str:
    """What process `pid` runs, in words ("crewlet open"), from /proc; "" when it cannot be read."""
    try:
        argv = [a for a in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0") if a]
    except OSError:
        return ""
    # the interpreter and a script's path say less than the script's name and its arguments
    if argv and Path(argv[0]).name.startswith("python") and len(argv) > 1:
        argv = argv[1:] if not argv[1].startswith("-") else argv
    if argv:
        argv[0] = Path(argv[0]).name
    text = " ".join(argv)
    return text if len(text) <= 80 else text[:79] + "…"


def other_holder(db: Path) -> str | None:
    """Another process that has `db` open, in words ("process 4242 (crewlet open)"), else None."""
    pid = holder_pid(db)
    if pid is None:
        return None
    command = command_of(pid)
    return f"process {pid}" + (f" ({command})" if command else "")


__all__ = ["holder_pid", "command_of", "other_holder", "SHM_DEAD_MAN_SWITCH"]
