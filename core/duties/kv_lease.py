"""A fleet duty's lease for a company on NATS JetStream: a key in the company's lease bucket, taken and
renewed by compare-and-set on the key's revision, so the embedding duty, the trash reaper and the index
training run on one node of the company whatever machines its nodes are on (a shared directory's nodes
share a lease file under flock; nodes that share nothing but NATS share this key).

The key holds what a lease file holds (core/leases.py): owner, label, the holding process (host, pid, start
time), since, renewed, expiry. As with a file lease, a holder on this machine that no longer runs holds
nothing (taken over at once); a holder on another machine cannot be asked and holds it until it expires.
Expiry is judged by the reader's clock against the holder's (`expires_at`, ms): machines' clocks must agree
to well within a lease (minutes), as NTP keeps them."""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from ..clock import now_ms
from ..leases import LeaseHolder, decide
from ..log import LogFailed
from ..process import Holder


LEASES = "leases"


def lease_bucket(prefix: str) -> str:
    return f"{prefix}-{LEASES}"


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


class KvLease:
    def __init__(self, conn: Any, prefix: str, name: str, owner: str, label: str, ttl_s: float,
                 clock: Callable[[], int] | None = None) -> None:
        self.conn, self.bucket, self.name = conn, lease_bucket(prefix), name
        self.owner, self.label = owner, label
        self.ttl_ms = int(ttl_s * 1000)
        self.clock = clock or now_ms
        self._since: int | None = None

    def _read(self) -> tuple[LeaseHolder | None, int | None]:
        got = self.conn.kv_get(self.bucket, self.name)
        if got is None:
            return None, None
        value, revision = got
        try:
            data = json.loads(value)
            if not data.get("owner"):
                return None, revision        # released
            process = Holder.from_json(data["process"]) if isinstance(data.get("process"), dict) else None
            return LeaseHolder(str(data["owner"]), str(data.get("label", data["owner"])), int(data["expires_at"]),
                               process, _int_or_none(data.get("since")), _int_or_none(data.get("renewed_at"))), revision
        except (ValueError, KeyError, TypeError):
            return None, revision

    def holder(self) -> LeaseHolder | None:
        try:
            return self._read()[0]
        except LogFailed:
            return None

    def acquire(self) -> LeaseHolder | None:
        """Take or renew the lease: None when this owner holds it now, else who does. Servers that cannot be
        reached raise OSError (the runner says the lease could not be taken and tries again later)."""
        from nats.js.errors import KeyWrongLastSequenceError

        now = self.clock()
        try:
            held, revision = self._read()
            waits_for, fresh = decide(held, self.owner, self.name, now)
            if waits_for is not None:
                return waits_for
            if fresh or self._since is None:
                self._since = now
            value = json.dumps({"owner": self.owner, "label": self.label, "pid": os.getpid(),
                                "process": Holder.me().to_json(), "since": self._since, "renewed_at": now,
                                "expires_at": now + self.ttl_ms}).encode("utf-8")
            try:
                self.conn.kv_put(self.bucket, self.name, value, last=revision)
            except KeyWrongLastSequenceError:
                held, _ = self._read()     # another node took it first
                self._since = None
                return held
            return None
        except LogFailed as exc:
            raise OSError(str(exc)) from exc

    def release(self) -> None:
        try:
            held, revision = self._read()
            if held is not None and held.owner == self.owner:
                value = json.dumps({"owner": "", "label": "", "expires_at": 0}).encode("utf-8")
                self.conn.kv_put(self.bucket, self.name, value, last=revision)
        except Exception:  # the lease expires on its own
            pass
        self._since = None
