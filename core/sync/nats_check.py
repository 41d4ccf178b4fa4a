"""`crewlet log check` for a company on NATS JetStream: every record of each stream read back (seq 1 to the
end, each the previous + 1, each body a record) and set against the position this node's database stored
(the stream holds, at that seq, the very record it applied). A stream is not cut from a node: the records
are the servers', so `crewlet log repair` refuses and names the fix (a node whose database disagrees with
the streams starts over from a snapshot of a current node)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..log import LogDamage, LogFailed

if TYPE_CHECKING:
    from ..node import Node

REPAIR_REFUSED = ("a stream on NATS JetStream is not cut from a node: its records are the servers' — a node whose "
                  "database disagrees with the streams starts over from a snapshot of a current node (`crewlet sync "
                  "snapshot FILE` there, `crewlet sync adopt FILE` here); lost records on the servers are theirs to "
                  "restore (`nats stream restore` from a backup)")


@dataclass
class StreamReport:
    name: str              # pages | vectors
    stream: str
    servers: str
    records: int = 0
    first_seq: int = 0
    last_seq: int = 0
    applied_seq: int = 0
    damage: str | None = None
    disagrees: str | None = None

    @property
    def ok(self) -> bool:
        return self.damage is None and self.disagrees is None

    def line(self) -> str:
        where = f"{self.name} stream {self.stream} on {self.servers}"
        if self.damage is not None:
            return f"{where}: damaged — {self.damage}"
        if self.disagrees is not None:
            return f"{where}: the database disagrees — {self.disagrees}"
        seqs = f" (seq {self.first_seq:,}–{self.last_seq:,})" if self.records else ""
        return f"{where}: sound — {self.records:,} records{seqs}; the database applied through seq {self.applied_seq:,}"

    def to_json(self) -> dict[str, Any]:
        return {"log": self.name, "stream": self.stream, "servers": self.servers, "records": self.records,
                "first_seq": self.first_seq, "last_seq": self.last_seq, "applied_seq": self.applied_seq,
                "ok": self.ok, "damage": self.damage, "disagrees": self.disagrees}


def check_streams(node: Node) -> list[StreamReport]:
    """Raises LogUnreachable (a LogFailed) when the servers cannot be reached: nothing can be said then."""
    from ..log.jetstream import JetStreamLog

    out = []
    for stream in node.streams:
        name, flog = stream.name, stream.backend
        assert isinstance(flog, JetStreamLog)   # a node on NATS: every stream is one
        with node.lock:
            applied = stream.applied(node.conn)
        report = StreamReport(name, flog.stream, flog.conn.servers, applied_seq=applied.seq)
        report.first_seq, report.last_seq = flog.state()
        try:
            for _record, _frame in flog.read_frames(after=0, start_offset=0, exact=True):
                report.records += 1
        except LogDamage as exc:
            report.damage = str(exc)
        try:
            flog.locate(applied)
        except LogDamage as exc:
            report.disagrees = exc.reason if hasattr(exc, "reason") else str(exc)
        except LogFailed:
            raise
        out.append(report)
    return out
