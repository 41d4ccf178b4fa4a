"""The indexer: keeps the lexical index (and the backlinks) behind the applied rows.

It runs outside the apply transaction, on its own SQLite connection, and records the log position
its index covers. One pass does whichever of these is due:

- the FIRST BUILD: a lap over every page, in chunks of 1,000 committed as it goes (a killed build
  resumes where it stopped). Until it finishes, this node is "not searchable yet"; once it has, the
  gate stays open for good — a page saved a moment ago is ordinary staleness, never "still building".
- a RE-DERIVATION: when lexical.INDEX_DERIVATION differs from what the index was built with, the same lap
  into a new directory while the old index keeps serving, then a switch — on its own, once.
- an INCREMENTAL pass: rows whose `version` (the log seq that last touched them) is past the covered
  position are re-indexed (or dropped, when trashed), purges since then (applied `page.purge` ops)
  are deleted, and the backlinks of every changed row are derived again with `extract_links`.

Files, all under Home.index_dir:
  state.json   written only once a first build has finished (its existence IS the searchable gate):
               the index directory in use, its derivation, the covered seq, when the first build ended
  build.json   a build in progress: its directory, derivation, the seq it started at, its cursor
  lex-<derivation>-<id>/   a Whoosh index
  indexer.lock one pass at a time, across processes (flock) and threads
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import entry_docs, lexical, rank_data
from ..clock import now_ms
from ..durable import write_atomic
from ..pages.applier import position
from ..pages import reads
from ..pages.links import drop_orphan_links, store_links, store_range_links
from ..paths import Home
from ..store import Connection, connect, transaction
from .snippets import plain_text
# what the index's small files say (manifest, build journal, coverage) lives in .index_state, importable from here
from .index_state import (BUILD_FILE, BuildJournal, IndexManifest, IndexStatus,  # noqa: F401
                          _read_json, keyword_status, read_state, state_path)

log = logging.getLogger("crewlet.indexer")

LOCK_FILE = "indexer.lock"
BUILD_CHUNK = 64_000         # pages a first-build segment holds at most (and all segments in the making, together:
#                              segments.IN_FLIGHT — one segment in this process, or one a worker each)
RETIRED_GRACE_S = 30.0       # an index swapped out is removed this long after (open readers finish)

Progress = Callable[[int, int], None]


# -- durable little files ------------------------------------------------------------------------------

def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically, and durably: a crash leaves the old file or the new one, never half of either."""
    write_atomic(path, json.dumps(data, indent=1, sort_keys=True).encode("utf-8"))


@dataclass
class IndexPass:
    kind: str                 # none | incremental | build | rebuild | busy | skipped | stopped
    indexed: int = 0          # documents written
    deleted: int = 0          # documents removed (trashed, purged)
    links: int = 0            # rows whose backlinks were derived again
    indexed_seq: int = 0      # the position the index covers after the pass
    applied_seq: int = 0
    more: bool = False        # stopped at its bound with more to do
    seconds: float = 0.0
    note: str = ""

    @property
    def behind(self) -> int:
        return max(0, self.applied_seq - self.indexed_seq)

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"behind": self.behind}

    def describe(self) -> str:
        """One line for a person: what the pass did and what the index covers after it."""
        words = {"build": "first build", "rebuild": "re-derived every page", "incremental": "caught up",
                 "none": "nothing to do", "busy": "another indexer is running", "skipped": "skipped",
                 "stopped": "stopped"}.get(self.kind, self.kind)
        line = (f"{words}: {self.indexed} indexed, {self.deleted} removed, covers {self.indexed_seq} "
                f"of {self.applied_seq} applied")
        if self.more:
            line += " (more to do)"
        if self.note:
            line += f" — {self.note}"
        return line


# -- the indexer -------------------------------------------------------------------------------------

