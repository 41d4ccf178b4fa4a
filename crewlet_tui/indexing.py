"""The app's side of the background indexer: one pass over this node's rows, reporting progress.

The indexer itself is core's (core.search.indexer.Indexer, on its own SQLite connection); the app only
runs its passes in a thread worker — one at start, then periodically, and at once after a write in the
app — and shows how far it is. Guarded so the app still starts in a build without it (the status line
then says so, and the search screen says what it could serve).
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.paths import Home

Progress = Callable[[int, int], None]


@dataclass
class AppPass:
    kind: str                 # what the pass did: build | rebuild | incremental | none | busy | skipped | stopped
    indexed_seq: int          # the log position the index covers
    applied_seq: int          # the log position this node's rows are applied through
    pages: int                # documents in the index
    searchable: bool          # the first build has finished
    more: bool = False        # stopped at its bound with more to do: run again at once
    note: str = ""


class AppIndexer:
    """Adapts core's Indexer to one call: `run_pass(progress, stop) -> AppPass`."""

    def __init__(self, impl: Any) -> None:
        self.impl = impl

    def run_pass(self, progress: Progress, stop: threading.Event | None = None) -> AppPass:
        report = self.impl.run_pass(progress=progress, stop=stop)
        status = self.impl.status()
        return AppPass(kind=report.kind, indexed_seq=status.indexed_seq, applied_seq=status.applied_seq,
                       pages=status.pages_indexed, searchable=status.first_build_done, more=bool(report.more),
                       note=report.note or "")

    def close(self) -> None:
        self.impl.close()


def make_indexer(home: Home) -> tuple[AppIndexer | None, str]:
    """The indexer for this home, or None and why not."""
    try:
        from core.search.indexer import Indexer
    except ImportError as exc:
        return None, f"no search indexer in this build ({exc})"
    return AppIndexer(Indexer(home)), ""
