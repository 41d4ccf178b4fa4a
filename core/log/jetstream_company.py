"""What a company on NATS JetStream keeps beside its streams, for the node that opens on it: `company.toml` in
the company's key-value bucket (with its activation instant, so a new node needs only the URL and an edit on
any node reaches the others), and the positions of a database moved from a file log rewritten as stream
positions (a record's position on a stream ends at its seq and starts at seq - 1; the digest of its body is
the same bytes on both), and each node's word of where it is (`KvBoard`: the nodes' bucket, one key per node, what
a shared directory's `nodes/` holds). Below the configuration's floor: what a configuration is (`config.parse`) is the
caller's, handed in as `valid`."""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..durable import write_atomic
from ..store import connect
from .filelog import LogFailed
from .framing import Applied
from .jetstream import Connection, JetStreamLog, company_bucket

COMPANY_KEY = "company.toml"
NODES = "nodes"
Valid = Callable[[str], object]   # raises when a company.toml text does not load


def set_activation(path: Path, activated_at: int) -> None:
    """company.toml's modification time is its activation instant: a copy keeps the original's."""
    if activated_at:
        ns = activated_at * 1_000_000
        os.utime(path, ns=(ns, ns))


def publish_company(conn: Connection, prefix: str, text: str, activated_at: int) -> None:
    from nats.js.errors import KeyWrongLastSequenceError

    bucket = company_bucket(prefix)
    value = json.dumps({"toml": text, "activated_at": activated_at}).encode("utf-8")
    for _ in range(5):
        got = conn.kv_get(bucket, COMPANY_KEY)
        if got is not None and json.loads(got[0]).get("toml") == text:
            return
        try:
            conn.kv_put(bucket, COMPANY_KEY, value, last=got[1] if got else None)
            return
        except KeyWrongLastSequenceError:
            continue
    raise LogFailed(f"the company's configuration could not be written to {bucket} on {conn.servers}: others kept "
                    "writing it — run the command again")


def read_company(conn: Connection, prefix: str) -> tuple[str, int] | None:
    """(company.toml's text, its activation instant in ms), or None when the bucket holds none."""
    got = conn.kv_get(company_bucket(prefix), COMPANY_KEY)
    if got is None:
        return None
    data = json.loads(got[0])
    return str(data["toml"]), int(data.get("activated_at") or 0)


def sync_company(config_file: Path, conn: Connection, prefix: str, valid: Valid) -> str | None:
    """Bring this node's company.toml and the bucket's in step, the newer activation winning: an edit made on
    any node reaches the others when they next open. Returns "pulled" or "pushed" when one side changed."""
    from nats.js.errors import KeyWrongLastSequenceError

    try:
        text = config_file.read_text(encoding="utf-8")
        activated = config_file.stat().st_mtime_ns // 1_000_000
    except OSError:
        return None
    bucket = company_bucket(prefix)
    for _ in range(3):
        got = conn.kv_get(bucket, COMPANY_KEY)
        if got is None:
            return None
        data = json.loads(got[0])
        theirs, their_at = str(data.get("toml", "")), int(data.get("activated_at") or 0)
        if theirs == text:
            return None
        if their_at >= activated:
            valid(theirs)                       # never take a file that would not load
            write_atomic(config_file, theirs.encode("utf-8"))
            set_activation(config_file, their_at)
            return "pulled"
        try:
            valid(text)
        except Exception:
            return None   # a local edit that does not load is not published (the node says so as it reads it)
        value = json.dumps({"toml": text, "activated_at": activated}).encode("utf-8")
        try:
            conn.kv_put(bucket, COMPANY_KEY, value, last=got[1])
            return "pushed"
        except KeyWrongLastSequenceError:
            continue
    return None


def nodes_bucket(prefix: str) -> str:
    return f"{prefix}-{NODES}"


class KvBoard:
    """Where the nodes of a company on JetStream say where they are (core/log/peers.py `Board`): a key per node in
    the nodes' bucket. A node that cannot reach the servers says nothing (OSError, as a full disk would) and
    reads no peers."""

    def __init__(self, conn: Connection, prefix: str) -> None:
        self.conn, self.bucket = conn, nodes_bucket(prefix)
        self.where = f"{self.bucket} on {conn.servers}"

    def read_all(self) -> list[bytes]:
        if not self.conn.up:
            return []
        try:
            return self.conn.kv_values(self.bucket)
        except LogFailed:
            return []

    def read(self, node_id: str) -> bytes | None:
        if not self.conn.up:
            return None
        try:
            got = self.conn.kv_get(self.bucket, node_id)
        except LogFailed:
            return None
        return got[0] if got is not None else None

    def write(self, node_id: str, data: bytes) -> None:
        if not self.conn.up:
            raise OSError(f"the log's servers ({self.conn.servers}) cannot be reached")
        try:
            self.conn.kv_set(self.bucket, node_id, data)
        except LogFailed as exc:
            raise OSError(str(exc)) from exc


def convert_positions(db: Path) -> None:
    """The database's positions as stream positions (seq, seq - 1), the digests unchanged."""
    conn = connect(db)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("UPDATE log_position SET byte_offset = seq, frame_offset = seq - 1")
        conn.execute("COMMIT")
    finally:
        conn.close()


def check_positions(db: Path, conn: Connection, prefix: str, logs: dict[str, str]) -> None:
    """Before a database's file-log positions become stream positions: each stream holds, at the position's seq,
    the very record the database applied there (`logs`: position row -> log name). Raises LogMismatch."""
    dbc = connect(db, readonly=True)
    try:
        rows = {r[0]: (int(r[1]), r[2]) for r in dbc.execute("SELECT name, seq, digest FROM log_position")}
    finally:
        dbc.close()
    for position, log in logs.items():
        seq, digest = rows.get(position, (0, None))
        if seq:
            with JetStreamLog(conn, prefix, log) as stream:
                stream.locate(Applied(seq, seq, seq - 1, digest))


__all__ = ["COMPANY_KEY", "NODES", "nodes_bucket", "KvBoard", "set_activation", "publish_company", "read_company", "sync_company", "convert_positions",
           "check_positions", "Any"]
