"""The node's duties, in the order a tick runs them, the small ones that need no module of their own, and
`run_duties`: the one way they are run, by `crewlet worker` and by the app's background worker alike.

`default_duties(node)` is what the one `DutyRunner` (runner.py) runs: applying the log first (so every
later duty sees what other writers appended), then the keyword index, then the trash reaper, then the
embedding duty (the one that waits on a provider, so the cheap duties never wait on it), then the
semantic index over what it embedded, then the diary fill (agents' notes left without a vector of the current
model: diary_fill.py), then the entries' decay (a look at the clock, nightly work: entry_decay.py) and their
recheck against the repositories (git, and a chat model when one judges: entry_recheck.py), then the triage of
proposed entries (a chat model's two judgments: triage.py; after the recheck, which reads citations written not
read yet), then upkeep (conventions from review, knowledge gaps filed on their cron: upkeep.py) and the refresh of
generated pages (a chat model's section edits: page_refresh.py), last so that none keeps the others waiting.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..clock import now_ms
from ..config import remote_site
from ..pages.service import KnowledgeBase
from ..sync import watch
from . import APPLY, TRASH_REAPER
from .diary_fill import DiaryFillDuty
from .embedding import EmbeddingDuty
from .entry_decay import EntryDecayDuty
from .entry_recheck import EntryRecheckDuty
from .keyword_index import KeywordIndexDuty
from .page_refresh import PageRefreshDuty
from .runner import Duty, DutyPass, DutyReport, DutyRunner, PassContext, ProgressFn
from .semantic_index import IndexTrainingDuty
from .triage import TriageDuty
from .upkeep import UpkeepDuty

if TYPE_CHECKING:
    from ..node import Node
    from ..search.query_daemon import QueryDaemon


class ApplyDuty(Duty):
    """Apply what other processes appended to the log since this node last looked; on a node of a shared
    directory, once caught up, say this node's content digest at its positions (at most once a DIGEST_EVERY_S),
    so `crewlet sync status` on any node can name one that holds other content than its peers."""

    name = APPLY
    scope = "node"
    DIGEST_EVERY_S = 60.0

    def __init__(self, node: Node, *, interval_s: float = 2.0) -> None:
        self.node = node
        self.interval_s = interval_s
        self._digested_at = float("-inf")

    def run_pass(self, ctx: PassContext) -> DutyPass:
        applied = self.node.catch_up(progress=lambda n: ctx.progress(n, 0, "applying the log"))
        if not applied and self.node.shares_peers and time.monotonic() - self._digested_at >= self.DIGEST_EVERY_S:
            self._digested_at = time.monotonic()
            self.node.publish_digest()
        seq = self.node.applied_seq()
        summary = f"applied {applied} record(s), through {seq}" if applied else f"up to date at {seq}"
        return DutyPass(summary=summary, worked=bool(applied), cursor=str(seq), counts={"applied": applied},
                        status={"applied_seq": seq})


class TrashReaperDuty(Duty):
    """Purge pages trashed more than thirty days ago, through the purge record an admin's purge writes.
    One node of the fleet runs it for all (its records replicate), hourly."""

    name = TRASH_REAPER
    scope = "fleet"

    def __init__(self, node: Node, *, interval_s: float = 3600.0) -> None:
        self.kb = KnowledgeBase(node)
        self.interval_s = interval_s

    def run_pass(self, ctx: PassContext) -> DutyPass:
        reaped = self.kb.reap()
        return DutyPass(summary=f"{reaped.purged} purged, {reaped.refused} refused", worked=bool(reaped.purged),
                        cursor=str(now_ms()), counts={"purged": reaped.purged, "refused": reaped.refused,
                                                      "passes": reaped.passes})


def default_duties(node: Node, *, index_interval_s: float = 2.0, embed_threads: int | None = None) -> list[Duty]:
    """`embed_threads`: the local model's compute threads (default half the cores; the app gives it one,
    so a key press still paints promptly while a first fill runs). On a company whose knowledge lives on a
    remote site the log is applied (it carries the agents' reads and onboarding marks) and the agents'
    diaries are filled — a diary is this node's own, wherever the knowledge lives — but there is no local
    copy of the knowledge to index, embed or reap."""
    if remote_site(node.company) is not None:
        return [ApplyDuty(node), DiaryFillDuty(node, threads=embed_threads)]
    return [ApplyDuty(node), KeywordIndexDuty(node.home, interval_s=index_interval_s), TrashReaperDuty(node),
            EmbeddingDuty(node, threads=embed_threads), IndexTrainingDuty(node), DiaryFillDuty(node, threads=embed_threads),
            EntryDecayDuty(node), EntryRecheckDuty(node), TriageDuty(node), UpkeepDuty(node), PageRefreshDuty(node)]


def run_duties(node: Node, *, label: str, once: bool = False, stop: threading.Event | None = None,
               wake: threading.Event | None = None, progress: ProgressFn | None = None,
               on_report: Callable[[DutyReport], None] | None = None, index_interval_s: float = 2.0,
               embed_threads: int | None = None, embed_pass_budget_s: float | None = None) -> list[DutyReport]:
    """Build the node's runner and run it: with `once`, every duty pass after pass until none has work
    left (returns every report); else tick until `stop` is set, every duty at once when `wake` is set or
    another process or node appends to the logs (the log watcher sets it), and return nothing. Either
    way every lease is given back and every duty closed at the end.

    `embed_threads`: the local model's compute threads (default half the cores). `embed_pass_budget_s`: an
    embedding pass hands the thread back after that long, and at once when `wake` is set — for a caller
    whose one thread runs every duty in turn (the app: a first fill would otherwise keep a page just saved
    out of the keyword index until it ended)."""
    duties = default_duties(node, index_interval_s=index_interval_s, embed_threads=embed_threads)
    stop = stop or threading.Event()
    wake = wake or threading.Event()
    if embed_pass_budget_s is not None:
        for duty in duties:
            if isinstance(duty, EmbeddingDuty):
                duty.pass_budget_s = embed_pass_budget_s
                duty.yield_to = wake
    runner = DutyRunner(node, duties, label=label)
    daemon = None
    try:
        if once:
            return runner.run_until_idle(stop=stop, progress=progress, on_report=on_report)
        watch.start_node(node, wake, stop)   # a stat watcher on log files, a consumer on JetStream streams
        # a process that runs the duties lives on: it serves the home's query vectors, so a one-question
        # `crewlet search` beside it loads no model (core/search/query_daemon.py)
        daemon = serve_query_vectors(node, threads=embed_threads)
        runner.run_forever(stop=stop, wake=wake, progress=progress, on_report=on_report)
        return []
    finally:
        if daemon is not None:
            daemon.close()
        runner.close()


def serve_query_vectors(node: Node, *, threads: int | None = None) -> QueryDaemon | None:
    """Start serving this home's query embeddings from this long-lived process (the duties' or `crewlet
    mcp`'s), or None where none is served: a read-only home, vectors off, knowledge read from a remote site.
    `threads`: the local model's, as the embedding duty's, so both use the one session loaded."""
    from ..search.query_daemon import QueryDaemon

    if getattr(node, "readonly", False) or not node.company.knowledge.vectors or remote_site(node.company) is not None:
        return None
    return QueryDaemon(node.home.root, lambda: node.company, threads=threads).start()
