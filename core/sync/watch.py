"""Wake a node's background worker when another node appended to a shared log.

Applying on a timer alone would make a write on one node show on another a whole duty interval later; a
stat of each log every fifth of a second is cheap (no read, no lock) and wakes the worker at once, so the
app's views refresh within a fraction of a second of a peer's write."""
from __future__ import annotations

import os
import threading
from pathlib import Path

from ..paths import Home

INTERVAL_S = 0.2


class LogWatcher:
    def __init__(self, home: Home) -> None:
        self.paths: list[Path] = [home.log_file, home.vectors_log_file]
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
        now = self._sizes()
        if now == self._seen:
            return False
        self._seen = now
        return True


def start(home: Home, wake: threading.Event, stop: threading.Event, *, interval_s: float = INTERVAL_S) -> threading.Thread:
    """A daemon thread that sets `wake` whenever a log grew, until `stop` is set."""
    watcher = LogWatcher(home)

    def run() -> None:
        while not stop.wait(interval_s):
            if watcher.changed():
                wake.set()

    thread = threading.Thread(target=run, name="crewlet-log-watch", daemon=True)
    thread.start()
    return thread
