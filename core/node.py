"""A node: this process's view of one home — its configuration, its SQLite file and its log.

Writers append records and wait until their own record is applied; the outcome they return is the
one the applier decided, never one guessed at write time.

Opening a node checks that the log still holds, where the database's position says, the very record
the database applied last. If it does not — or the applier meets damage later — the node still
opens for reading, and every write is refused with the damage named (`crewlet log repair` fixes it).
A home this process cannot write opens read-only: reads work, writes refuse before appending.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import config as config_mod
from .clock import now_ms
from .errors import CrewletError, storage_problem
from .log import FileLog, LogBusy, LogDamage, LogFailed, LogMismatch, LogMoved, Record, RecordTooLarge, locks, peers
from .log.check import verify_sound
from .log.framing import Frame
from .pages import applier
from .pages import records as page_records
from .paths import Home
from .repaired import REPAIR_NOTES, held_lost, relocate
from .replica import engine
from .replica.appliers import Decision, outcome_of
from .replica.engine import Applier, Stream, gc_paused
from .store import Connection, connect, sqlite3
from .store import replace as replace_db
from .store.db import FULL_BELOW, files_stamp, room_left
from .store.digest import content_digest
from .vectors import applier as vectors_applier

if TYPE_CHECKING:
    from .log.jetstream import JetStreamLog
    from .replica.backend import LogBackend

    # a node's log: the files of its home (or a shared directory), or a company's JetStream streams
    NodeLog = FileLog | JetStreamLog

SYSTEM_ACTOR = page_records.SYSTEM_ACTOR
log = logging.getLogger("crewlet.node")
SNAPSHOT_HINT = ("or, on a node of a shared directory, adopt a snapshot of a node that is current: "
                 "`crewlet sync snapshot FILE` there, then `crewlet sync adopt FILE` here")


class WriteFailed(CrewletError):
    """Nothing was written: the home cannot be written (read-only, full, an I/O error)."""

    code = "write_failed"


class NotApplied(CrewletError):
    """The records reached the log but not the database: they apply at the next open (or write)."""

    code = "not_applied"


def _finish_swap(home: Home) -> None:
    """A database swap (`sync adopt`, a repair's rebuild) a killed process left half done is finished before the
    database is opened: otherwise the open would make an empty database where the new one belongs, and this
    node's own rows (its agents' diaries) would stay behind in the file kept aside."""
    try:
        kept = replace_db.finish(home.db_file)
    except (OSError, sqlite3.Error) as exc:
        raise CrewletError(f"{home.db_file} was being replaced (a snapshot adopted, or a repair's rebuild) when that "
                           f"process stopped, and the swap cannot be finished now ({exc}) — fix the cause and run the "
                           "command again; nothing was lost", code="swap_unfinished") from None
    if kept is not None:
        log.warning("finished replacing the database (an adoption or a repair's rebuild) a stopped process left "
                    "half done; the database it replaced is kept as %s", kept)


def home_streams(home: Home) -> list[tuple[str, Path, Applier]]:
    """A home's logs, in the order they are opened, checked and applied: each with the applier its records
    registered (a third log is one more line here)."""
    return [("pages", home.log_file, applier.PAGES), ("vectors", home.vectors_log_file, vectors_applier.VECTORS)]


class Node:
    def __init__(self, home: Home, company: config_mod.Company, conn: Connection, flog: NodeLog,
                 vlog: NodeLog | None = None, settings: config_mod.NodeSettings | None = None) -> None:
        self.home = home
        self.company = company
        # node.toml: this node's id (stamped on every record it writes) and operator
        self.settings = settings if settings is not None else config_mod.NodeSettings()
        self.conn = conn
        board, every_ms = None, 0
        if company.log.backend == "jetstream" and hasattr(flog, "conn"):
            # nodes that share nothing but the servers say where they are in the company's nodes bucket
            from .log.jetstream_company import KvBoard

            board, every_ms = KvBoard(flog.conn, company.log.stream_prefix), 1_000
        self.publisher = peers.Publisher(home, self.settings.node_id, self.settings.operator, board=board,
                                         every_ms=every_ms)
        # the pages log, and the vector log (vectors the fleet's embedding duty published, applied like it)
        self.pages = Stream("pages", flog, applier.PAGES)
        self.vectors = Stream("vectors", vlog if vlog is not None else _open_log(home.vectors_log_file), vectors_applier.VECTORS)
        self.streams = (self.pages, self.vectors)
        # one connection per node object; the Textual app's workers share it, so serialise use
        self.lock = threading.RLock()
        self._config_stamp = self._stamp()
        # damage between the log and the database, found at open or by a write: reads go on,
        # writes are refused with it until the log is repaired and the node reopened
        self.damage: LogDamage | None = None
        # why records on the log could not be applied at open (a full disk): retried by each write
        self.apply_error: str | None = None
        self.last_digest: Any = None   # the content digest this process computed last (publish_digest)
        # the log's servers cannot be reached (a JetStream log): reads serve this database, writes refuse
        self.offline: Offline | None = None

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def open(cls, home: Home, *, sync_containers: bool = True, catch_up: bool = True,
             progress: Callable[[int], None] | None = None) -> Node:
        """Open the home: check the database's position on each log and apply what was appended since
        (`catch_up`; `progress` hears each batch). A node of a shared directory first checks that the
        directory is there and that its filesystem honours the writers' lock (refused otherwise)."""
        if home.join_note.exists():   # a `sync join` a killed process left half done: finished before anything is read
            from .log import joining

            joining.finish(home)
        missing = home.config_problem()
        if missing:     # said before "company.toml: not found — run crewlet init", which would adopt the database
            raise CrewletError(missing, code="config_missing")
        settings = config_mod.load_node(home.node_file)
        if home.shared is not None:
            _require_shared(home)
            if config_mod.load(home.config_file).log.backend == "jetstream":
                # the company moved from the shared directory onto JetStream: this node follows
                settings = _follow(home, settings)
        company = config_mod.with_operator(config_mod.load(home.config_file), settings, home.node_file)
        _finish_swap(home)
        conn = connect(home.db_file)
        if not settings.node_id and not getattr(conn, "readonly", False):
            settings = _give_node_id(home, settings)
        flog: NodeLog
        vlog: NodeLog
        if company.log.backend == "jetstream":
            from .log import jetstream

            try:
                flog, vlog = jetstream.open_logs(company.log, name=f"crewlet {settings.node_id or home.root.name}")
            except BaseException:
                conn.close()
                raise
            if flog.conn.up and not getattr(conn, "readonly", False):
                from .log import jetstream_company

                try:
                    if jetstream_company.sync_company(home.config_file, flog.conn, company.log.stream_prefix,
                                                      _valid_company(home.config_file)) == "pulled":
                        company = config_mod.with_operator(config_mod.load(home.config_file), settings, home.node_file)
                except (CrewletError, OSError) as exc:
                    log.info("company.toml not compared with the company bucket: %s", exc)
        else:
            # read-only until the first append: a command that only reads works on a home it cannot write
            flog, vlog = _open_log(home.log_file), _open_log(home.vectors_log_file)
        node = cls(home, company, conn, flog, vlog, settings)
        node.verify_log(whole=False)
        if catch_up and node.damage is None and node.offline is None and not node.readonly:
            try:
                node.catch_up(progress=progress)
            except LogDamage as exc:
                node._damaged(exc)
            except LogFailed as exc:
                if not node._unreachable(exc):
                    raise
            except (sqlite3.OperationalError, OSError) as exc:
                node.apply_error = storage_problem(exc, home.db_file)[1]
                log.info("records on the log could not be applied: %s", node.apply_error)  # the CLI says it
        if node.damage is None:
            # damage anywhere else in the logs (behind the position too): after what could be applied was
            with node.lock:
                node._verify_whole_logs()
        if sync_containers and node.writable:
            try:
                node.sync_containers()
            except WriteFailed as exc:  # a log this process cannot write: reads still work
                log.info("container documents not written: %s", exc)
        return node

    @property
    def log(self) -> FileLog:
        """The pages log's backend."""
        return self.pages.backend  # type: ignore[return-value]

    @log.setter
    def log(self, flog: FileLog) -> None:
        self.pages.backend = flog

    @property
    def vlog(self) -> FileLog:
        """The vector log's backend."""
        return self.vectors.backend  # type: ignore[return-value]

    @vlog.setter
    def vlog(self, flog: FileLog) -> None:
        self.vectors.backend = flog

    @property
    def readonly(self) -> bool:
        """The database cannot be written by this process (the node opened it read-only)."""
        return bool(getattr(self.conn, "readonly", False))

    @property
    def writable(self) -> bool:
        return self.damage is None and not self.readonly and self.apply_error is None and self.offline is None

    def _unreachable(self, exc: BaseException) -> bool:
        """Note that the log's servers cannot be reached (True), or say it is another failure (False)."""
        from .log.jetstream import LogUnreachable

        if not isinstance(exc, LogUnreachable):
            return False
        self.offline = Offline.of(self, exc)
        log.info("%s", self.offline.line())   # the CLI and the app say it, once
        return True

    def follow_storage(self) -> bool:
        """A database opened read-only because its disk was full (a read needs nothing written) is opened again
        once that changes: for writing when there is room again — then what others appended meanwhile is
        applied —, or read-only again when another writer changed its files while the disk stays full (the
        first connection may be an immutable snapshot, which never sees them). A process that lives long (the
        app, `crewlet mcp`, a worker) asks before it serves, and a write asks before it refuses; otherwise it
        would be stale and refuse every write for its whole life. A statvfs and two stats while the disk is
        full; nothing at all otherwise. Returns whether the connection was opened again."""
        with self.lock:
            old = self.conn
            if not getattr(old, "readonly_reason", ""):
                return False   # writable, or read-only by choice or permission: nothing to follow
            db = self.home.db_file
            if room_left(db.parent) < FULL_BELOW and files_stamp(db) == getattr(old, "opened_on", None):
                return False
            try:
                fresh = connect(db)
            except (sqlite3.Error, OSError) as exc:
                log.info("the database could not be opened again: %s", exc)
                return False
            self.conn = fresh
            old.close()
            if self.readonly:
                return True
            log.info("%s has room again: it is open for writing", db)
            if not self.settings.node_id:
                self.settings = _give_node_id(self.home, self.settings)
                self.publisher = peers.Publisher(self.home, self.settings.node_id, self.settings.operator,
                                                 board=self.publisher.board, every_ms=self.publisher.every_ms)
            self.verify_log()
            if self.damage is None:
                try:
                    self.catch_up()
                    self.apply_error = None
                except LogDamage:
                    pass   # self.damage holds it: reads go on, writes are refused with it
                except (sqlite3.Error, OSError) as exc:
                    self.apply_error = storage_problem(exc, db)[1]
            return True

    def verify_log(self, *, whole: bool = True) -> None:
        """The database's position against each log: on a frame boundary, not past the end, and
        the frame there is the record the database applied (its digest). A position stored before
        digests were kept is checked by a scan, and given its digest once.

        After a repair wrote a log anew (noted in `repairs.jsonl` beside the logs) the record may stand at
        another offset: the position moves to it. A database that applied a record the repair could not give
        back holds a change the log no longer has: that is damage, named."""
        with self.lock:
            repaired = isinstance(self.log, FileLog) and self.log.path.with_name(REPAIR_NOTES).exists()
            for stream in self.streams:
                flog, name = stream.backend, stream.position_name
                applied = stream.applied(self.conn)
                try:
                    frame = flog.locate(applied)
                except LogDamage as exc:
                    frame = (relocate(flog, applied, self.conn, stream.name)
                             if repaired and isinstance(flog, FileLog) else None)
                    if frame is None:
                        self._damaged(_earlier_damage(flog, exc))
                        return
                    log.info("%s was repaired: this database's position moves to byte offset %d", flog.path, frame.end)
                    applied = dataclasses.replace(applied, start=None)  # stored below
                except LogFailed as exc:
                    if self._unreachable(exc):
                        return
                    raise
                if frame is not None and applied.start is None and not self.readonly:
                    engine.store_position(self.conn, applied.seq, frame, name)  # autocommit: one statement
            if repaired:
                self._check_held_lost()
            if whole and self.damage is None:
                self._verify_whole_logs()

    def _verify_whole_logs(self) -> None:
        """Damage anywhere in a log — behind this database's position too — is said by every command, not only
        by the next write (core/log/check.py `verify_sound`; an unchanged log is not read again)."""
        path = self.home.verified_file
        try:
            marks = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(marks, dict):
                marks = {}
        except (OSError, ValueError):
            marks = {}
        changed = False
        for flog in (self.log, self.vlog):
            if not isinstance(flog, FileLog):
                continue
            key = flog.path.name
            try:
                mark = verify_sound(flog, marks.get(key))
            except LogDamage as exc:
                self._damaged(exc)
                return
            if mark != marks.get(key):
                marks[key], changed = mark, True
        if changed and not self.readonly:
            try:  # best effort, written in place (a read makes no temporary file): a torn mark reads as none
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644)
                try:
                    os.write(fd, json.dumps(marks, sort_keys=True).encode("utf-8"))
                finally:
                    os.close(fd)
            except OSError:
                pass

    def _check_held_lost(self) -> None:
        held = held_lost(self.conn, self.log.path)
        if not held:
            return
        first = held[0]
        more = f" and {len(held) - 1} more" if len(held) > 1 else ""
        self._damaged(LogMismatch(
            self.log.path, 0, first.seq,
            f"the log was repaired and no longer holds record {first.seq} ({first.type} {first.what}".rstrip()
            + f"){more}, which this node applied: this database holds a change no log has — `crewlet log repair` "
            "rebuilds it from the log, naming what it loses", kind="diverged"))

    def on_lock_wait(self, notice: Any) -> None:
        """Who hears, once, that a write waits for a log's lock (another process holds it): `notice(text)`.
        Without one the log says it as a warning on its logger (the CLI prints it)."""
        self._lock_notice = notice
        self.log.on_lock_wait = self.vlog.on_lock_wait = notice

    def follow_repair(self) -> bool:
        """If a repair wrote a log anew since this process opened it (another process, or another node of the
        shared directory), open the new file and check the position against it again. Returns whether it did."""
        changed = False
        with self.lock:
            for attr in ("log", "vlog"):
                flog: FileLog = getattr(self, attr)
                if not isinstance(flog, FileLog):
                    continue
                try:
                    if not flog.path.exists() or not flog.replaced():
                        continue
                except (OSError, ValueError):
                    continue
                flog.close()
                fresh = _open_log(flog.path)
                fresh.on_lock_wait = getattr(self, "_lock_notice", None)
                setattr(self, attr, fresh)
                changed = True
            if changed:
                self.damage = None
                self.verify_log()
        return changed

    def _damaged(self, exc: LogDamage) -> None:
        if self.company.log.backend == "jetstream":
            # a stream is not cut from a node (core/sync/nats_check.py): this node starts over from a snapshot
            exc.fix = ("`crewlet log check` says where the streams and this database disagree; start this node over "
                       "from a snapshot of a node that is current: `crewlet sync snapshot FILE` there, then "
                       "`crewlet sync adopt FILE` here")
        elif self.home.shared is not None and SNAPSHOT_HINT not in exc.fix:
            exc.fix = f"{exc.fix}, {SNAPSHOT_HINT}"
        self.damage = exc
        log.info("%s — writes are refused", exc)  # the CLI and the app say it, once

    @property
    def node_id(self) -> str:
        return self.settings.node_id

    def positions(self) -> dict[str, tuple[int, int]]:
        """Where this database is on each log: position name -> (seq, end offset)."""
        with self.lock:
            return {stream.position_name: stream.position(self.conn) for stream in self.streams}

    def applied_ends(self) -> dict[Path, int]:
        """Log file -> the byte offset this database applied it through (the log watcher's question)."""
        with self.lock:
            return {stream.backend.path: stream.position(self.conn)[1] for stream in self.streams}

    def publish_position(self) -> None:
        """Say, beside the shared logs, how far this node applied them (a node of a shared directory
        only; best effort: a peer file that cannot be written never fails the write that moved it). A node
        on JetStream notes instead when it was last in contact with the servers (what "behind since" says)."""
        if self.company.log.backend == "jetstream" and not self.readonly:
            from .log import jetstream

            jetstream.note_contact(self.home)
            if self.offline is not None:
                return
        if not self.shares_peers or self.readonly:
            return
        try:
            self.publisher.publish(self.positions())
        except OSError as exc:
            log.info("could not say where this node is in %s: %s", self.publisher.board.where, exc)

    @property
    def shares_peers(self) -> bool:
        """Do other nodes hear where this one is (a shared directory's nodes/, a company's nodes bucket on NATS)?"""
        return self.home.shared is not None or self.company.log.backend == "jetstream"

    def published_digest(self) -> dict[str, Any] | None:
        """The digest this node last said, if it stands for the positions the database is at now (else None:
        nothing is computed here)."""
        if not self.shares_peers:
            return None
        with self.lock:
            at = {name: seq for name, (seq, _end) in self.positions().items()}
            last = self.publisher.digest
        return last if last is not None and last.get("positions") == at else None

    def publish_digest(self, *, force: bool = False) -> dict[str, Any] | None:
        """Compute this node's content digest and say it, with the positions it stands for, beside the shared
        logs: nodes at the same positions must hold the same content, and `crewlet sync status` names any that
        do not. Not computed again while the positions are those of the last digest (unless `force`).

        Computed on a read connection of its own (`content_digest(db_file)`), never under the node's lock: it
        reads every row (seconds on a large home) while the app's reads and writes go on. The full digest
        (tables, rows) stays in `last_digest` for whoever asked for it (`sync status --digest`)."""
        if not self.shares_peers:
            return None
        last = self.publisher.digest
        if last is not None and not force:
            at = {name: seq for name, (seq, _end) in self.positions().items()}   # the lock for a moment
            if last.get("positions") == at:
                return last
        full = content_digest(self.home.db_file)
        # every log this node has, a log it never applied at seq 0 (it has no position row yet)
        full.logs = {s.position_name: full.logs.get(s.position_name, (0, 0)) for s in self.streams}
        self.last_digest = full
        digest = full.published(now_ms())
        if not self.readonly:
            try:
                self.publisher.publish(full.logs, digest=digest)
            except OSError as exc:
                log.info("could not say this node's digest in %s: %s", self.publisher.board.where, exc)
        else:
            self.publisher.digest = digest
        return digest

    def _peers_guard(self, position: str) -> Callable[[], tuple[int, str]] | None:
        """For a node of a shared directory: who else applied the log furthest (asked before a torn
        tail is cut, so no node ever cuts bytes another node's database applied)."""
        if self.home.shared is None:
            return None
        return lambda: peers.furthest(self.home, position, other_than=self.node_id)

    def _stamped(self, records: Sequence[Record]) -> list[Record]:
        """Each record carries the id of the node that wrote it."""
        node_id = self.node_id
        if not node_id:
            return list(records)
        return [r if r.node else r.with_node(node_id) for r in records]

    def close(self) -> None:
        with self.lock:
            if self.publisher.every_ms and self.shares_peers and not self.readonly and self.offline is None:
                try:   # a position the throttle held back is said before the process lets the node go
                    self.publisher.publish(self.positions(), final=True)
                except (OSError, sqlite3.Error) as exc:
                    log.info("could not say where this node is in %s: %s", self.publisher.board.where, exc)
            self.conn.close()
            self.log.close()
            self.vlog.close()

    def __enter__(self) -> Node:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _load_company(self) -> config_mod.Company:
        return config_mod.with_operator(config_mod.load(self.home.config_file), self.settings, self.home.node_file)

    def reload_config(self) -> None:
        self.company = self._load_company()
        self._config_stamp = self._stamp()

    def _stamp(self) -> tuple[int, int]:
        try:
            st = self.home.config_file.stat()
        except FileNotFoundError:
            return (0, 0)
        return (st.st_mtime_ns, st.st_size)

    def refresh_config(self) -> None:
        """Re-read company.toml when it changed on disk (one stat): rules are read off the configuration
        current at each write. A file that no longer parses keeps the last good one and says so once."""
        stamp = self._stamp()
        if stamp == getattr(self, "_config_stamp", stamp):
            return
        try:
            self.company = self._load_company()
        except config_mod.ConfigError as exc:
            log.warning("company.toml changed but does not load; keeping the last good configuration: %s", exc)
        self._config_stamp = stamp

    # -- the write path --------------------------------------------------------------------
    def catch_up(self, progress: Callable[[int], None] | None = None) -> int:
        """Apply what the log holds past this node's position. Refused once damage is known: a log
        that disagrees with the database must be repaired before anything more is applied from it."""
        with self.lock:
            self.follow_storage()
            self.follow_repair()
            if self.damage is not None:
                raise self.damage
            try:
                applied = sum(stream.catch_up(self.conn, progress=progress) for stream in self.streams)
            except LogDamage as exc:
                self._damaged(exc)
                raise
            except LogFailed as exc:
                self._unreachable(exc)   # said by whoever shows the node (the app's status line, the CLI)
                raise
            self.offline = None
            self.publish_position()
            return applied

    def submit_vectors(self, records: Sequence[Record], *, sync: bool = True) -> int:
        """Append vector records to the vector log and apply it through them, under the same refusals
        as `submit` (a damaged log, a database or log this process cannot write, a record too large)."""
        if not records:
            return 0
        with self.lock:
            written = self._append(self.vectors, records, sync=sync, nothing="no vector was written")
            try:
                applied = self.vectors.catch_up(self.conn, appended=written)
            except LogDamage as exc:
                self._damaged(exc)
                raise
            self.offline = None
            self.publish_position()
            return applied

    def _append(self, stream: Stream, records: Sequence[Record], *, sync: bool,
                nothing: str) -> list[tuple[Record, Frame]]:
        """Append to one of the node's logs, or refuse before a byte is written: a damaged log, a
        database this process cannot write, a record over the size limit, a log it cannot write."""
        if self.damage is not None:
            raise self.damage
        if self.readonly and self.follow_storage() and self.damage is not None:
            raise self.damage
        if self.readonly:
            reason = getattr(self.conn, "readonly_reason", "")
            if reason:  # opened read-only because the disk was full when this process opened it
                raise WriteFailed(f"{reason} — {nothing}; free some space there and retry (reading works as it is)",
                                  code="disk_full")
            raise WriteFailed(f"{self.home.db_file} is read-only for this process — {nothing}; make the home "
                              "writable to change it (reading works as it is)", code="read_only")
        if self.offline is not None:
            # the servers could not serve the log a moment ago: asked again (the record this database applied
            # last, by seq) — still so, the write is refused at once rather than after an append's patience
            self.offline = None
            self.verify_log(whole=False)
            if self.damage is not None:
                raise self.damage
            if self.offline is not None:
                raise WriteFailed(f"{self.offline.line()} — {nothing}", code="offline")
        guard = self._peers_guard(stream.position_name)
        try:
            try:
                return stream.append(self.conn, self._stamped(records), sync=sync, guard=guard)
            except LogMoved:
                # a repair wrote the log anew since this process opened it: follow it, then append once more
                if not self.follow_repair():
                    raise
                if self.damage is not None:
                    raise self.damage from None
                self.catch_up()
                return stream.append(self.conn, self._stamped(records), sync=sync, guard=guard)
        except LogDamage as exc:
            self._damaged(exc)
            raise
        except LogFailed as exc:
            if self._unreachable(exc):
                # a local write that was not ordered is not a write: refused, never queued
                assert self.offline is not None
                if getattr(exc, "published", 0):
                    # published before the servers went away: stored or not, the servers will say once they are back
                    # (a retry now could write it twice)
                    raise WriteFailed(f"{self.offline.line()} — {exc.acknowledged} of {exc.published} record(s) were "
                                      "acknowledged and the rest may have been stored: look once the servers answer "
                                      "before writing it again", code="outcome_unknown") from None
                raise WriteFailed(f"{self.offline.line()} — {nothing}", code="offline") from None
            raise
        except RecordTooLarge as exc:
            raise CrewletError(str(exc), code="record_too_large", size=exc.size) from None
        except LogBusy as exc:
            raise WriteFailed(str(exc), code="busy") from None
        except OSError as exc:
            code, words = storage_problem(exc, stream.backend.path)
            raise WriteFailed(f"{words} — {nothing}", code=code) from exc

    def bulk_writes(self) -> Any:
        """A context for a bulk writer (the importer): this database written without the WAL while no other
        connection has it open (see store.bulk_writes); yields whether it is."""
        from .store import bulk_writes

        return bulk_writes(self.conn, self.lock)

    def submit(self, records: Sequence[Record], *, sync: bool = True, bulk: bool = False) -> list[Decision]:
        """Append records, apply the log through them, and return each record's outcome. `bulk`: a writer's
        bounded batch (the importer's), applied in one transaction however long it takes.

        Refused before anything is appended: a damaged log (LogDamage), a database this process
        cannot write, a record over the size limit, a log that cannot be written (WriteFailed).
        Records that reached the log but could not be applied raise NotApplied, naming them."""
        if not records:
            return []
        with self.lock, gc_paused():
            written = self._append(self.pages, records, sync=sync, nothing="nothing was written")
            appended = [rec for rec, _ in written]
            decided: dict[str, Decision] = {}
            try:
                # our own records are applied from the frames in memory, not read back from the file
                self.pages.catch_up(self.conn, outcomes=decided, appended=written, bulk=bulk)
            except (LogDamage, LogFailed, sqlite3.Error, OSError) as exc:
                if isinstance(exc, LogDamage):
                    self._damaged(exc)
                    cause = str(exc)
                elif isinstance(exc, LogFailed):
                    self._unreachable(exc)
                    cause = str(exc)
                else:
                    cause = storage_problem(exc, self.home.db_file)[1]
                self.apply_error = cause
                pending = [r for r in appended if r.op_id not in decided
                           and outcome_of(self.conn, r.op_id) is None]
                if pending:
                    raise _not_applied(pending, cause) from exc
                raise
            self.apply_error = None
            self.offline = None      # the servers took the records and the log was read: in contact again
            self.publish_position()
            outcomes = []
            for rec in appended:
                # another process may have applied our record first: then its outcome is in the table
                out = decided.get(rec.op_id) or outcome_of(self.conn, rec.op_id)
                if out is None:  # pragma: no cover - would mean the applier skipped a record
                    raise CrewletError(f"record {rec.seq} ({rec.op_id}) was appended but not applied")
                outcomes.append(out)
            return outcomes

    def submit_one(self, record: Record) -> Decision:
        return self.submit([record])[0]

    def applied_seq(self) -> int:
        with self.lock:
            return self.pages.position(self.conn)[0]

    # -- container documents ---------------------------------------------------------------
    def sync_containers(self) -> int:
        """A container document per declared space, written only where the row does not already
        say what the configuration says (so the log grows with edits, not with restarts)."""
        epoch = self.company.activated_at
        records = []
        with self.lock:
            rows = {r["key"]: r for r in self.conn.execute("SELECT * FROM containers")}
            for key, space in self.company.declared_containers().items():
                row = rows.get(key)
                if row is not None:
                    same = (row["name"], row["purpose"], row["lead"]) == (space.name, space.purpose, space.lead)
                    if row["chart_epoch"] > epoch or (same and row["chart_epoch"] == epoch):
                        continue
                    if same and epoch == 0:
                        continue  # no activation instant: stamp nothing
                records.append(page_records.container_declare(key=key, name=space.name, purpose=space.purpose,
                                                              lead=space.lead, chart_epoch=epoch))
        self.submit(records)
        return len(records)


