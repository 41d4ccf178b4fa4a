"""The duty that keeps the semantic index: trains it, publishes it, re-files its rows, re-measures it daily.

Spec 000 says the embedding duty trains the index. This is a duty of its own on the same fleet scope (one
node of the company runs it, publishing on the same vector log the embedding duty publishes on), for
three reasons: a training is the one long tick and must show its own progress (the app and `crewlet
index status` name it) without holding up the next batch of embeddings for minutes; its interval and
its summary line are its own; and it stays out of core/embed/duty.py, which another change owns. It runs
right after the embedding duty in a tick, so a tick that embedded a batch sees the index's rules at once.

A tick on a caught-up company reads the index's head and its per-list counts and stops. It trains when
there is no index over 1,024 or more sources (or the last attempt was declined and the corpus has since
doubled or halved), when the corpus has doubled or halved since the training, or when the fullest list
has grown past four times the mean and doubled its share since the training filed it. It measures the
index again — adjusting how many lists a search reads, and retraining on the spot when no count within
half the lists meets the floor — once a day, whenever the corpus has moved a tenth from what the latest
measurement saw, and when a moving corpus comes to rest more than a hundredth away from it. A search
stops reading through an index once the corpus is a quarter past its latest measurement (store.py,
SERVE_GROWTH), so an index unmeasured on the corpus as it is never answers. While the corpus moves (a
first fill), every pass says it has more, so `crewlet worker --once` runs it after each embedding batch
and once more at rest: an index trained at 2,048 sources is not left to serve 6,154. An index that needs more than half its lists is never installed (the scan
stays), and a retraining that fails the same way retires the index. A node that has not applied the
whole log takes no step at all and logs `search_index_behind`.

The install record goes out in one tick and its re-filing batches in the next, so every node has the new
centroids before the first batch moves a row.
"""
from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any


from ..clock import half_the_cores, now_ms
from ..diagnostics import Diagnostics
from ..embed.provider import Provider
from ..embed.registry import make_provider
from ..search import code_file
from ..search.ivf import kmeans, measure, training
from ..vectors import index as store
from ..vectors import records as vectors
from . import SEMANTIC_INDEX
from .runner import Duty, DutyPass, PassContext

if TYPE_CHECKING:
    from ..node import Node

log = logging.getLogger("crewlet.search")

DAY_MS = 24 * 3600 * 1000
PROGRESS_EVERY_S = 1.0
REMEASURE_SHARE = 0.10        # measured again when the corpus moved this share from its latest measurement
REST_SHARE, REST_SLACK = 0.01, 16   # and, at rest, when it moved more than this share (or count) at all


def training_threads() -> int:
    """Half the node's cores, never fewer than two (a single core trains on it)."""
    return half_the_cores(at_least=2)


