"""Checking a home's logs against its database, and repairing them (`crewlet log check|repair`).

A repair keeps each log's longest valid prefix and moves the damaged remainder into a file beside
the log (`pages.log.damaged-<when>-at<offset>`): no byte is deleted. Where the database applied
something the kept log does not hold, the database is rebuilt from the kept logs — the old file is
kept beside it (`crewlet.db.before-repair-<when>`) — after the caller has been told exactly which
applied changes that loses. The search index is derived from the rows, so it is dropped and built
again by the next pass.

Every log a home has is listed by `home_logs`, each with the position row the database keeps for
it, so another log (and its own applier) is checked and repaired the same way.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .log import FileLog
from .log.check import LogHealth, inspect
from .log.framing import Applied
from .node import Node, home_streams
from .pages import reads
from .paths import Home
from .replica import engine
from .replica.engine import Applier
from .store import Connection, connect, sqlite3
from .vectors import records as vectors


@dataclass(frozen=True)
class LogSpec:
    name: str        # how a person calls it: "pages"
    path: Path
    applier: Applier  # what its records registered with the engine

    @property
    def position(self) -> str:
        """The log_position row where the database keeps its place on this log."""
        return self.applier.position

    def apply(self, conn: Connection, flog: FileLog, progress: Callable[[int], None] | None) -> int:
        """Apply this log past the database's position (a rebuild replays every log)."""
        return engine.catch_up(conn, flog, self.applier, progress=progress)


def home_logs(home: Home) -> list[LogSpec]:
    return [LogSpec(name, path, applier) for name, path, applier in home_streams(home)]


@dataclass
class LostChange:
    """An applied change the kept log does not hold: rebuilding the database loses it."""

    seq: int
    op_id: str
    type: str
    status: str
    what: str        # the page it touched, as CONTAINER/Title, when known

    def line(self) -> str:
        what = f" {self.what}" if self.what else ""
        return f"seq {self.seq} {self.type}{what} ({self.status})"


@dataclass
class LogReport:
    spec: LogSpec
    health: LogHealth
    lost: list[LostChange] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.health.sound

    @property
    def needs_cut(self) -> bool:
        return self.health.damage is not None

    @property
    def needs_rebuild(self) -> bool:
        return self.health.applied_past_cut

    def to_json(self) -> dict[str, Any]:
        h = self.health
        out: dict[str, Any] = {
            "log": self.spec.name, "path": str(self.spec.path), "ok": self.ok, "bytes": h.size,
            "records": h.records, "last_seq": h.last_seq, "valid_prefix_end": h.end,
            "torn_tail_bytes": h.torn_tail,
            "applied": {"seq": h.applied.seq, "byte_offset": h.applied.end, "frame_offset": h.applied.start,
                        "digest": h.applied.digest},
            "damage": None, "database_disagrees": None, "remainder": None, "lost_if_repaired": [],
        }
        if h.damage is not None:
            out["damage"] = {"kind": h.damage.kind, "offset": h.damage.offset, "seq": h.damage.seq,
                             "reason": h.damage.reason, "message": str(h.damage)}
        if h.remainder is not None:
            r = h.remainder
            out["remainder"] = {"offset": r.offset, "bytes": r.size, "intact_records": r.intact,
                                "first_seq": r.first_seq, "last_seq": r.last_seq}
        if h.applied_problem is not None:
            out["database_disagrees"] = {"kind": h.applied_problem.kind, "message": str(h.applied_problem)}
        out["lost_if_repaired"] = [vars(c) for c in self.lost]
        return out


def check_home(home: Home, *, conn: Connection | None = None) -> list[LogReport]:
    """Read every frame of every log of the home and set each against the database's position
    (a home with no database yet has applied nothing: checking it creates none)."""
    own = conn is None
    if conn is None and home.db_file.exists():
        conn = connect(home.db_file)
    try:
        reports = []
        for spec in home_logs(home):
            applied = engine.applied_position(conn, spec.position) if conn is not None else Applied()
            if not spec.path.exists() and applied.seq == 0:
                continue  # a log this home never wrote (a home older than the vector log)
            with FileLog(spec.path, readonly=True) as flog:
                health = inspect(flog, applied, collect_op_ids=True)
            lost = _lost_changes(conn, health, spec) if conn is not None and health.applied_past_cut else []
            health.op_ids = set()  # only needed to work out the lost changes
            reports.append(LogReport(spec, health, lost))
        return reports
    finally:
        if own and conn is not None:
            conn.close()


