"""`crewlet sync status`: where this node is on each log, where the logs end, and every peer that said
where it is — read without applying anything, so the lag shown is the lag there was."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..clock import now_ms
from ..log import FileLog
from ..replica import engine
from ..repair import home_logs
from ..log import locks, peers


@dataclass
class LogLine:
    name: str                  # "pages", "vectors"
    position: str              # its log_position row
    path: str
    applied_seq: int
    applied_end: int
    log_seq: int
    log_end: int

    @property
    def behind(self) -> int:
        return max(0, self.log_seq - self.applied_seq)

    def to_json(self) -> dict[str, Any]:
        return {"log": self.name, "path": self.path, "applied_seq": self.applied_seq, "applied_byte_offset":
                self.applied_end, "log_seq": self.log_seq, "log_byte_offset": self.log_end, "behind": self.behind}


@dataclass
class PeerLine:
    peer: peers.Peer
    behind: dict[str, int]
    age_s: float
    this_node: bool

    def to_json(self) -> dict[str, Any]:
        return self.peer.to_json() | {"behind": self.behind, "seen_s_ago": round(self.age_s, 1),
                                      "this_node": self.this_node}


@dataclass
class SyncStatus:
    home: str
    node_id: str
    operator: str | None
    shared: str | None
    locks: locks.LockCheck | None
    logs: list[LogLine] = field(default_factory=list)
    peers: list[PeerLine] = field(default_factory=list)
    jetstream: dict[str, Any] | None = None      # servers, offline, durability: a company on NATS JetStream

    @property
    def behind(self) -> int:
        return sum(line.behind for line in self.logs)

    def to_json(self) -> dict[str, Any]:
        return {"home": self.home, "node_id": self.node_id, "operator": self.operator, "shared": self.shared,
                "locks": self.locks.to_json() if self.locks else None, "behind": self.behind,
                "logs": [line.to_json() for line in self.logs], "peers": [p.to_json() for p in self.peers],
                "jetstream": self.jetstream}


def status(node: Any) -> SyncStatus:
    if node.company.log.backend == "jetstream":
        return _jetstream_status(node)
    home = node.home
    out = SyncStatus(str(home.root), node.node_id, node.company.operator, str(home.shared) if home.shared else None,
                     locks.check(home.shared) if home.shared else None)
    with node.lock:
        for spec in home_logs(home):
            applied = engine.applied_position(node.conn, spec.position)
            log_seq, log_end = applied.seq, applied.end
            if spec.path.exists():
                with FileLog(spec.path, readonly=True) as flog:
                    log_seq, log_end = flog.tail(applied.seq, applied.end)
            out.logs.append(LogLine(spec.name, spec.position, str(spec.path), applied.seq, applied.end, log_seq, log_end))
    if home.shared is not None:
        now = now_ms()
        ends = {line.position: line.log_seq for line in out.logs}
        for peer in peers.read_peers(home):
            behind = {line.name: max(0, ends[line.position] - peer.seq(line.position)) for line in out.logs}
            out.peers.append(PeerLine(peer, behind, max(0.0, (now - peer.seen_at) / 1000), peer.node_id == node.node_id))
    return out


def _jetstream_status(node: Any) -> SyncStatus:
    """A node on NATS JetStream: each stream's end beside this node's position, and what the servers promise
    of an acknowledged write (their sync_interval)."""
    from ..log import LogFailed, jetstream

    s = node.company.log
    out = SyncStatus(str(node.home.root), node.node_id, node.company.operator, None, None)
    offline = node.offline.line() if node.offline is not None else None
    for stream in node.streams:
        name, position, flog = stream.name, stream.position_name, stream.backend
        with node.lock:
            applied = stream.applied(node.conn)
        log_seq = applied.seq
        if offline is None:
            try:
                log_seq = flog.last_seq()
            except LogFailed as exc:
                node._unreachable(exc)
                offline = node.offline.line() if node.offline is not None else str(exc)
        out.logs.append(LogLine(name, position, f"{flog.stream} on {flog.conn.servers}", applied.seq, applied.end,
                                log_seq, log_seq))
    promises = jetstream.durability(s)
    out.jetstream = {"servers": list(s.url), "stream_prefix": s.stream_prefix, "replicas": s.replicas,
                     "offline": offline, "durability": [d.to_json() for d in promises],
                     "durability_lines": [d.line() for d in promises],
                     "lazy": any(d.lazy or d.error is not None for d in promises)}
    return out
