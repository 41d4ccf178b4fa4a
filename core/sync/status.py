"""`crewlet sync status`: where this node is on each log, where the logs end, and every peer that said
where it is — read without applying anything, so the lag shown is the lag there was."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..clock import now_ms
from ..log import FileLog
from ..pages import reads
from ..replica import engine
from ..repair import home_logs
from ..log import locks, peers

if TYPE_CHECKING:
    from ..node import Node


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
class Disagreement:
    """Nodes that applied the logs to the same positions and hold different content."""

    positions: dict[str, int]
    digests: dict[str, str]                # node id -> its content digest

    def line(self) -> str:
        where = ", ".join(f"{name} seq {seq:,}" for name, seq in sorted(self.positions.items()))
        groups: dict[str, list[str]] = {}
        for node_id, dig in sorted(self.digests.items()):
            groups.setdefault(dig, []).append(node_id)
        said = "; ".join(f"{', '.join(ids)} hold {dig[:12]}…" for dig, ids in groups.items())
        return f"at {where} the nodes disagree: {said}"

    def to_json(self) -> dict[str, Any]:
        return {"positions": self.positions, "digests": self.digests}


@dataclass
class SyncStatus:
    home: str
    node_id: str
    operator: str | None
    shared: str | None
    locks: locks.LockCheck | None
    logs: list[LogLine] = field(default_factory=list)
    peers: list[PeerLine] = field(default_factory=list)
    damage: Any = None          # the node's LogDamage: then no log is "current"
    digest: dict[str, Any] | None = None                        # this node's, at its positions
    disagree: list[Disagreement] = field(default_factory=list)  # nodes at the same positions, other content
    agree: int = 0                                              # peers whose digest at our positions is ours
    digest_note: str | None = None                              # why there is no digest at these positions
    jetstream: dict[str, Any] | None = None      # servers, offline, durability: a company on NATS JetStream
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
        damage = None
        if self.damage is not None:
            damage = {"kind": self.damage.kind, "good_through": self.damage.good_through, "offset": self.damage.offset,
                      "path": str(self.damage.path), "message": self.damage.line()}
        return {"home": self.home, "node_id": self.node_id, "operator": self.operator, "shared": self.shared,
                "locks": self.locks.to_json() if self.locks else None, "behind": self.behind, "log_damage": damage,
                "digest": self.digest, "digest_note": self.digest_note,
                "digests_disagree": [d.to_json() for d in self.disagree], "digests_agree": self.agree,
                "logs": [line.to_json() for line in self.logs], "peers": [p.to_json() for p in self.peers],
                "jetstream": self.jetstream,
                "diaries": {"replicated": False, "notes": sum(self.diaries.values()), "by_agent": self.diaries,
                            "message": self.diary_line()}}


# Up to this many live pages `sync status` computes the content digest as it answers (rows can change behind
# the log); past it, reading every row takes minutes (a million pages: ~10 GB), so it says the digest published
# at these positions, or that none was, and `--digest` computes it.
DIGEST_NOW_MAX = 100_000


def status(node: Node, *, digest_now: bool | None = None) -> SyncStatus:
    if node.company.log.backend == "jetstream":
        return _jetstream_status(node, digest_now)
    home = node.home
    out = SyncStatus(str(home.root), node.node_id, node.company.operator, str(home.shared) if home.shared else None,
                     locks.check(home.shared) if home.shared else None)
    out.damage = node.damage
    with node.lock:
        for spec in home_logs(home):
            applied = engine.applied_position(node.conn, spec.position)
            log_seq, log_end = applied.seq, applied.end
            if spec.path.exists():
                with FileLog(spec.path, readonly=True) as flog:
                    log_seq, log_end = flog.tail(applied.seq, applied.end)
            out.logs.append(LogLine(spec.name, spec.position, str(spec.path), applied.seq, applied.end, log_seq, log_end))
        out.diaries = {r[0]: int(r[1]) for r in node.conn.execute("SELECT agent, count(*) FROM agent_diary GROUP BY agent")}
    if home.shared is not None:
        _peers(node, out, digest_now)
    return out


def _peers(node: Node, out: SyncStatus, digest_now: bool | None) -> None:
    """The nodes that said where they are (a shared directory's nodes/, a company's nodes bucket on NATS), each
    one's lag behind where the logs end, and whose content differs at the same positions."""
    if digest_now is None:
        with node.lock:
            digest_now = reads.live_pages(node.conn) <= DIGEST_NOW_MAX
    if digest_now:
        out.digest = node.publish_digest(force=True)   # asked now: computed now (rows can change behind the log)
    else:
        out.digest = node.published_digest()
        if out.digest is None:
            out.digest_note = ("not computed at this position: a digest reads every row (this home holds more "
                               f"than {DIGEST_NOW_MAX:,} pages) — `crewlet sync status --digest` computes it, "
                               "and `crewlet worker` publishes it")
    now = now_ms()
    ends = {line.position: line.log_seq for line in out.logs}
    for peer in peers.read_peers(node.home, node.publisher.board):
        behind = {line.name: max(0, ends[line.position] - peer.seq(line.position)) for line in out.logs}
        out.peers.append(PeerLine(peer, behind, max(0.0, (now - peer.seen_at) / 1000), peer.node_id == node.node_id))
    out.disagree, out.agree = compare_digests(node.node_id, out.digest, [p.peer for p in out.peers])


