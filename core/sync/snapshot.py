"""Snapshots: a consistent copy of a node's database, holding the position it applied each log through.

`take` writes one with SQLite's `VACUUM INTO` (a single read transaction: the rows and the positions are
of one instant), then removes what each node keeps for itself (its duties, backlinks, the embedding
duty's holds), leaving one self-contained file.

`check` sets a snapshot against the shared logs before anything adopts it: the log must still hold, at
the snapshot's position, the very record the snapshot applied last (its seq, offset and digest). A log
that ends before that position, or no longer holds that record there, is a gap; a log that holds
another record there is another log. Either is refused with the reason. Its content is held against every
digest this home knows at that position: the one it says it was taken as, the ones peers published, and this
node's own database's when it stands there.

`install` puts a checked snapshot in place as a home's database (the one it replaces is kept aside), so
the node applies only the log after the snapshot's position.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import config as config_mod
from ..durable import fsync_dir, fsync_file
from ..errors import CrewletError
from ..leftovers import sweep
from ..log import FileLog, LogMismatch
from ..log.framing import Applied
from ..replica import engine
from ..paths import Home
from ..repair import database_aside_path, home_logs
from ..store import connect, sqlite3
from ..store import replace as replace_mod
from ..store.migrations import MIGRATIONS
from ..store.digest import CARRIED_LOCAL, DERIVED_LOCAL, NODE_LOCAL, content_digest

if TYPE_CHECKING:
    from ..node import Node

# each node's own: never carried by a snapshot (agents' diaries are private to the node they run on, and
# follow its own database instead: `install` below; cached answers are the node's own, written for its askers)
NODE_LOCAL_TABLES = NODE_LOCAL   # as core/store/digest.py `TABLES` declares them
# the node-local tables a replaced database does not carry over, because they are derived again from the rows
# the new one holds: backlinks by the indexer, each duty's cursor by its next pass, a diary's counts by the
# triggers that insert its notes. Every other node-local table is this node's own and is carried.
REBUILT_NODE_LOCAL = DERIVED_LOCAL   # as core/store/digest.py declares them
# what a snapshot says of itself: its content digest (core/store/digest.py) at its positions, checked on adopt
META = "crewlet_snapshot"


@dataclass
class SnapshotInfo:
    path: Path
    size: int
    positions: dict[str, Applied] = field(default_factory=dict)   # log name ("pages") -> position

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "bytes": self.size,
                "positions": {name: {"seq": a.seq, "byte_offset": a.end, "frame_offset": a.start, "digest": a.digest}
                              for name, a in self.positions.items()}}

    def line(self) -> str:
        where = ", ".join(f"{name} log through seq {a.seq:,}" for name, a in self.positions.items())
        return f"{self.path} ({self.size / (1024 * 1024):.1f} MiB): {where}"


class SnapshotRefused(CrewletError):
    code = "snapshot_mismatch"


def _strip_node_local(conn: Any) -> None:
    present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table in NODE_LOCAL_TABLES:
        if table in present:
            conn.execute(f"DELETE FROM {table}")


def _single_file(conn: Any) -> None:
    """Fold the WAL back in and leave the file on its own (a snapshot is one file to carry)."""
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode = DELETE")


def _positions(conn: Any, home: Home) -> dict[str, Applied]:
    return {spec.name: engine.applied_position(conn, spec.position) for spec in home_logs(home)}


# a snapshot being written: `.<name>.<pid>.partial` beside the file it becomes
_PARTIAL = re.compile(r"\..+\.(?P<pid>\d+)\.partial")


def _partial_for(out: Path) -> Path:
    """Where `out` is written before it is renamed into place, named with this process's pid; the snapshots a
    killed `sync snapshot` left half-written in that directory (their process gone) are removed first."""
    sweep(out.parent, _PARTIAL)
    partial = out.with_name(f".{out.name}.{os.getpid()}.partial")
    partial.unlink(missing_ok=True)
    return partial


def take(node: Node, out: Path) -> SnapshotInfo:
    """Write a snapshot of `node`'s database to `out` (a new file)."""
    out = Path(out).expanduser().resolve()
    if out.exists():
        raise CrewletError(f"{out} already exists — give a new file name for the snapshot", code="exists")
    if not out.parent.is_dir():
        raise CrewletError(f"{out.parent} is not a directory — create it first", code="no_directory")
    partial = _partial_for(out)
    try:
        with node.lock:
            node.conn.execute("VACUUM INTO ?", (str(partial),))
        conn = connect(partial, migrate_schema=False)
        try:
            conn.execute("BEGIN IMMEDIATE")
            _strip_node_local(conn)
            conn.execute("COMMIT")
            positions = _positions(conn, node.home)
            digest = content_digest(conn).content
            conn.execute(f"CREATE TABLE {META} (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            conn.execute(f"INSERT INTO {META} VALUES ('content_digest', ?), ('positions', ?)",
                         (digest, json.dumps(_at(node.home, positions), sort_keys=True)))
            _single_file(conn)
        finally:
            conn.close()
        fsync_file(partial)
        os.replace(partial, out)
        fsync_dir(out.parent)
    finally:
        partial.unlink(missing_ok=True)
    return SnapshotInfo(out, out.stat().st_size, positions)


