"""`crewlet sync status`: where this node is on each log, where the logs end, and every peer that said
where it is — read without applying anything, so the lag shown is the lag there was."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..log import FileLog
from ..pages import applier
from ..repair import home_logs
from . import locks, peers


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
    # agents' diaries on this node: never on a log, so nothing here lags or converges (`diary_line`)
    diaries: dict[str, int] = field(default_factory=dict)

    def diary_line(self) -> str:
        notes, agents = sum(self.diaries.values()), len(self.diaries)
        held = f"{notes:,} note(s) of {agents} agent(s)" if notes else "none"
        return f"{held}, kept on this node only — a diary is on no log, and is read where its agent runs"

    @property
    def behind(self) -> int:
        return sum(line.behind for line in self.logs)

    def to_json(self) -> dict[str, Any]:
        return {"home": self.home, "node_id": self.node_id, "operator": self.operator, "shared": self.shared,
                "locks": self.locks.to_json() if self.locks else None, "behind": self.behind,
                "logs": [line.to_json() for line in self.logs], "peers": [p.to_json() for p in self.peers],
                "diaries": {"replicated": False, "notes": sum(self.diaries.values()), "by_agent": self.diaries,
                            "message": self.diary_line()}}


def status(node: Any) -> SyncStatus:
    home = node.home
    out = SyncStatus(str(home.root), node.node_id, node.company.operator, str(home.shared) if home.shared else None,
                     locks.check(home.shared) if home.shared else None)
    with node.lock:
        for spec in home_logs(home):
            applied = applier.applied_position(node.conn, spec.position)
            log_seq, log_end = applied.seq, applied.end
            if spec.path.exists():
                with FileLog(spec.path, readonly=True) as flog:
                    log_seq, log_end = flog.tail(applied.seq, applied.end)
            out.logs.append(LogLine(spec.name, spec.position, str(spec.path), applied.seq, applied.end, log_seq, log_end))
        out.diaries = {r[0]: int(r[1]) for r in node.conn.execute("SELECT agent, count(*) FROM agent_diary GROUP BY agent")}
    if home.shared is not None:
        now = peers.now_ms()
        ends = {line.position: line.log_seq for line in out.logs}
        for peer in peers.read_peers(home):
            behind = {line.name: max(0, ends[line.position] - peer.seq(line.position)) for line in out.logs}
            out.peers.append(PeerLine(peer, behind, max(0.0, (now - peer.seen_at) / 1000), peer.node_id == node.node_id))
    return out