def _lost_changes(conn: Connection, health: LogHealth, spec: LogSpec) -> list[LostChange]:
    """The changes the database applied whose records the kept prefix does not hold."""
    if spec.position == vectors.POSITION:  # vectors filed past the cut: the embedding duty embeds them again
        return [LostChange(r["seq"], "", "vector.put", "applied", _what(conn, json.dumps({"page_id": r["source_id"]}))
                           + " (embedded again by the embedding duty)")
                for r in conn.execute("SELECT seq, source_id FROM vectors WHERE seq > ? ORDER BY seq",
                                      (health.last_seq,))]
    lost = []
    for row in conn.execute("SELECT op_id, seq, type, status, result FROM applied_ops ORDER BY seq"):
        if row["op_id"] in health.op_ids:
            continue
        lost.append(LostChange(row["seq"], row["op_id"], row["type"], row["status"], _what(conn, row["result"])))
    return lost


def _what(conn: Connection, result: str | None) -> str:
    try:
        page_id = json.loads(result or "{}").get("page_id")
    except (ValueError, AttributeError):
        return ""
    if not page_id:
        return ""
    return reads.where_is(conn, page_id)


# -- repairing ----------------------------------------------------------------------------------------

def aside_stamp() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def _free_name(path: Path) -> Path:
    if not path.exists():
        return path
    for n in range(2, 10_000):
        candidate = path.with_name(f"{path.name}.{n}")
        if not candidate.exists():
            return candidate
    raise FileExistsError(f"{path}: too many files of that name already")


def aside_path(spec: LogSpec, report: LogReport) -> Path:
    return _free_name(spec.path.with_name(f"{spec.path.name}.damaged-{aside_stamp()}-at{report.health.end}"))


def database_aside_path(home: Home, label: str = "before-repair") -> Path:
    return _free_name(home.db_file.with_name(f"{home.db_file.name}.{label}-{aside_stamp()}"))


@dataclass
class RepairResult:
    moved: dict[str, tuple[str, int]] = field(default_factory=dict)   # log name -> (file, bytes moved)
    database_kept_as: str | None = None
    rebuilt: bool = False
    applied: int = 0                  # records replayed into the rebuilt database
    lost: list[LostChange] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"moved_aside": {k: {"file": f, "bytes": n} for k, (f, n) in self.moved.items()},
                "database_kept_as": self.database_kept_as, "rebuilt": self.rebuilt, "replayed": self.applied,
                "lost": [vars(c) for c in self.lost]}


def repair_home(home: Home, reports: list[LogReport], *,
                progress: Callable[[int], None] | None = None) -> RepairResult:
    """Carry out the repair the reports describe (the caller has asked, and been told what is lost).

    Each damaged log: its remainder is copied into a file beside it and synced, then the log is cut
    to its valid prefix (refused if the log changed since it was checked). Then, if the database
    applied anything the kept logs do not hold, it is moved aside and rebuilt from them."""
    result = RepairResult()
    for report in reports:
        if not report.needs_cut:
            continue
        dest = aside_path(report.spec, report)
        with FileLog(report.spec.path, readonly=True) as flog:
            moved = flog.move_aside(report.health.end, dest, expect_size=report.health.size)
        result.moved[report.spec.name] = (str(dest), moved)
    if any(r.needs_rebuild for r in reports):
        result.lost = [c for r in reports for c in r.lost]
        result.database_kept_as = str(move_database_aside(home, "before-repair"))
        conn = connect(home.db_file)
        try:
            for spec in home_logs(home):
                if spec.path.exists():
                    with FileLog(spec.path, readonly=True) as flog:
                        result.applied += spec.apply(conn, flog, progress)
        finally:
            conn.close()
        with Node.open(home, sync_containers=False) as node:   # checks the rebuilt position against the log
            if node.damage is not None:
                raise node.damage
        result.rebuilt = True
    return result


def move_database_aside(home: Home, label: str) -> Path:
    """Keep the home's database (with its -wal and -shm) beside it under a new name (`crewlet.db.LABEL-
    STAMP`, never over an older one), for a repair, a join or a snapshot adoption that starts it over;
    the keyword index goes too (derived from rows no longer there: the next pass builds it again).
    Returns where it was kept."""
    db = home.db_file
    dest = database_aside_path(home, label)
    if db.exists():
        try:  # fold the WAL into the file first, so the copy kept aside is whole on its own
            conn = connect(db, migrate_schema=False)
            try:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                conn.close()
        except sqlite3.Error:
            pass  # a database that cannot be opened is kept as it is, its -wal moved beside it
        os.replace(db, dest)
    for suffix in ("-wal", "-shm"):
        side = db.with_name(db.name + suffix)
        if side.exists():
            os.replace(side, dest.with_name(dest.name + suffix))
    shutil.rmtree(home.index_dir, ignore_errors=True)
    return dest


__all__ = ["LogSpec", "LogReport", "LostChange", "RepairResult", "Applied", "home_logs", "check_home", "repair_home"]
