"""The keyword index (and the backlinks derived with it) as one of the node's duties (runner.py)."""
from __future__ import annotations

from ..paths import Home
from ..search.indexer import Indexer
from . import KEYWORD_INDEX
from .runner import Duty, DutyPass, PassContext


class KeywordIndexDuty(Duty):
    """The keyword index (and the backlinks derived with it) as one of the node's duties: this node's
    own, so its lease lives with the home."""

    name = KEYWORD_INDEX
    scope = "node"

    def __init__(self, home: Home, *, interval_s: float = 2.0) -> None:
        self.indexer = Indexer(home)
        self.interval_s = interval_s

    def run_pass(self, ctx: PassContext) -> DutyPass:
        report = self.indexer.run_pass(progress=lambda done, total: ctx.progress(done, total, "indexing pages"),
                                       stop=ctx.stop)
        status = self.indexer.status()
        worked = report.kind not in ("none", "busy")
        return DutyPass(summary=report.describe(), more=report.more, worked=worked,
                        cursor=str(status.indexed_seq),
                        counts={"indexed": report.indexed, "deleted": report.deleted, "links": report.links},
                        status=status.to_json() | {"pass": report.kind})

    def close(self) -> None:
        self.indexer.close()