@dataclasses.dataclass(frozen=True)
class Offline:
    """This node cannot reach its log's servers: how far its own copy is, and since when it is behind."""

    servers: str
    why: str
    applied_seq: int
    last_contact_ms: int | None
    quorum: bool = False       # the servers answer, but without a quorum to serve the log

    @classmethod
    def of(cls, node: Node, exc: BaseException) -> Offline:
        from .log import jetstream

        contact = jetstream.last_contact(node.home) or getattr(exc, "since_ms", None)
        return cls(getattr(exc, "servers", ""), getattr(exc, "why", str(exc)), node.applied_seq(), contact,
                   bool(getattr(exc, "quorum", False)))

    def line(self) -> str:
        since = "never in contact from this home"
        if self.last_contact_ms:
            ago = max(0, (now_ms() - self.last_contact_ms) // 1000)
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.last_contact_ms / 1000))
            since = f"behind since {when} ({_ago(ago)} ago), the last contact"
        state = "have no quorum" if self.quorum else "cannot be reached"
        return (f"offline: the log's NATS servers ({self.servers}) {state} ({self.why}); this node serves "
                f"its own copy, applied through seq {self.applied_seq:,}, {since} — writes are refused until they "
                "can be reached")

    def to_json(self) -> dict:
        return {"servers": self.servers, "why": self.why, "applied_seq": self.applied_seq,
                "last_contact_ms": self.last_contact_ms, "no_quorum": self.quorum}