class Indexer:
    """Builds and maintains the lexical index of one home. Thread-safe; one pass at a time per home,
    across processes. Use it from a background thread (the app) or a process (`crewlet worker`)."""

    def __init__(self, home: Home, *, chunk: int = BUILD_CHUNK, workers: int | None = None) -> None:
        self.home = home
        self.dir = home.index_dir
        self.chunk = chunk            # pages a build segment holds at most
        self.workers = workers        # build processes (None: one per core, and none for a small home)
        self._conn: Connection | None = None
        self._thread_lock = threading.Lock()

    # -- plumbing ------------------------------------------------------------------------------------
    @property
    def conn(self) -> Connection:
        if self._conn is None:
            self._conn = connect(self.home.db_file)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Indexer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _exclusive(self, wait: bool) -> Iterator[bool]:
        """One pass at a time: a thread lock, then an flock that other processes honour too."""
        if not self._thread_lock.acquire(blocking=wait):
            yield False
            return
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
                except BlockingIOError:
                    yield False
                    return
                try:
                    yield True
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        finally:
            self._thread_lock.release()

    def _applied(self) -> int:
        return position(self.conn)[0]

    def state(self) -> IndexManifest | None:
        return read_state(self.dir)

    def build_progress(self) -> BuildJournal | None:
        return BuildJournal.from_json(_read_json(self.dir / BUILD_FILE))

    def status(self) -> IndexStatus:
        # lexical's derivation, read at the call: a test that moves it moves what the index is judged against
        return keyword_status(self.dir, self.conn, current_derivation=lexical.INDEX_DERIVATION)

    def live_pages(self) -> int:
        return reads.live_pages(self.conn)

    def build_due(self) -> str | None:
        """'first' before the first build, 'derivation' when this crewlet derives differently, 'missing'
        when the index in use is gone or behind-the-rows-inconsistent, else None."""
        st = self.state()
        if st is None:
            return "first"
        if st.derivation != lexical.INDEX_DERIVATION:
            return "derivation"
        if not lexical.index_exists(self.dir / st.dir):
            return "missing"
        if self._applied() < st.indexed_seq:
            return "missing"  # the rows are older than the index (a restored database): derive again
        return None

    # -- passes --------------------------------------------------------------------------------------
    def run_pass(self, *, max_rows: int | None = None, full_build_max: int | None = None,
                 force_rebuild: bool = False, progress: Progress | None = None,
                 stop: threading.Event | None = None, wait: bool = False) -> IndexPass:
        """Do what is due: a (re)build, else an incremental pass of at most `max_rows` changed rows.

        `full_build_max`: build only when the home has at most this many live pages (None: always) —
        the CLI's search builds a small home inline and leaves a large one to the worker.
        `wait`: wait for another process's pass instead of returning kind 'busy'.
        """
        started = time.perf_counter()
        with self._exclusive(wait) as mine:
            if not mine:
                st = self.state()
                return IndexPass("busy", indexed_seq=st.indexed_seq if st else 0, applied_seq=self._applied(),
                                  note="another indexer is running a pass")
            self._collect_retired()
            due = "rebuild" if force_rebuild else self.build_due()
            if due is not None:
                pages = self.live_pages()
                if full_build_max is not None and pages > full_build_max and not force_rebuild:
                    if self.state() is not None and due == "derivation":
                        report = self._incremental(max_rows)  # the old index keeps serving, kept current
                        report.note = f"a re-derivation of {pages} pages is due: `crewlet worker` runs it"
                    else:
                        st = self.state()
                        report = IndexPass("skipped", indexed_seq=st.indexed_seq if st else 0,
                                            applied_seq=self._applied(),
                                            note=f"the index build of {pages} pages is left to `crewlet worker`")
                else:
                    report = self._build(progress=progress, stop=stop, fresh=force_rebuild)
                    if report.kind != "stopped":
                        report.kind = "build" if due in ("first",) else "rebuild"
                        more = self._incremental(max_rows)
                        report.indexed += more.indexed
                        report.deleted += more.deleted
                        report.links += more.links
                        report.indexed_seq, report.applied_seq, report.more = more.indexed_seq, more.applied_seq, more.more
            else:
                report = self._incremental(max_rows)
        report.seconds = time.perf_counter() - started
        if report.kind not in ("none", "busy"):
            log.info("index pass %s: %d indexed, %d deleted, covers %d of %d (%.2fs)", report.kind, report.indexed,
                     report.deleted, report.indexed_seq, report.applied_seq, report.seconds)
        return report

    # -- the full build ------------------------------------------------------------------------------
    def _new_build(self) -> BuildJournal:
        name = f"lex-{lexical.INDEX_DERIVATION}-{uuid.uuid4().hex[:8]}"
        lexical.create_index(self.dir / name)
        conn = self.conn
        conn.execute("BEGIN")
        try:
            seq = position(conn)[0]
            total = conn.execute("SELECT count(*) FROM pages").fetchone()[0]
        finally:
            conn.execute("COMMIT")
        build = BuildJournal(dir=name, derivation=lexical.INDEX_DERIVATION, snapshot_seq=seq, cursor="", done=0,
                              total=total, started_at=now_ms())
        _write_json(self.dir / BUILD_FILE, asdict(build))
        return build

    def _build(self, *, progress: Progress | None, stop: threading.Event | None, fresh: bool) -> IndexPass:
        build = None if fresh else self.build_progress()
        if build is not None and (build.derivation != lexical.INDEX_DERIVATION or not lexical.index_exists(self.dir / build.dir)):
            build = None
        if build is None:
            build = self._new_build()
        from . import segments  # the bulk writer: only a build needs it

        ix = lexical.open_index(self.dir / build.dir)
        if build.pending is not None:
            if build.pending["segment"] in {seg.segment_id() for seg in ix._segments()}:
                build.cursor = build.pending["cursor"]
                build.done += build.pending["rows"]
            build.pending = None
            _write_json(self.dir / BUILD_FILE, asdict(build))
        # what a stopped or failed build left half-written (no TOC names it) goes before this one writes
        segments.clean_index_dir(ix)
        report = IndexPass("build")
        if progress:
            progress(build.done, max(build.total, build.done))
        ids = [r[0] for r in self.conn.execute("SELECT id FROM pages WHERE id > ? ORDER BY id", (build.cursor,))]
        build.total = max(build.total, build.done + len(ids))
        if self.workers is not None:
            workers = self.workers
        elif len(ids) < segments.PARALLEL_MIN:
            workers = 1   # too small to be worth a process
        else:
            workers = segments.build_workers()   # the cores idle now
        chunks = segments.plan_chunks(ids, build.cursor, workers, min(self.chunk, segments.IN_FLIGHT // workers))
        stopped = lambda: stop is not None and stop.is_set()  # noqa: E731
        pool = segments.ParallelBuild(self.home.db_file, self.dir / build.dir, chunks, workers) if workers > 1 else None
        finished = False
        shown = build.done

        def show(done: int) -> None:
            nonlocal shown
            if progress and done >= shown:   # pages read: never backwards
                shown = done
                progress(done, max(build.total, done))

        try:
            for i, (lo, hi) in enumerate(chunks):
                if stopped():
                    return self._stopped(report, build)
                base = build.done
                if pool is None:
                    result = segments.write_chunk(ix, segments.read_rows(self.conn, lo, hi),
                                                  tick=lambda n: show(base + n), stop=stopped)  # noqa: B023  ticks in this pass
                    if result.stopped:
                        return self._stopped(report, build)
                else:
                    # noqa below: the poll is called only while this chunk is waited on, in this pass
                    got = pool.result(i, lambda: show(base + pool.in_flight(i)), stopped)  # noqa: B023
                    if got is None:   # stopped while waiting (the last chunk's wait too: not a finished build)
                        return self._stopped(report, build)
                    result = got
                # the chunk's links first: storing them is idempotent, so a chunk built again stores the same
                report.links += self._store_links(lo, hi, result.links)
                if result.segment is not None:
                    build.pending = {"segment": result.segment.segment_id(), "cursor": result.last_id,
                                     "rows": result.rows}
                    _write_json(self.dir / BUILD_FILE, asdict(build))
                    segments.commit_segments(ix, [result.segment])
                    build.pending = None
                report.indexed += result.indexed
                report.deleted += result.trashed
                if result.rows:
                    build.cursor = result.last_id
                    build.done += result.rows
                build.total = max(build.total, build.done)
                _write_json(self.dir / BUILD_FILE, asdict(build))
                show(build.done + (pool.in_flight(i + 1) if pool is not None else 0))
            finished = True
        finally:
            if pool is not None:
                pool.close(abandon=not finished)
        # a killed build's worker may have left a segment no TOC names: cleaned now nothing writes here
        segments.clean_index_dir(ix)
        # the entries, after the pages, through Whoosh's own writer (a few per page, short: no bulk segment)
        entries = entry_docs.every(self.conn)
        if entries:
            written, _ = self._write_documents(ix, [], [], entries=entries)
            report.indexed += written
        report.note = (f"{len(chunks)} segment{'s' if len(chunks) != 1 else ''}, "
                       + (f"by {workers} worker processes" if workers > 1 else "in this process"))
        # links whose source is gone (purged before or during the build)
        with transaction(self.conn) as conn:
            drop_orphan_links(conn)
        old = self.state()
        now = now_ms()
        state = IndexManifest(dir=build.dir, derivation=build.derivation, indexed_seq=build.snapshot_seq,
                           pages=ix.doc_count() - self._entry_docs(), first_build_at=old.first_build_at if old else now,
                           built_at=now, updated_at=now)
        _write_json(state_path(self.dir), asdict(state))
        if old is not None and old.dir != build.dir:
            try:  # the swapped-out index is removed RETIRED_GRACE_S from now, not from its last write
                os.utime(self.dir / old.dir)
            except OSError:
                pass
        try:
            (self.dir / BUILD_FILE).unlink()
        except FileNotFoundError:
            pass
        report.indexed_seq = state.indexed_seq
        report.applied_seq = self._applied()
        return report

    @staticmethod
    def _stopped(report: IndexPass, build: BuildJournal) -> IndexPass:
        report.kind = "stopped"
        report.note = f"build stopped at {build.done} of {build.total} pages; the next pass resumes it"
        return report

    def _collect_retired(self) -> None:
        """Remove index directories no longer in use (a swapped-out derivation, an abandoned build),
        once no reader that opened them a moment ago can still be starting."""
        if not self.dir.is_dir():
            return
        st = self.state()
        build = self.build_progress()
        keep = {st.dir if st else None, build.dir if build else None}
        cutoff = time.time() - RETIRED_GRACE_S
        for path in self.dir.glob("lex-*"):
            if path.name in keep or not path.is_dir():
                continue
            try:
                if path.stat().st_mtime < cutoff:
                    shutil.rmtree(path, ignore_errors=True)
            except OSError:
                pass

    # -- incremental -----------------------------------------------------------------------------------
    def _incremental(self, max_rows: int | None) -> IndexPass:
        st = self.state()
        if st is None:
            return IndexPass("skipped", applied_seq=self._applied(), note="no index yet")
        conn = self.conn
        last = st.indexed_seq
        conn.execute("BEGIN")  # one read snapshot: the rows and the position they are applied through
        try:
            applied = position(conn)[0]
            if applied <= last:
                return IndexPass("none", indexed_seq=last, applied_seq=applied)
            cols = "id, container, title, body, trashed_at, version"
            if max_rows is None:
                rows = conn.execute(f"SELECT {cols} FROM pages WHERE version > ? ORDER BY version, id", (last,)).fetchall()
                upto, more = applied, False
            else:
                rows = conn.execute(f"SELECT {cols} FROM pages WHERE version > ? ORDER BY version, id LIMIT ?",
                                    (last, max_rows + 1)).fetchall()
                if len(rows) > max_rows:
                    rows = rows[:max_rows]
                    upto = rows[-1]["version"]
                    # every row at the cut's seq goes in this pass (a purge re-files several at one seq)
                    rows += conn.execute(f"SELECT {cols} FROM pages WHERE version = ? AND id > ? ORDER BY id",
                                         (upto, rows[-1]["id"])).fetchall()
                    more = True
                else:
                    upto, more = applied, False
            purged = [json.loads(r["result"])["page_id"] for r in conn.execute(
                "SELECT result FROM applied_ops WHERE type = 'page.purge' AND status = 'applied' AND seq > ? AND seq <= ? "
                "ORDER BY seq", (last, upto)) if r["result"]]
            # the entries that changed, and those under a page that changed (moved, trashed, restored: an entry
            # stands in its page's container, and leaves the index with its page)
            changed = {r["entry_id"]: r for r in entry_docs.changed_since(conn, last, upto)}
            changed.update((r["entry_id"], r) for r in entry_docs.of_pages(conn, [r["id"] for r in rows]))
            gone = self._purged_entries(st) if purged else []
        finally:
            conn.execute("COMMIT")
        report = IndexPass("incremental", more=more)
        if rows or purged or changed or gone:
            ix = lexical.open_index(self.dir / st.dir)
            report.indexed, report.deleted = self._write_documents(ix, rows, purged, entries=list(changed.values()),
                                                                  gone=gone)
            report.links = self._derive_links(rows, purged)
            st.pages = ix.doc_count() - self._entry_docs()
        else:
            report.kind = "none"
        st.indexed_seq = upto
        st.updated_at = now_ms()
        _write_json(state_path(self.dir), asdict(st))
        report.indexed_seq, report.applied_seq = upto, applied
        return report

    # -- writing -------------------------------------------------------------------------------------
    def _write_documents(self, ix: Any, rows: list[Any], purged: list[str], *,
                         tick: Callable[[int], None] | None = None, entries: list[Any] | None = None,
                         gone: list[str] | None = None) -> tuple[int, int]:
        """Write the rows into the index and commit; the commit's files reach the disk before this
        returns (so before any state or build file that counts on them is written). `entries`: entry rows
        (entry_docs) written as documents of their own, or dropped when out of the bank or under a trashed
        page; `gone`: entry documents whose rows went with a purged page."""
        written = deleted = 0
        path = Path(ix.storage.folder)
        before = lexical.file_marks(path)
        writer = ix.writer(limitmb=128)
        try:
            for i, r in enumerate(rows):
                if tick is not None and i and i % 100 == 0:
                    tick(i)
                if r["trashed_at"] is not None:
                    writer.delete_by_term("id", r["id"])
                    deleted += 1
                else:
                    writer.update_document(**lexical.document(r["id"], r["container"], r["title"], plain_text(r["body"])))
                    written += 1
            for page_id in purged:
                writer.delete_by_term("id", page_id)
                deleted += 1
            for e in entries or ():
                doc = entry_docs.doc_id(e["entry_id"])
                if entry_docs.indexable(e):
                    writer.update_document(**lexical.document(doc, e["container"], "", plain_text(e["entry_body"])))
                    written += 1
                else:
                    writer.delete_by_term("id", doc)
                    deleted += 1
            for doc in gone or ():
                writer.delete_by_term("id", doc)
                deleted += 1
        except BaseException:
            writer.cancel()
            raise
        writer.commit()
        rank_data.ensure_files(ix)   # the new segment's ranking arrays, so no search derives them
        lexical.sync_commit(path, before)
        return written, deleted

    def _entry_docs(self) -> int:
        """The entry documents a pass leaves in the index (the manifest counts pages): the entries in the bank
        under a live page."""
        return int(self.conn.execute(
            f"SELECT count(*) FROM entries e JOIN pages p ON p.id = e.page_id AND p.trashed_at IS NULL "
            f"WHERE e.{entry_docs.IN_BANK_SQL}").fetchone()[0])

    def _purged_entries(self, st: IndexManifest) -> list[str]:
        """Entry documents still in the index whose entry is gone: a page trashed and purged within one pass takes
        its entries' rows with it (by the foreign key) before the index saw the trash. Read off the index's own
        terms of the `id` field under the `entry:` prefix — as many as there are entries, whatever the pages —
        and checked against the entries table."""
        ix = lexical.open_index(self.dir / st.dir)
        with ix.reader() as reader:
            docs = [t.decode("utf-8") if isinstance(t, bytes) else str(t)
                    for t in reader.expand_prefix("id", entry_docs.PREFIX)]
        if not docs:
            return []
        alive = entry_docs.rows_by_id(self.conn, [entry_docs.entry_of(d) or "" for d in docs])
        return [d for d in docs if entry_docs.entry_of(d) not in alive]

    def _derive_links(self, rows: list[Any], purged: list[str]) -> int:
        """Backlinks by id, derived from each changed body (a trashed page's links are kept: the
        backlinks listing hides trashed sources, and a restore needs them back)."""
        with transaction(self.conn) as conn:
            return store_links(conn, rows, purged)



    def _store_links(self, lo: str, hi: str | None, links: list[tuple[str, list[str]]]) -> int:
        """A build chunk's backlinks: every row with lo < id <= hi derived again (a row without links
        keeps none); returns the rows whose links are stored."""
        with transaction(self.conn) as conn:
            return store_range_links(conn, lo, hi, links)


# -- the pass a search runs before it answers ---------------------------------------------------------------

INLINE_BUILD_MAX_PAGES = 2000     # a search builds a first index this small itself (a few seconds)
CATCH_UP_MAX_ROWS = 5000          # and catches up at most this many changed pages before answering


def catch_up_for_search(home: Home, *, progress: Progress | None = None) -> IndexPass | None:
    """The small pass a search runs before it answers, so a person (or an agent) finds what was just
    written: an incremental pass of at most CATCH_UP_MAX_ROWS changed rows, or the first build of a home of
    at most INLINE_BUILD_MAX_PAGES live pages (a larger one is the worker's, and a search says "not
    searchable yet"). `crewlet search` and `crewlet mcp` both run this one. None (said as a warning) when
    it could not run: the search still answers from the index as it is, and says how far behind it is."""
    try:
        with Indexer(home) as indexer:
            return indexer.run_pass(max_rows=CATCH_UP_MAX_ROWS, full_build_max=INLINE_BUILD_MAX_PAGES,
                                    progress=progress)
    except Exception as exc:  # noqa: BLE001 - a search answers from the index as it stands
        log.warning("the index could not catch up: %s", exc)
        return None
