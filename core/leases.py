"""A lease on one duty: who runs it now, until when, and whether that holder still runs.

One lease per duty decides who runs it: a small file holding its owner and an expiry, rewritten under an
flock, renewed at every pass and taken over once it expires (a killed holder), or at once when its holder on
this machine no longer runs. The duty runner (core/duties/runner.py) takes and renews them; `sync join` and
`sync adopt` read them to tell whether the app or a worker is running on a home.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .clock import now_ms
from .durable import write_atomic
from .process import HOST, Holder

log = logging.getLogger("crewlet.worker")

DEFAULT_LEASE_S = 90.0


@dataclass
class LeaseHolder:
    owner: str
    label: str
    expires_at: int                           # ms since the epoch
    process: Holder | None = None             # who holds it: host, pid, process start (None: an older lease file)
    since: int | None = None                  # ms: when this holder took it
    renewed_at: int | None = None             # ms: its last renewal

    def describe(self, now: int | None = None) -> str:
        """"run by crewlet worker (pid 123), holding it for 4 min, renewed 2 s ago"."""
        now = now_ms() if now is None else now
        who = self.label
        if self.process is not None and f"pid {self.process.pid}" not in who:
            who += f" (pid {self.process.pid})"
        if self.process is not None and not self.process.here:
            who += f" on {self.process.host}" if self.process.host != HOST else " in another container"
        ages = []
        if self.since is not None:
            ages.append(f"holding it for {_age(now - self.since)}")
        if self.renewed_at is not None:
            ages.append(f"renewed {_age(now - self.renewed_at)} ago")
        return f"run by {who}" + (f", {', '.join(ages)}" if ages else "")

    def dead(self) -> bool:
        """Its holder is on this machine and no longer runs (the pid is gone, or names another process)."""
        return self.process is not None and not self.process.running()


def decide(held: LeaseHolder | None, owner: str, name: str, now: int) -> tuple[LeaseHolder | None, bool]:
    """Who has the `name` lease that `owner` asks for at `now`, whatever keeps it (a file, a bucket):
    (another holder, False) while that one is alive and unexpired; else (None, fresh) — `owner` has it, and
    `fresh` when it is newly taken (its holding starts now)."""
    if held is not None and held.owner != owner:
        if held.expires_at > now and not held.dead():
            return held, False
        why = "its holder is not running" if held.expires_at > now else "it expired"
        log.info("taking over the %s lease from %s (%s)", name, held.label, why)
        return None, True
    return None, held is None


def _age(ms: int) -> str:
    s = max(0, ms) / 1000
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


class Lease:
    """A lease on one duty, in a directory: `<name>.lease` (JSON: owner, label, the holding process — host, pid
    and start time — and expiry), updated under an flock of `<name>.lock` so two processes never both believe
    they hold it.

    A lease expires when its holder stops renewing it; and a holder on this machine that is not running any
    more (killed: its pid gone, or given to another program, which the start time tells) holds nothing — its
    lease is taken over at once, not after the expiry."""

    def __init__(self, directory: Path, name: str, owner: str, label: str, ttl_s: float = DEFAULT_LEASE_S,
                 clock: Callable[[], int] | None = None) -> None:
        self.dir = directory
        self.name = name
        self.owner = owner
        self.label = label
        self.ttl_ms = int(ttl_s * 1000)
        self.path = directory / f"{name}.lease"
        self.clock = clock or now_ms
        self._since: int | None = None

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.dir / f"{self.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the flock

    def holder(self) -> LeaseHolder | None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            process = Holder.from_json(data["process"]) if isinstance(data.get("process"), dict) else None
            return LeaseHolder(str(data["owner"]), str(data.get("label", data["owner"])), int(data["expires_at"]),
                               process, _int_or_none(data.get("since")), _int_or_none(data.get("renewed_at")))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _write(self, now: int) -> None:
        if self._since is None:
            self._since = now
        write_atomic(self.path, json.dumps({"owner": self.owner, "label": self.label, "pid": os.getpid(),
                                            "process": Holder.me().to_json(), "since": self._since,
                                            "renewed_at": now, "expires_at": now + self.ttl_ms}).encode("utf-8"),
                     durable=False)

    def acquire(self) -> LeaseHolder | None:
        """Take or renew the lease. Returns None when this owner holds it now, else who does (a live holder)."""
        with self._locked():
            now = self.clock()
            waits_for, fresh = decide(self.holder(), self.owner, self.name, now)
            if waits_for is not None:
                return waits_for
            if fresh:
                self._since = None
            self._write(now)
            return None

    def release(self) -> None:
        with self._locked():
            held = self.holder()
            if held is not None and held.owner == self.owner:
                try:
                    self.path.unlink()
                except FileNotFoundError:
                    pass
            self._since = None


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def new_owner(label: str) -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{label}:{uuid.uuid4().hex[:8]}"


def running(directory: Path) -> str | None:
    """Who runs duties from `directory`'s leases right now (the app, a `crewlet worker`: a node's own leases), by
    their label: an unexpired lease whose holder still runs (a killed process holds nothing)."""
    try:
        files = list(directory.glob("*.lease"))
    except OSError:
        return None
    now = now_ms()
    for path in files:
        held = Lease(directory, path.stem, "", "").holder()
        if held is not None and held.expires_at > now and not held.dead():
            return held.label
    return None
