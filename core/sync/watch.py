"""Wake a node's background worker when another node appended to a shared log.

Applying on a timer alone would make a write on one node show on another a whole duty interval later; a
stat of each log every tenth of a second is cheap (no read, no lock) and wakes the worker at once, so the
app's views refresh within a fraction of a second of a peer's write. It wakes only when a log holds bytes
past what this node applied: this node's own appends (a save in the app, the embedding duty's vectors) are
applied by the write itself, under the node's lock, and wake nothing."""
from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from typing import TYPE_CHECKING

from ..log import FileLog
from ..paths import Home

if TYPE_CHECKING:
    from ..node import Node

# where this node applied each log through: log file -> byte offset
Applied = Callable[[], dict[Path, int]]

INTERVAL_S = 0.1


class LogWatcher:
    def __init__(self, home: Home, applied: Applied | None = None) -> None:
        self.paths: list[Path] = [home.log_file, home.vectors_log_file]
        self.applied = applied
        self._seen = self._sizes()

    def _sizes(self) -> tuple[tuple[int, int], ...]:
        out = []
        for path in self.paths:
            try:
                st = os.stat(path)
                out.append((st.st_size, st.st_mtime_ns))
            except OSError:
                out.append((-1, 0))
        return tuple(out)

    def changed(self) -> bool:
        """Did a log change since the last look (and, given where this node applied them, does one
        now hold bytes past that)?"""
        now = self._sizes()
        if now == self._seen:
            return False
        self._seen = now
        if self.applied is None:
            return True
        ends = self.applied()
        return any(size > ends.get(path, 0) for path, (size, _) in zip(self.paths, now))


def start(home: Home, wake: threading.Event, stop: threading.Event, *, applied: Applied | None = None,
          interval_s: float = INTERVAL_S) -> threading.Thread:
    """A daemon thread that sets `wake` whenever a log grew past what this node applied, until `stop`."""
    watcher = LogWatcher(home, applied)

    def run() -> None:
        while not stop.wait(interval_s):
            if watcher.changed():
                wake.set()

    thread = threading.Thread(target=run, name="crewlet-log-watch", daemon=True)
    thread.start()
    return thread


def start_node(node: Node, wake: threading.Event, stop: threading.Event) -> threading.Thread | None:
    """Wake `wake` whenever another writer appended to one of `node`'s logs, until `stop`: a JetStream
    consumer on a company on NATS (no polling), else the stat watcher above on the log files."""
    company = node.company
    if company.log.backend == "jetstream":
        flog, vlog = node.log, node.vlog
        assert not isinstance(flog, FileLog) and not isinstance(vlog, FileLog)   # a company on NATS: its streams
        flog.conn.watch([flog.stream, vlog.stream], wake.set, stop)
        return None
    return start(node.home, wake, stop, applied=node.applied_ends)