class IndexTrainingDuty(Duty):
    name = SEMANTIC_INDEX
    scope = "fleet"

    def __init__(self, node: Node, *, interval_s: float = 60.0, threads: int | None = None,
                 provider_factory: Callable[..., Provider | None] = make_provider) -> None:
        self.node = node
        self.interval_s = interval_s
        self.threads = threads or training_threads()
        self.provider_factory = provider_factory
        self.diagnostics = Diagnostics(node.home.diagnostics_file)
        self._pending: training.Training | None = None   # a training whose batches the next tick publishes
        self._pending_generation: int | None = None
        self._behind = False
        self._space_cache: tuple[Any, str] | None = None

    # -- what is configured --------------------------------------------------------------------------------
    def _space(self) -> str | None:
        company = self.node.company
        settings = (company.knowledge.vectors, company.embeddings)
        if self._space_cache is None or self._space_cache[0] != settings:
            provider = self.provider_factory(company, threads=1)
            if provider is None:
                return None
            self._space_cache = (settings, provider.space.key())
            provider.close()
        return self._space_cache[1]

    def _behind_log(self) -> tuple[int, int] | None:
        """(applied, on the logs) when this node has not applied the whole of its logs, else None."""
        applied = sum(seq for seq, _ in self.node.positions().values())
        on_log = sum(stream.backend.last_seq() for stream in self.node.streams)
        return (applied, on_log) if applied < on_log else None

    # -- one tick --------------------------------------------------------------------------------------------
    def run_pass(self, ctx: PassContext) -> DutyPass:
        self.node.refresh_config()
        space = self._space()
        if space is None:
            return DutyPass(summary="vectors are off: no semantic index", status={"vectors": False})
        behind = self._behind_log()
        if behind is not None:
            if not self._behind:
                self.diagnostics.record("search_index_behind", (
                    f"the semantic index is decided only from a node that has applied the whole log: this node "
                    f"has applied {behind[0]:,} of {behind[1]:,} records — the duty waits for it"),
                    applied=behind[0], logged=behind[1])
            self._behind = True
            return DutyPass(summary="waiting: this node has not applied the whole log (search_index_behind)",
                            status={"space": space, "behind": True})
        self._behind = False
        cursor = self._cursor(ctx.cursor)
        conn = self.node.conn
        with self.node.lock:
            row = store.read_index(conn, space)
            sources = vectors.sources(conn, space)

        # while the corpus is moving (the embedding duty filling it) look again right after its next batch, so
        # `crewlet worker --once` trains over what it embedded; a corpus at rest costs one pass an interval
        moving = cursor.get("sources") != sources
        cursor["sources"] = sources
        if row is not None and row.refiling:
            return self._refile(row, cursor, moving)
        if sources < training.MIN_SOURCES:
            if row is not None:
                self._publish([store.retire_record(space, row.generation, f"the corpus fell to {sources:,} sources")])
                return self._done(f"index retired: {sources:,} sources, below {training.MIN_SOURCES:,}", cursor, space)
            return self._done(f"no index: {sources:,} sources, below the {training.MIN_SOURCES:,} an index needs",
                              cursor, space, more=moving)

        reason = self._why_train(row, sources, cursor, space)
        if reason is None and row is not None:
            why = self._why_measure(row, sources, moving)
            if why is not None:
                return self._remeasure(ctx, row, cursor, space, why, more=moving)
        if reason is None:
            return self._done(self._idle_line(row, sources, cursor, space), cursor, space, more=moving)
        return self._train(ctx, row, reason, cursor, space, sources)

    @staticmethod
    def _why_measure(row: store.IndexRow, sources: int, moving: bool) -> str | None:
        """Measure the installed index again: daily; when the corpus moved a tenth from what its latest
        measurement saw (a search stops reading through it at a quarter: store.SERVE_GROWTH); and, once
        the corpus is at rest (the embedding duty has stopped filling it), when it moved at all beyond
        a hundredth — so `crewlet worker --once` leaves an index measured on the corpus as it is."""
        measured = store.measured_sources(row)
        moved = abs(sources - measured)
        if moved >= REMEASURE_SHARE * measured:
            return f"the corpus moved from {measured:,} to {sources:,} sources since its latest measurement"
        if not moving and moved > max(REST_SLACK, REST_SHARE * measured):
            return f"the corpus came to rest at {sources:,} sources ({measured:,} measured)"
        if now_ms() - row.measured_at >= DAY_MS:
            return "the daily measurement"
        return None

    def _why_train(self, row: store.IndexRow | None, sources: int, cursor: dict[str, Any], space: str) -> str | None:
        if row is None:
            declined = cursor.get("declined", {}).get(space)
            if declined and declined / 2 < sources < declined * 2:
                return None
            return "no index yet" if not declined else f"the corpus moved from {declined:,} sources since the last attempt"
        if sources >= 2 * row.trained_sources or sources * 2 <= row.trained_sources:
            return f"the corpus moved from {row.trained_sources:,} to {sources:,} sources"
        with self.node.lock:
            counts = store.list_counts(self.node.conn, row.generation)
        fullest = int(counts.max()) if len(counts) else 0
        share_then = row.fullest / max(1, row.trained_sources)
        if fullest > 4 * sources / row.lists and fullest / max(1, sources) >= 2 * share_then:
            return f"its fullest list grew to {fullest:,} codes ({100 * fullest / sources:.1f}% of the corpus)"
        return None

    def _idle_line(self, row: store.IndexRow | None, sources: int, cursor: dict[str, Any], space: str) -> str:
        if row is None:
            declined = cursor.get("declined", {}).get(space)
            return (f"no index: the training at {declined:,} sources needed more than half its lists; the next waits "
                    f"until the corpus doubles or halves ({sources:,} now)")
        return (f"index current: {row.probes} of {row.lists} lists probed over {sources:,} sources "
                f"(generation {row.generation})")

    # -- steps -----------------------------------------------------------------------------------------------
    def _codes_file(self, space: str) -> Path:
        return code_file.file_for(self.node.home.codes_dir, space)

    def _train(self, ctx: PassContext, row: store.IndexRow | None, reason: str, cursor: dict[str, Any], space: str,
               sources: int) -> DutyPass:
        log.info("semantic index: training over %s sources (%s)", f"{sources:,}", reason)
        progress = self._progress_fn(ctx, "training")
        try:
            result = training.train(self.node.conn, self.node.lock, space, threads=self.threads, progress=progress,
                                     stop=ctx.stop, renew=ctx.renew, codes_file=self._codes_file(space))
        except kmeans.Stopped:
            return DutyPass(summary="training stopped before it finished (it starts again next tick)",
                            status={"space": space})
        if result is None:
            return self._done("no index: too few sources", cursor, space)
        summary = result.summary()
        self._alarm_if_codes_fail(result)
        if result.probes is None:
            cursor.setdefault("declined", {})[space] = result.sources
            worst = result.measurement.worst()
            line = (f"not installed: over {result.sources:,} sources even {len(result.centroids) // 2} of "
                    f"{len(result.centroids)} lists recall {worst.recall:.4f} in {worst.shape} against a "
                    f"{worst.floor:.4f} floor with {worst.head_misses} head miss(es) — the scan stays the first "
                    f"stage ({reason})")
            records = [store.retire_record(space, row.generation, "a retraining found no count within half its "
                                                                  "lists that meets the floor")] if row else []
            self._publish(records)
            # looked at again at once: cheap when nothing moved, and a corpus being filled trains on doubling
            return self._done(line, cursor, space, worked=True, more=True, extra={"training": summary})
        record = store.install_record(space, result.centroids, result.probes, result.ranges, result.sources,
                                      result.fullest, summary, now_ms())
        self._publish([record])
        with self.node.lock:
            installed = store.read_index(self.node.conn, space)
        self._pending, self._pending_generation = result, installed.generation if installed else None
        cursor.get("declined", {}).pop(space, None)
        line = (f"installed: {result.probes} of {len(result.centroids)} lists probed over {result.sources:,} sources "
                f"(worst shape {summary['worst_shape']} {summary['worst_recall']:.4f} against "
                f"{summary['worst_floor']:.4f}), trained in {result.seconds:.1f}s ({reason}); "
                f"{len(result.ranges)} re-filing batches next")
        return self._done(line, cursor, space, worked=True, more=True, extra={"training": summary})

    def _refile(self, row: store.IndexRow, cursor: dict[str, Any], moving: bool) -> DutyPass:
        if cursor.get("refile_published") == row.generation:
            return self._done(f"re-filing: {row.refiled} of {row.batches} batches applied", cursor, row.space,
                              more=moving)
        result = self._pending if self._pending_generation == row.generation else None
        if result is None:  # the training ran elsewhere or before a restart: file from the centroids
            table = training.read_table(self.node.conn, self.node.lock, row.space, self._codes_file(row.space))
            lists, _ = kmeans.assign(table.codes[:table.n], row.centroids, threads=self.threads)
            alive = table.alive[:table.n]
            batches = training.split_batches(table.ids[:table.n][alive], lists[alive], row.ranges)
        else:
            batches = result.batches()
        records = [store.refile_record(row.space, row.generation, k, lo, hi, ids, lists)
                   for k, (lo, hi, ids, lists) in enumerate(batches)]
        for start in range(0, len(records), 50):   # the applier takes each part in its own transactions
            self._publish(records[start:start + 50])
        self._pending = None
        cursor["refile_published"] = row.generation
        with self.node.lock:
            now = store.read_index(self.node.conn, row.space)
        applied = now.refiled if now else 0
        # looked at again at once: the corpus may have grown while it trained (a first fill does), and only
        # a duty that says it has more is run again by `crewlet worker --once`
        return self._done(f"re-filed: {len(records)} batches published, {applied} applied here", cursor, row.space,
                          worked=True, more=True)

    def _remeasure(self, ctx: PassContext, row: store.IndexRow, cursor: dict[str, Any], space: str, why: str, *,
                   more: bool = False) -> DutyPass:
        try:
            result = training.remeasure(self.node.conn, self.node.lock, space, progress=self._progress_fn(ctx, "measuring"),
                                        stop=ctx.stop, renew=ctx.renew, codes_file=self._codes_file(space))
        except kmeans.Stopped:
            return DutyPass(summary="re-measurement stopped before it finished", status={"space": space})
        if result is None:
            return self._done("no index to measure", cursor, space)
        self._alarm_if_codes_fail(result)
        if result.probes is None:
            return self._train(ctx, row, f"a measurement found no count within half the lists that meets the floor "
                                         f"({why})", cursor, space, result.sources)
        self._publish([store.measure_record(space, row.generation, result.probes, result.summary(), now_ms())])
        return self._done(f"re-measured over {result.sources:,} sources: {result.probes} of {row.lists} lists probed "
                          f"(was {row.probes}; {why})", cursor, space, worked=True, more=more,
                          extra={"measurement": result.summary()})

    def _alarm_if_codes_fail(self, result: training.Training) -> None:
        """ivf_recall_below_floor: recall below the floor even reading every list — the full scan's own
        candidate pool — means the sign codes are failing this corpus, not the index."""
        full = measure.measure(result.table, result.cases, None) if result.cases else None
        if full is None or full.passed:
            return
        worst = full.worst()
        self.diagnostics.record(
            "ivf_recall_below_floor",
            f"reading every list (the full scan) recalls {worst.recall:.4f} in {worst.shape} against a {worst.floor:.4f} "
            f"floor with {worst.head_misses} head miss(es) over {result.sources:,} sources: the sign codes fail this "
            "corpus, not the index — raise the over-fetch (spec 000, 'If a run comes back below the floor')",
            shape=worst.shape, recall=round(worst.recall, 4), floor=round(worst.floor, 4), sources=result.sources)

    # -- plumbing ---------------------------------------------------------------------------------------------
    def _publish(self, records: list[Any]) -> None:
        if records:
            self.node.submit_vectors(records)

    @staticmethod
    def _cursor(text: str | None) -> dict[str, Any]:
        try:
            data = json.loads(text) if text else {}
        except ValueError:
            data = {}
        return data if isinstance(data, dict) else {}

    def _done(self, line: str, cursor: dict[str, Any], space: str, *, worked: bool = False, more: bool = False,
              extra: dict[str, Any] | None = None) -> DutyPass:
        with self.node.lock:
            row = store.read_index(self.node.conn, space)
        status: dict[str, Any] = {"space": space, "index": row.summary() if row else None} | (extra or {})
        if not row and cursor.get("declined", {}).get(space):
            status["declined_at"] = cursor["declined"][space]
        return DutyPass(summary=line, worked=worked, more=more, cursor=json.dumps(cursor), status=status)

    def _progress_fn(self, ctx: PassContext, phase: str) -> training.ProgressFn:
        """Progress to the runner (the app's bar) and, about once a second, into this duty's status row so
        `crewlet index status` in another process shows the training as it runs."""
        started = now_ms()
        last = [0.0]

        def progress(done: int, total: int, label: str) -> None:
            ctx.progress(done, total, label)
            now = time.monotonic()
            if now - last[0] < PROGRESS_EVERY_S and done < total:
                return
            last[0] = now
            ctx.note_status({"running": {"phase": phase, "label": label, "done": done, "total": total, "since": started}})

        return progress