def _ago(seconds: int) -> str:
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 5400:
        return f"{seconds // 60} min"
    if seconds < 48 * 3600:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} days"


def _earlier_damage(flog: LogBackend, found: LogDamage) -> LogDamage:
    """The position's frame is not where it should be: damage earlier in the log (a duplicated frame, a flipped
    length) moves every frame after it, and is what to name. Otherwise the position's own problem."""
    if not isinstance(flog, FileLog):
        return found
    try:
        verify_sound(flog, None)
    except LogDamage as first:
        if first.offset <= found.offset:
            return first
    return found


def _not_applied(pending: list[Record], cause: str) -> NotApplied:
    first, last = pending[0].seq, pending[-1].seq
    which = f"record {first}" if first == last else f"records {first}-{last}"
    return NotApplied(f"written to the log as {which}, not yet applied: {cause} — it will apply at the next open",
                      seqs=[r.seq for r in pending], op_ids=[r.op_id for r in pending])


def _valid_company(file: Path) -> Callable[[str], object]:
    import tomllib

    return lambda text: config_mod.parse(tomllib.loads(text), file)


def _follow(home: Home, settings: config_mod.NodeSettings) -> config_mod.NodeSettings:
    """A node of a shared directory whose company.toml there now says `backend = "jetstream"` follows: once the
    streams hold, at each of its database's positions, the very record it applied there, those positions become
    stream positions, its company.toml becomes a copy of the directory's, and node.toml forgets the directory."""
    import shutil

    from .log import jetstream, jetstream_company

    company = config_mod.load(home.config_file)
    if home.db_file.exists():
        conn = jetstream.Connection(company.log, name=f"crewlet follow {settings.node_id}").retain()
        try:
            if not conn.connect():
                raise CrewletError(f"the company moved to NATS JetStream ({','.join(company.log.url)}), which cannot "
                                   f"be reached from here ({conn.down_why}) — this node follows once it can",
                                   code="unreachable")
            jetstream_company.check_positions(home.db_file, conn, company.log.stream_prefix,
                                              {stream_applier.position: name for name, _, stream_applier in home_streams(home)})
        finally:
            conn.release()
        jetstream_company.convert_positions(home.db_file)
    shutil.copy2(home.config_file, home.root / "company.toml")
    followed = dataclasses.replace(settings, shared=None)
    config_mod.write_node(home.node_file, followed)
    return followed