def _jetstream_status(node: Node, digest_now: bool | None = None) -> SyncStatus:
    """A node on NATS JetStream: each stream's end beside this node's position, and what the servers promise
    of an acknowledged write (their sync_interval)."""
    from ..log import LogFailed, jetstream

    s = node.company.log
    out = SyncStatus(str(node.home.root), node.node_id, node.company.operator, None, None)
    out.damage = node.damage
    offline = node.offline.line() if node.offline is not None else None
    for stream in node.streams:
        name, position, flog = stream.name, stream.position_name, stream.backend
        assert isinstance(flog, jetstream.JetStreamLog)   # a node on NATS: every stream is one
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
    with node.lock:
        out.diaries = {r[0]: int(r[1]) for r in node.conn.execute("SELECT agent, count(*) FROM agent_diary GROUP BY agent")}
    promises = jetstream.durability(s)
    out.jetstream = {"servers": list(s.url), "stream_prefix": s.stream_prefix, "replicas": s.replicas,
                     "offline": offline, "durability": [d.to_json() for d in promises],
                     "durability_lines": [d.line() for d in promises],
                     "lazy": any(d.lazy or d.error is not None for d in promises)}
    if offline is None:
        _peers(node, out, digest_now)
    return out


def compare_digests(me: str, mine: dict[str, Any] | None, seen: list[peers.Peer]) -> tuple[list[Disagreement], int]:
    """Group every published digest by the positions it stands for; a group holding two contents is a
    disagreement (which nodes, which digests). Also how many peers agree with this node's digest."""
    groups: dict[tuple[tuple[str, int], ...], dict[str, str]] = {}
    for peer in seen:
        at = peer.digest_at()
        if at is not None and peer.digest is not None:
            groups.setdefault(at, {})[peer.node_id] = peer.digest["content"]
    if mine is not None and me:
        at = tuple(sorted((str(k), int(v)) for k, v in mine["positions"].items()))
        groups.setdefault(at, {})[me] = mine["content"]
    disagree = [Disagreement(dict(at), digests) for at, digests in groups.items() if len(set(digests.values())) > 1]
    agree = 0
    if mine is not None:
        at = tuple(sorted((str(k), int(v)) for k, v in mine["positions"].items()))
        agree = sum(1 for node_id, dig in groups.get(at, {}).items() if node_id != me and dig == mine["content"])
    return disagree, agree
