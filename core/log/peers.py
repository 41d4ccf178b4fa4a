"""Each node of a shared directory says, in a small file of its own there (`nodes/<node id>.json`), how far
its database applied each log and when it last looked: `crewlet sync status` lists the peers and their lag
from these, and a writer about to cut an interrupted append checks that no peer applied those bytes.

A file is rewritten (atomically) when the node's position moved, or once a minute while it looks. Nodes that
share no directory (a company on NATS JetStream) say the same in a key-value bucket beside their streams, one key
per node: where a node's word is kept is a `Board` (`FileBoard` here, `jetstream_company.KvBoard` on NATS)."""
from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..clock import now_ms
from ..durable import write_atomic

from ..paths import Home

HEARTBEAT_MS = 60_000


@dataclass
class Peer:
    node_id: str
    host: str = ""
    home: str = ""
    operator: str | None = None
    seen_at: int = 0                                   # ms: when it last applied or looked
    logs: dict[str, dict[str, int]] = field(default_factory=dict)   # position name -> {"seq", "end"}
    # the content digest it computed, and the positions it computed it at: {"content", "positions": {name:
    # seq}, "at"} — two nodes at the same positions must hold the same content (core/store/digest.py)
    digest: dict[str, Any] | None = None

    def seq(self, position: str) -> int:
        return int(self.logs.get(position, {}).get("seq", 0))

    def end(self, position: str) -> int:
        return int(self.logs.get(position, {}).get("end", 0))

    def digest_at(self) -> tuple[tuple[str, int], ...] | None:
        """The positions its published digest stands for, comparable between nodes (None: none published)."""
        if self.digest is None:
            return None
        return tuple(sorted((str(k), int(v)) for k, v in self.digest["positions"].items()))

    def label(self) -> str:
        return f"node {self.node_id} ({self.host}:{self.home})" if self.host else f"node {self.node_id}"

    def to_json(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "host": self.host, "home": self.home, "operator": self.operator,
                "seen_at": self.seen_at, "logs": self.logs, "digest": self.digest}


def peer_file(home: Home, node_id: str) -> Path:
    return home.peers_dir / f"{node_id}.json"


class Board(Protocol):
    """Where the nodes of a company say where they are: each node's word (a Peer's JSON) under its id."""

    where: str          # named by a message that could not write there

    def read_all(self) -> list[bytes]: ...

    def read(self, node_id: str) -> bytes | None: ...

    def write(self, node_id: str, data: bytes) -> None:
        """Raises OSError when it cannot be written (best effort: a heartbeat never fails a write)."""
        ...


class FileBoard:
    """The shared directory's `nodes/<node id>.json`."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self.where = str(home.peers_dir)

    def read_all(self) -> list[bytes]:
        out = []
        try:
            files = sorted(self.home.peers_dir.glob("*.json"))
        except OSError:
            return []
        for path in files:
            try:
                out.append(path.read_bytes())
            except OSError:
                continue
        return out

    def read(self, node_id: str) -> bytes | None:
        try:
            return peer_file(self.home, node_id).read_bytes()
        except OSError:
            return None

    def write(self, node_id: str, data: bytes) -> None:
        self.home.peers_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(peer_file(self.home, node_id), data, durable=False)   # a heartbeat


def parse_peer(raw: bytes) -> Peer | None:
    """A node's word as a Peer, or None when it does not read."""
    try:
        data = json.loads(raw)
        logs = {str(k): {"seq": int(v["seq"]), "end": int(v["end"])} for k, v in dict(data.get("logs", {})).items()}
        digest = data.get("digest")
        if not (isinstance(digest, dict) and isinstance(digest.get("content"), str)
                and isinstance(digest.get("positions"), dict)):
            digest = None
        return Peer(str(data["node_id"]), str(data.get("host", "")), str(data.get("home", "")),
                    data.get("operator"), int(data.get("seen_at", 0)), logs, digest)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def read_peers(home: Home, board: Board | None = None) -> list[Peer]:
    """Every node that has said where it is (this one included), skipping words that do not read."""
    raws = (board or FileBoard(home)).read_all()
    return sorted((p for p in map(parse_peer, raws) if p is not None), key=lambda p: p.node_id)


class Publisher:
    """Writes this node's file when its positions moved, or when the last write is a minute old."""

    def __init__(self, home: Home, node_id: str, operator: str | None, *, board: Board | None = None,
                 every_ms: int = 0) -> None:
        """`every_ms`: a position that moved is said at most this often (a board across a network is one round
        trip a write; the next apply or write after it says the newest)."""
        self.home, self.node_id, self.operator = home, node_id, operator
        # a writer says its position under the node's lock, the apply duty its digest off it: one at a time
        self._lock = threading.Lock()
        self.board: Board = board or FileBoard(home)
        self.every_ms = every_ms
        self._last: dict[str, tuple[int, int]] | None = None
        self._written_at = 0
        self._digest: dict[str, Any] | None = None
        self._digest_read = False

    @property
    def digest(self) -> dict[str, Any] | None:
        """The last content digest this node published, with the positions it stands for — kept by every later
        write of its word, by this process or the next (a digest stays true of its positions). Read from the
        board when first asked (a board across a network is not asked by a process that never publishes)."""
        if not self._digest_read:
            self._digest, self._digest_read = self._published_digest(), True
        return self._digest

    @digest.setter
    def digest(self, value: dict[str, Any] | None) -> None:
        self._digest, self._digest_read = value, True

    def _published_digest(self) -> dict[str, Any] | None:
        if not self.node_id:
            return None
        try:
            raw = self.board.read(self.node_id)
            data = json.loads(raw) if raw is not None else None
        except (OSError, ValueError):
            return None
        digest = data.get("digest") if isinstance(data, dict) else None
        if isinstance(digest, dict) and isinstance(digest.get("content"), str) and isinstance(digest.get("positions"), dict):
            return digest
        return None

    def publish(self, positions: dict[str, tuple[int, int]], *, digest: dict[str, Any] | None = None,
                final: bool = False) -> bool:
        """`positions`: position name -> (seq, end offset); `digest`: a content digest just computed at
        positions (kept and published with every later heartbeat); `final`: the process is done with the node,
        so a moved position is said now whatever `every_ms` says. Returns whether the word was written."""
        if not self.node_id:
            return False
        with self._lock:
            now = now_ms()
            if digest is not None:
                self.digest = digest
                # a digest computed off the node's lock may stand for positions older than a writer said since
                if self._last is not None and all(positions.get(k, (0, 0))[0] <= v[0] for k, v in self._last.items()):
                    positions = self._last
            elif positions == self._last and (final or now - self._written_at < HEARTBEAT_MS) or not final and now - self._written_at < self.every_ms:
                return False
            peer = Peer(self.node_id, socket.gethostname(), str(self.home.root), self.operator, now,
                        {name: {"seq": seq, "end": end} for name, (seq, end) in positions.items()}, self.digest)
            self.board.write(self.node_id, json.dumps(peer.to_json(), sort_keys=True).encode("utf-8"))
            self._last, self._written_at = dict(positions), now
            return True


def furthest(home: Home, position: str, *, other_than: str) -> tuple[int, str]:
    """The furthest byte offset any other node says its database applied `position`'s log through,
    and that node's name ((0, "") when none has)."""
    best, who = 0, ""
    for peer in read_peers(home):
        if peer.node_id == other_than:
            continue
        end = peer.end(position)
        if end > best:
            best, who = end, peer.label()
    return best, who
