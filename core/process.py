"""Who a process is, and whether it still runs: what a lease or the log's lock records of its holder.

A pid alone does not name a process for long: once the process dies the kernel hands the number to the
next one. So a holder is recorded as (host, pid, start), `start` being the process's start time in
clock ticks since boot (`/proc/<pid>/stat`, field 22). A holder on this host is running only while a
process with that pid exists *and* started at that tick — this process's own pid included: a worker
restarted in the same container is given its killed predecessor's pid (pid 1 again), and only the start
time tells them apart. A holder on another host cannot be asked, and is taken to run (its lease expires on
its own); so is one in another pid namespace of this host (two containers sharing a hostname see none of
each other's processes), which the holder's `ns` (`/proc/self/ns/pid`) tells.
"""
from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass
from typing import Any

_label: str | None = None


def _read_start(pid: int) -> int | None:
    """The process's start time (clock ticks since boot), or None when no such process runs (none with
    that pid, or a zombie: killed, not yet reaped) or this system has no /proc to ask."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may itself hold spaces or parentheses
    fields = data[data.rfind(b")") + 2:].split()
    try:
        if fields[0] in (b"Z", b"X"):  # field 3, the state: dead, only its exit status left
            return None
        return int(fields[19])  # field 22 of the whole line; fields[0] is field 3
    except (IndexError, ValueError):
        return None


def _proc_available() -> bool:
    return os.path.isdir("/proc/self") and _read_start(os.getpid()) is not None


def _read_namespace() -> str:
    """This process's pid namespace ("pid:[4026531836]"), or "" where the system does not say."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


HOST = socket.gethostname()
PID = os.getpid()
START = _read_start(PID) or 0
NAMESPACE = _read_namespace()


def _own_start() -> int:
    pid = os.getpid()
    return START if pid == PID else (_read_start(pid) or 0)  # a forked child reads its own


def set_label(label: str) -> None:
    """How this process is named to a person waiting on it ("crewlet worker", "the crewlet app")."""
    global _label
    _label = label


def label() -> str:
    if _label:
        return _label
    argv = [a for a in sys.argv[1:] if not a.startswith("-")]
    return f"crewlet {argv[0]}" if argv else "crewlet"


@dataclass(frozen=True)
class Holder:
    """A process that holds something: a lease, the log's lock."""

    host: str
    pid: int
    start: int          # 0 when it could not be read
    label: str = ""
    ns: str = ""        # its pid namespace; "" when it was not recorded (an older record) or not readable

    @classmethod
    def me(cls) -> Holder:
        return cls(HOST, os.getpid(), _own_start(), label(), NAMESPACE)

    def to_json(self) -> dict[str, Any]:
        out = {"host": self.host, "pid": self.pid, "start": self.start, "label": self.label}
        if self.ns:
            out["ns"] = self.ns
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Holder | None:
        try:
            return cls(str(data.get("host", "")), int(data["pid"]), int(data.get("start") or 0),
                       str(data.get("label", "")), str(data.get("ns") or ""))
        except (KeyError, TypeError, ValueError):
            return None

    @property
    def here(self) -> bool:
        """This host, and a pid this process can ask about (the same pid namespace, when both are known)."""
        return self.host == HOST and (not self.ns or not NAMESPACE or self.ns == NAMESPACE)

    def running(self) -> bool:
        """False only when this host can tell the holder is gone: its pid names no process, or a process that
        started at another tick (the pid was given to another program). A holder on another host, or on a
        system without /proc, is taken to run."""
        if not self.here or self.pid <= 0:
            return True
        if self.pid == os.getpid():
            # this pid is ours: the holder is this very process only if it started when we did (a killed
            # predecessor that had the same pid — pid 1 of a restarted container — started earlier)
            return not self.start or self.start == _own_start()
        if not _proc_available():
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True
            return True
        start = _read_start(self.pid)
        if start is None:
            return False
        return not self.start or start == self.start

    def describe(self) -> str:
        where = "" if self.here else f" on {self.host}" if self.host != HOST else " in another container"
        return f"{self.label or 'a crewlet process'} (pid {self.pid}{where})"
