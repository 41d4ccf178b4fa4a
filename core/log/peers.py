"""Each node of a shared directory says, in a small file of its own there (`nodes/<node id>.json`), how far
its database applied each log and when it last looked: `crewlet sync status` lists the peers and their lag
from these, and a writer about to cut an interrupted append checks that no peer applied those bytes.

A file is rewritten (atomically) when the node's position moved, or once a minute while it looks."""
from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


def read_peers(home: Home) -> list[Peer]:
    """Every node that has said where it is (this one included), skipping files that do not read."""
    out = []
    try:
        files = sorted(home.peers_dir.glob("*.json"))
    except OSError:
        return []
    for path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            logs = {str(k): {"seq": int(v["seq"]), "end": int(v["end"])} for k, v in dict(data.get("logs", {})).items()}
            digest = data.get("digest")
            if not (isinstance(digest, dict) and isinstance(digest.get("content"), str)
                    and isinstance(digest.get("positions"), dict)):
                digest = None
            out.append(Peer(str(data["node_id"]), str(data.get("host", "")), str(data.get("home", "")),
                            data.get("operator"), int(data.get("seen_at", 0)), logs, digest))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return out


class Publisher:
    """Writes this node's file when its positions moved, or when the last write is a minute old."""

    def __init__(self, home: Home, node_id: str, operator: str | None) -> None:
        self.home, self.node_id, self.operator = home, node_id, operator
        self._last: dict[str, tuple[int, int]] | None = None
        self._written_at = 0
        # the last content digest this node published, with the positions it stands for — kept by every later
        # write of the file, by this process or the next (a digest stays true of its positions)
        self.digest: dict[str, Any] | None = self._published_digest()

    def _published_digest(self) -> dict[str, Any] | None:
        if not self.node_id:
            return None
        try:
            data = json.loads(peer_file(self.home, self.node_id).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        digest = data.get("digest") if isinstance(data, dict) else None
        if isinstance(digest, dict) and isinstance(digest.get("content"), str) and isinstance(digest.get("positions"), dict):
            return digest
        return None

    def publish(self, positions: dict[str, tuple[int, int]], *, digest: dict[str, Any] | None = None) -> bool:
        """`positions`: position name -> (seq, end offset); `digest`: a content digest just computed at
        positions (kept and published with every later heartbeat). Returns whether the file was written."""
        if not self.node_id:
            return False
        now = now_ms()
        if digest is not None:
            self.digest = digest
        elif positions == self._last and now - self._written_at < HEARTBEAT_MS:
            return False
        peer = Peer(self.node_id, socket.gethostname(), str(self.home.root), self.operator, now,
                    {name: {"seq": seq, "end": end} for name, (seq, end) in positions.items()}, self.digest)
        directory = self.home.peers_dir
        directory.mkdir(parents=True, exist_ok=True)
        path = peer_file(self.home, self.node_id)
        write_atomic(path, json.dumps(peer.to_json(), sort_keys=True).encode("utf-8"), durable=False)   # a heartbeat
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
