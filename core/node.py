"""A node: this process's view of one home — its configuration, its SQLite file and its log.

Writers append records and wait until their own record is applied; the outcome they return is the
one the applier decided, never one guessed at write time.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from . import config as config_mod
from .errors import CrewletError
from .log import FileLog, Record
from .pages import applier
from .pages.applier import Outcome
from .search import vectors
from .paths import Home
from .store import Connection, connect

SYSTEM_ACTOR = "crewlet"
log = logging.getLogger("crewlet.node")


class Node:
    def __init__(self, home: Home, company: config_mod.Company, conn: Connection, flog: FileLog,
                 vlog: FileLog | None = None) -> None:
        self.home = home
        self.company = company
        self.conn = conn
        self.log = flog
        self.vlog = vlog if vlog is not None else FileLog(home.vectors_log_file)
        # one connection per node object; the Textual app's workers share it, so serialise use
        self.lock = threading.RLock()
        self._config_stamp = self._stamp()

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def open(cls, home: Home, *, sync_containers: bool = True) -> "Node":
        company = config_mod.load(home.config_file)
        conn = connect(home.db_file)
        flog = FileLog(home.log_file)
        node = cls(home, company, conn, flog)
        node.catch_up()
        if sync_containers:
            node.sync_containers()
        return node

    def close(self) -> None:
        with self.lock:
            self.conn.close()
            self.log.close()
            self.vlog.close()

    def __enter__(self) -> "Node":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def reload_config(self) -> None:
        self.company = config_mod.load(self.home.config_file)
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
            self.company = config_mod.load(self.home.config_file)
        except config_mod.ConfigError as exc:
            log.warning("company.toml changed but does not load; keeping the last good configuration: %s", exc)
        self._config_stamp = stamp

    # -- the write path --------------------------------------------------------------------
    def catch_up(self, progress: Callable[[int], None] | None = None) -> int:
        """Apply what is on the logs past this node's positions: the pages log, then the vector log."""
        with self.lock:
            applied = applier.catch_up(self.conn, self.log, progress=progress)
            return applied + vectors.catch_up(self.conn, self.vlog, progress=progress)

    def submit_vectors(self, records: Sequence[Record], *, sync: bool = True) -> int:
        """Append vector records to the vector log and apply it through them."""
        if not records:
            return 0
        with self.lock:
            self.vlog.append(records, sync=sync)
            return vectors.catch_up(self.conn, self.vlog)

    def vectors_seq(self) -> int:
        with self.lock:
            return vectors.position(self.conn)[0]

    def submit(self, records: Sequence[Record], *, sync: bool = True) -> list[Outcome]:
        """Append records, apply the log through them, and return each record's outcome."""
        if not records:
            return []
        with self.lock:
            appended = self.log.append(records, sync=sync)
            decided: dict[str, Outcome] = {}
            applier.catch_up(self.conn, self.log, outcomes=decided)
            outcomes = []
            for rec in appended:
                # another process may have applied our record first: then its outcome is in the table
                out = decided.get(rec.op_id) or applier.outcome_of(self.conn, rec.op_id)
                if out is None:  # pragma: no cover - would mean the applier skipped a record
                    raise CrewletError(f"record {rec.seq} ({rec.op_id}) was appended but not applied")
                outcomes.append(out)
            return outcomes

    def submit_one(self, record: Record) -> Outcome:
        return self.submit([record])[0]

    def applied_seq(self) -> int:
        with self.lock:
            return applier.position(self.conn)[0]

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
                records.append(Record.new("container.declare", SYSTEM_ACTOR, {
                    "key": key, "name": space.name, "purpose": space.purpose, "lead": space.lead, "chart_epoch": epoch,
                }))
        self.submit(records)
        return len(records)


def now_ms() -> int:
    return int(time.time() * 1000)


def init_home(home: Home, data: dict, *, force: bool = False) -> Path:
    """Create a home: company.toml, the SQLite file and the log file."""
    if home.config_file.exists() and not force:
        raise CrewletError(f"{home.config_file} already exists — this home is initialised; use it, or pick another --home",
                           code="exists")
    config_mod.parse(data, home.config_file)  # refuse a bad config before writing anything
    home.root.mkdir(parents=True, exist_ok=True)
    config_mod.write(home.config_file, data)
    conn = connect(home.db_file)
    conn.close()
    FileLog(home.log_file).close()
    FileLog(home.vectors_log_file).close()
    return home.root