def _require_shared(home: Home) -> None:
    shared = home.shared
    assert shared is not None
    if not shared.is_dir():
        raise CrewletError(f"the shared directory {shared} (named in {home.node_file}) cannot be reached — mount it, "
                           f"or fix `shared` in {home.node_file}", code="shared_unreachable")
    locks.require(shared)


def _give_node_id(home: Home, settings: config_mod.NodeSettings) -> config_mod.NodeSettings:
    """A home made before nodes had ids gets one at its first writable open (kept in node.toml)."""
    given = dataclasses.replace(settings, node_id=config_mod.new_node_id())
    try:
        config_mod.write_node(home.node_file, given)
    except OSError as exc:
        log.info("no node id written to %s: %s", home.node_file, exc)
        return settings
    return given


def _open_log(path: Path) -> FileLog:
    """Read-only until the first append: a command that only reads works on a home it cannot write
    (a log this home never wrote yet is created, as `init` creates it)."""
    return FileLog(path, readonly=path.exists())


def init_home(home: Home, data: dict, *, force: bool = False) -> Path:
    """Create a home: company.toml, the SQLite file and the log file."""
    home.require_directory()
    orphaned = home.config_problem()
    if orphaned:     # never adopt a database or logs under a configuration that did not make them
        raise CrewletError(orphaned, code="config_missing")
    if home.config_file.exists() and not force:
        raise CrewletError(f"{home.config_file} already exists — this home is initialised; use it, or pick another --home",
                           code="exists")
    config_mod.parse(data, home.config_file)  # refuse a bad config before writing anything
    home.root.mkdir(parents=True, exist_ok=True)
    config_mod.write(home.config_file, data)
    if not config_mod.load_node(home.node_file).node_id:
        config_mod.write_node(home.node_file, config_mod.NodeSettings(node_id=config_mod.new_node_id()))
    conn = connect(home.db_file)
    conn.close()
    FileLog(home.log_file).close()
    FileLog(home.vectors_log_file).close()
    return home.root
