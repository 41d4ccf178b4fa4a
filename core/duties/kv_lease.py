"""A fleet duty's lease for a company on NATS JetStream: a key in the company's lease bucket, taken and
renewed by compare-and-set on the key's revision, so the embedding duty, the trash reaper and the index
training run on one node of the company whatever machines its nodes are on (a shared directory's nodes
share a lease file under flock; nodes that share nothing but NATS share this key).

Expiry is judged by the reader's clock against the holder's (`expires_at`, ms): machines' clocks must agree
to well within a lease (minutes), as NTP keeps them."""
from __future__ import annotations

import json
import os
import time
from typing import Any

from ..log import LogFailed

LEASES = "leases"


def lease_bucket(prefix: str) -> str:
    return f"{prefix}-{LEASES}"


class KvLease:
    def __init__(self, conn: Any, prefix: str, name: str, owner: str, label: str, ttl_s: float) -> None:
        self.conn, self.bucket, self.name = conn, lease_bucket(prefix), name
        self.owner, self.label = owner, label
        self.ttl_ms = int(ttl_s * 1000)

    def _read(self) -> tuple[Any, int | None]:
        from .runner import LeaseHolder

        got = self.conn.kv_get(self.bucket, self.name)
        if got is None:
            return None, None
        value, revision = got
        try:
            data = json.loads(value)
            return LeaseHolder(str(data["owner"]), str(data.get("label", data["owner"])), int(data["expires_at"])), revision
        except (ValueError, KeyError, TypeError):
            return None, revision

    def holder(self) -> Any:
        try:
            return self._read()[0]
        except LogFailed:
            return None

    def acquire(self) -> Any:
        """Take or renew the lease: None when this owner holds it now, else who does. Servers that cannot be
        reached raise OSError (the runner says the lease could not be taken and tries again later)."""
        from nats.js.errors import KeyWrongLastSequenceError

        now = time.time_ns() // 1_000_000
        try:
            held, revision = self._read()
            if held is not None and held.owner != self.owner and held.expires_at > now:
                return held
            value = json.dumps({"owner": self.owner, "label": self.label, "pid": os.getpid(),
                                "expires_at": now + self.ttl_ms}).encode("utf-8")
            try:
                self.conn.kv_put(self.bucket, self.name, value, last=revision)
            except KeyWrongLastSequenceError:
                held, _ = self._read()     # another node took it first
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