def check(home: Home, file: Path) -> SnapshotInfo:
    """Is `file` a crewlet database whose positions the home's (shared) logs still hold? Refused with the
    reason otherwise; nothing is written."""
    file = Path(file).expanduser().resolve()
    if not file.is_file():
        raise CrewletError(f"{file}: no such file — give the file `crewlet sync snapshot` wrote", code="not_found")
    try:
        conn = connect(file, readonly=True)
    except sqlite3.Error as exc:
        raise SnapshotRefused(f"{file} is not a database crewlet can open ({exc}) — give a file `crewlet sync "
                              "snapshot` wrote") from None
    try:
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            ok = conn.execute("PRAGMA quick_check").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise SnapshotRefused(f"{file} is not a SQLite database ({exc}) — give a file `crewlet sync snapshot` "
                                  "wrote") from None
        if ok != "ok":
            raise SnapshotRefused(f"{file} is damaged ({ok}) — take a new snapshot")
        if not {"_migrations", "log_position", "pages", "applied_ops"} <= tables:
            raise SnapshotRefused(f"{file} is not a crewlet database (no log position or pages) — give a file "
                                  "`crewlet sync snapshot` wrote")
        known = {fn.__name__ for fn in MIGRATIONS}
        newer = sorted({r[0] for r in conn.execute("SELECT name FROM _migrations")} - known)
        if newer:
            raise SnapshotRefused(f"{file} was made by a newer crewlet (its schema has {', '.join(newer)}) — "
                                  "upgrade crewlet on this node first")
        positions = _positions(conn, home)
        row = conn.execute("SELECT op_id FROM applied_ops WHERE seq = 1").fetchone()
        first_op = row[0] if row else None
        content = content_digest(conn).content
        stored = (conn.execute(f"SELECT value FROM {META} WHERE key = 'content_digest'").fetchone()
                  if META in tables else None)
    finally:
        conn.close()
    if stored is not None and stored[0] != content:
        raise SnapshotRefused(f"{file} was changed after it was taken: its content digest is {content[:12]}…, it was "
                              f"taken as {stored[0][:12]}… at its log position — take a new snapshot")
    company = config_mod.load(home.config_file) if home.config_file.is_file() else None
    if company is not None and company.log.backend == "jetstream":
        _check_on_streams(file, company.log, first_op, positions, home, content)
        _check_against_own(file, home, positions, content)
        return SnapshotInfo(file, file.stat().st_size, positions)
    _check_against_peers(file, home, _at(home, positions), content)
    _check_against_own(file, home, positions, content)
    _check_same_log(file, home.log_file, first_op)
    for spec in home_logs(home):
        applied = positions[spec.name]
        _check_position(file, spec.name, spec.path, applied)
    return SnapshotInfo(file, file.stat().st_size, positions)


