"""The node's duties, in the order a tick runs them, and the small ones that need no module of their own.

`default_duties(node)` is what `crewlet worker` and the app's background worker hand to the one
`DutyRunner` (core/worker.py): applying the log first (so every later duty sees what other writers
appended), then the keyword index, then the trash reaper, then the embedding duty (the one that waits on
a provider, so the cheap duties never wait on it), then the semantic index over what it embedded.
"""
from __future__ import annotations

import time
from typing import Any

from .embed.duty import EmbeddingDuty
from .node import now_ms
from .pages.service import KnowledgeBase
from .search.indexer import KeywordIndexDuty
from .search.ivf.duty import IndexTrainingDuty
from .worker import Duty, DutyPass, PassContext


class ApplyDuty(Duty):
    """Apply what other processes appended to the log since this node last looked; on a node of a shared
    directory, once caught up, say this node's content digest at its positions (at most once a DIGEST_EVERY_S),
    so `crewlet sync status` on any node can name one that holds other content than its peers."""

    name = "apply"
    scope = "node"
    DIGEST_EVERY_S = 60.0

    def __init__(self, node: Any, *, interval_s: float = 2.0) -> None:
        self.node = node
        self.interval_s = interval_s
        self._digested_at = float("-inf")

    def run_pass(self, ctx: PassContext) -> DutyPass:
        applied = self.node.catch_up(progress=lambda n: ctx.progress(n, 0, "applying the log"))
        if not applied and self.node.home.shared is not None and time.monotonic() - self._digested_at >= self.DIGEST_EVERY_S:
            self._digested_at = time.monotonic()
            self.node.publish_digest()
        seq = self.node.applied_seq()
        summary = f"applied {applied} record(s), through {seq}" if applied else f"up to date at {seq}"
        return DutyPass(summary=summary, worked=bool(applied), cursor=str(seq), counts={"applied": applied},
                        status={"applied_seq": seq})


class TrashReaperDuty(Duty):
    """Purge pages trashed more than thirty days ago, through the purge record an admin's purge writes.
    One node of the fleet runs it for all (its records replicate), hourly."""

    name = "trash-reaper"
    scope = "fleet"

    def __init__(self, node: Any, *, interval_s: float = 3600.0) -> None:
        self.kb = KnowledgeBase(node)
        self.interval_s = interval_s

    def run_pass(self, ctx: PassContext) -> DutyPass:
        reaped = self.kb.reap()
        return DutyPass(summary=f"{reaped.purged} purged, {reaped.refused} refused", worked=bool(reaped.purged),
                        cursor=str(now_ms()), counts={"purged": reaped.purged, "refused": reaped.refused,
                                                      "passes": reaped.passes})


def default_duties(node: Any, *, index_interval_s: float = 2.0, embed_threads: int | None = None) -> list[Duty]:
    """`embed_threads`: the local model's compute threads (default half the cores; the app gives it one,
    so a key press still paints promptly while a first fill runs)."""
    return [ApplyDuty(node), KeywordIndexDuty(node.home, interval_s=index_interval_s), TrashReaperDuty(node),
            EmbeddingDuty(node, threads=embed_threads), IndexTrainingDuty(node)]