def _check_on_streams(file: Path, settings: Any, first_op: str | None, positions: dict[str, Applied], home: Home,
                      content: str) -> None:
    """The same checks against the company's streams: the pages stream's seq 1 is the record the snapshot
    applied as seq 1, each stream holds, at the snapshot's position, the very record it applied there, and no
    node that said its digest in the company's nodes bucket at those positions holds other content."""
    from ..log import LogFailed, Record, jetstream
    from ..log.jetstream_company import KvBoard

    try:
        pages, vectors = jetstream.open_logs(settings, name="crewlet snapshot check")
    except LogFailed as exc:
        raise CrewletError(f"{exc} — the snapshot cannot be checked against the streams; nothing was changed",
                           code="unreachable") from None
    try:
        for name, stream in (("pages", pages), ("vectors", vectors)):
            applied = positions[name]
            if name == "pages" and first_op is not None:
                first = stream.frame_at(0)
                if hasattr(first, "body") and Record.from_body(first.body, 1).op_id != first_op:
                    raise SnapshotRefused(f"{file} does not match {stream.stream}: another log — its first record is "
                                          "not the one the snapshot applied as seq 1; take a snapshot of a node of "
                                          "this company")
            if applied.nothing:
                continue
            if applied.end != applied.seq:
                raise SnapshotRefused(f"{file} holds a file log's position (seq {applied.seq:,} at byte offset "
                                      f"{applied.end:,}), not a stream's — take the snapshot on a node on JetStream")
            try:
                stream.locate(applied)
            except LogMismatch as exc:
                why = "a gap" if exc.kind == "cut" else "another log"
                raise SnapshotRefused(f"{file} does not match {stream.stream}: {why} — the snapshot applied it through "
                                      f"seq {applied.seq:,} ({exc.reason}); take a snapshot of a node of this company") from None
        _check_against_peers(file, home, _at(home, positions), content, KvBoard(pages.conn, settings.stream_prefix))
    finally:
        pages.close()
        vectors.close()


def _at(home: Home, positions: dict[str, Applied]) -> dict[str, int]:
    """A snapshot's positions as a published digest names them (position row -> seq)."""
    return {spec.position: positions[spec.name].seq for spec in home_logs(home) if spec.name in positions}


def _check_against_peers(file: Path, home: Home, at: dict[str, int], content: str, board: Any = None) -> None:
    """A node of the company that published its content digest at the very positions the snapshot stands for
    must hold the snapshot's content: otherwise the snapshot (or that node) is not what the log made. The peers
    are read from `board` (the nodes bucket on JetStream), else from the shared directory's nodes/."""
    if board is None and home.shared is None:
        return
    from ..log import peers as peers_mod

    for peer in peers_mod.read_peers(home, board):
        if peer.digest is None or peer.digest.get("positions") != at or peer.digest["content"] == content:
            continue
        where = ", ".join(f"{name} seq {seq:,}" for name, seq in sorted(at.items()))
        raise SnapshotRefused(f"{file} does not hold what the log made at its position ({where}): {peer.label()} "
                              f"applied the same records and holds content {peer.digest['content'][:12]}…, the "
                              f"snapshot {content[:12]}… — take a snapshot of a node that agrees")


def _where(positions: dict[str, Applied]) -> dict[str, tuple[int, int, str | None]]:
    return {name: (a.seq, a.end, a.digest) for name, a in positions.items()}


def _check_against_own(file: Path, home: Home, positions: dict[str, Applied], content: str) -> None:
    """This home's own database, when it stands at the snapshot's very positions, is one more digest the home
    knows there: a snapshot whose content differs is not what the log made (or this database is not), and it
    is not adopted over it unasked — a body edited and the stored digest recomputed passed every other check
    on a home with no peers."""
    db = home.db_file
    if not db.is_file() or db.resolve() == file:
        return
    try:
        conn = connect(db, readonly=True)
        try:
            if _where(_positions(conn, home)) != _where(positions):
                return
        finally:
            conn.close()
        own = content_digest(db)   # its own read transaction, the positions with the rows
    except (sqlite3.Error, OSError):
        return   # a database that cannot be read knows no digest (and is what an adoption replaces)
    if any(own.logs.get(row, (0, 0))[0] != seq for row, seq in _at(home, positions).items()) or own.content == content:
        return   # it moved on meanwhile (its digest is of another position), or it agrees
    where = ", ".join(f"{name} seq {a.seq:,}" for name, a in sorted(positions.items()))
    raise SnapshotRefused(f"{file} does not hold what the log made at its position ({where}): this node's database "
                          f"{db} applied the same records and holds content {own.content[:12]}…, the snapshot "
                          f"{content[:12]}… — take a snapshot of a node that agrees (if it is this database that "
                          "is wrong, move it aside first and adopt again)")


def _check_same_log(file: Path, path: Path, first_op: str | None) -> None:
    """The pages log's first record must be the one the snapshot applied as seq 1 (op_ids are unique):
    otherwise the snapshot is of another log, wherever the positions fall."""
    if first_op is None or not path.exists():
        return
    with FileLog(path, readonly=True) as flog:
        first = next((rec for rec, _ in flog.read(limit=1)), None)
    if first is not None and first.op_id != first_op:
        raise SnapshotRefused(f"{file} does not match {path}: another log — its first record is not the one the "
                              "snapshot applied as seq 1; take a snapshot of a node of this log")


def _check_position(file: Path, name: str, path: Path, applied: Applied) -> None:
    if applied.nothing:
        return
    if not path.exists():
        raise SnapshotRefused(f"{file} applied the {name} log through seq {applied.seq:,}, but {path} does not "
                              "exist: a gap — the snapshot is not of this log")
    with FileLog(path, readonly=True) as flog:
        try:
            flog.locate(applied)
        except LogMismatch as exc:
            if exc.kind == "cut":
                raise SnapshotRefused(
                    f"{file} does not match {path}: a gap — the snapshot applied the {name} log through seq "
                    f"{applied.seq:,} (byte offset {applied.end:,}), and the log no longer holds that record there "
                    f"({exc.reason}); take a snapshot of a node of this log") from None
            raise SnapshotRefused(
                f"{file} does not match {path}: another log — the record the snapshot applied as seq "
                f"{applied.seq:,} is not the one this log holds there; take a snapshot of a node of this log") from None


def install(home: Home, info: SnapshotInfo) -> Path | None:
    """Put a checked snapshot in place as the home's database; returns where the database it replaced
    was kept (None when the home had none). This node's own rows (diaries, the embedding duty's holds, cached
    answers: `carried_tables`) follow into the new file; the swap is written down before it starts, so a
    process killed in it leaves the next open to finish it (core/store/replace.py). The keyword index is
    derived from the rows: it is dropped and built again by the next pass."""
    home.root.mkdir(parents=True, exist_ok=True)
    db = home.db_file
    incoming = db.with_name(db.name + ".adopting")
    with replace_mod.held(db):
        replace_mod.finish_held(db)   # an earlier swap a killed process left: finished first, then ours
        for stale in (incoming, *(incoming.with_name(incoming.name + s) for s in ("-wal", "-shm", "-journal"))):
            stale.unlink(missing_ok=True)   # a killed adoption's half-made copy (no note names it)
        shutil.copyfile(info.path, incoming)
        conn = connect(incoming)  # runs any migration this build has and the snapshot's did not
        try:
            conn.execute("BEGIN IMMEDIATE")
            _strip_node_local(conn)
            conn.execute(f"DROP TABLE IF EXISTS {META}")   # what the snapshot said of itself: checked, not carried
            conn.execute("COMMIT")
            _single_file(conn)
        finally:
            conn.close()
        fsync_file(incoming)
        for derived in (home.index_dir, home.codes_dir):   # derived from the rows being replaced (their ids too)
            shutil.rmtree(derived, ignore_errors=True)
        aside = database_aside_path(home, "before-adopt")
        return replace_mod.replace(db, incoming, aside, carried_tables())


def carried_tables() -> list[str]:
    """The node-local tables whose rows follow this node's database when it is replaced: every one but those
    derived again from the rows the new file holds."""
    return list(CARRIED_LOCAL)
