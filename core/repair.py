"""Checking a home's logs against its database, and repairing them (`crewlet log check|repair`).

A damaged log costs what is damaged and nothing more. The check reads every frame with a reader that
resynchronises past damage (core/log/check.py `walk`): every intact record is kept where it is, and each
damaged place costs the records that stood there — none for a duplicated frame or a run of junk bytes, one
for a flipped bit. A repair writes the log anew, every seq in its order: the intact records as they were,
and at each lost seq a record given back by a database that applied it (core/recover.py: this node's, or a
peer's on this machine), proved by a replay that gives that database's rows exactly; where nothing can give
it back, a tombstone (`log.lost`) that every applier applies as "record N was lost". The damaged file is
kept whole beside the log (`pages.log.damaged-<when>-at<offset>`: no byte is deleted) and the repair is
noted in `repairs.jsonl` beside the logs, which every node reads at its next open: its position moves to
where its record now is, and a node that applied a record the repair could not give back is told so.

This node's database is kept when the repaired log holds everything it applied; otherwise (it applied a
record now lost, or another log than this one) it is rebuilt from the repaired log — the old file kept
beside it (`crewlet.db.before-repair-<when>`) — after the caller was told exactly which applied changes
that loses, and which other nodes hold records the repair loses.

Every log a home has is listed by `home_logs`, each with the position row the database keeps for it, so
another log (and its own applier) is checked and repaired the same way.
"""
from __future__ import annotations

import dataclasses
import errno
import itertools
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .clock import now_ms
from .durable import fsync_dir
from .errors import Refused
from .leftovers import sweep
from .log import FileLog, Record
from .log.check import Applied, LogHealth, Spot, inspect, walk
from .log.filelog import LogMismatch, _sync_fd
from .log.framing import Frame, encode_frame
from .node import Node, home_streams
from .pages import applier
from .paths import Home
from .recover import (LOST, Given, Related, describe_page_change, give_back_page, give_back_vector, guess_what,
                      kinds_of, tombstone)
from .repaired import LostChange, held_lost, journal_path, relocate, repairs_of, what_changed  # noqa: F401
from .replica import engine
from .replica.engine import Applier
from .store import Connection, connect, sqlite3
from .store.digest import CARRIED_LOCAL, REPLICATED, STALE_AFTER_REBUILD
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


# the replicated tables each log fills, as its kinds declare them (a replay is compared with a database on these)
TABLES = {log: tuple(t for t in REPLICATED if t in kinds_of(log).tables) for log in ("pages", "vectors")}


@dataclass
class Rewrite:
    """What a repair writes at one seq whose record the log lost."""

    seq: int
    how: str                 # recovered (rebuilt from a database's rows) | outcome (a refused/no-op record's outcome) |
    #                          found (its intact frame stood out of its place) | lost
    record: Record
    what: str = ""           # what the lost record did, by name, when any database knew
    source: str = ""         # the database that gave it back
    why: str = ""            # lost: why nothing could give it back
    candidates: list[Record] = field(default_factory=list)   # what the replay proof chooses `record` among
    note: str = ""           # what the rows no longer say, which the record given back stands in for

    @property
    def lost(self) -> bool:
        return self.how == "lost"

    def line(self) -> str:
        what = self.what or "a record no database knew"
        if self.lost:
            return f"seq {self.seq} ({what}): lost — {self.why}"
        if self.how == "found":
            return f"seq {self.seq} ({what}): {self.source}, put back in its place"
        return f"seq {self.seq} ({what}): given back by {self.source}" + (f" ({self.note})" if self.note else "")

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "how": self.how, "what": self.what, "source": self.source, "why": self.why,
                "note": self.note, "op_id": self.record.op_id}


@dataclass
class Source:
    """A database that may give back what a log lost: this node's, or a peer's on this machine."""

    label: str
    db: Path
    conn: Connection | None = None
    problem: str = ""                                   # why it cannot be read
    positions: dict[str, Applied] = field(default_factory=dict)
    this_node: bool = False


@dataclass
class LogReport:
    spec: LogSpec
    health: LogHealth
    lost: list[LostChange] = field(default_factory=list)      # what this node's database loses by the repair
    rewrites: dict[int, Rewrite] = field(default_factory=dict)
    others: list[str] = field(default_factory=list)          # other nodes that hold records the repair loses
    held: list[LostChange] = field(default_factory=list)     # this database holds records an earlier repair lost
    # what the tombstones cost this database beyond the lost records themselves: later changes it applied that
    # a replay of the repaired log refuses, and the pages whose rows it would no longer hold (with their
    # revisions and comments)
    cascade: list[LostChange] = field(default_factory=list)
    pages_lost: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.health.sound and not self.held

    @property
    def needs_cut(self) -> bool:
        """The log itself is damaged: a repair writes it anew."""
        return self.health.damage is not None

    @property
    def needs_rebuild(self) -> bool:
        """This node's database must start over from the log: it applied another log than this one, or it holds
        what an earlier repair lost (asked again, knowing the cost: the second repair)."""
        return self.health.applied_past_cut or bool(self.held)

    @property
    def keeps_lost(self) -> bool:
        """The repair writes the log anew but keeps this node's database, which holds changes the repaired log
        loses: nothing it holds is thrown away unasked (it reads as it is; a second repair rebuilds it)."""
        return bool(self.lost) and not self.needs_rebuild

    def spot_cost(self, spot: Spot) -> tuple[int, int]:
        """(records a repair loses here, records given back here)."""
        lost = sum(1 for seq in spot.seqs if self.rewrites.get(seq) is None or self.rewrites[seq].lost)
        return lost + spot.dropped, len(spot.seqs) - (lost)

    @property
    def records_lost(self) -> int:
        return sum(self.spot_cost(s)[0] for s in self.health.spots)

    def to_json(self) -> dict[str, Any]:
        h = self.health
        out: dict[str, Any] = {
            "log": self.spec.name, "path": str(self.spec.path), "ok": self.ok, "bytes": h.size,
            "records": h.records, "last_seq": h.last_seq, "valid_prefix_end": h.end,
            "torn_tail_bytes": h.torn_tail,
            "applied": {"seq": h.applied.seq, "byte_offset": h.applied.end, "frame_offset": h.applied.start,
                        "digest": h.applied.digest},
            "damage": None, "database_disagrees": None, "spots": [], "records_lost": self.records_lost,
            "lost_if_repaired": [], "other_nodes": self.others, "held_lost": [vars(c) for c in self.held],
            "refused_after": [vars(c) for c in self.cascade], "pages_lost": self.pages_lost,
            "keeps_database": self.keeps_lost,
        }
        if h.damage is not None:
            out["damage"] = {"kind": h.damage.kind, "offset": h.damage.offset, "seq": h.damage.seq,
                             "reason": h.damage.reason, "message": str(h.damage), "good_through": h.damage.good_through}
        for spot in h.spots:
            lost, given = self.spot_cost(spot)
            out["spots"].append(spot.to_json() | {
                "records_lost": lost, "records_given_back": given, "description": spot.describe(),
                "rewrites": [self.rewrites[s].to_json() for s in spot.seqs if s in self.rewrites]})
        if h.applied_problem is not None:
            out["database_disagrees"] = {"kind": h.applied_problem.kind, "message": str(h.applied_problem)}
        out["lost_if_repaired"] = [vars(c) for c in self.lost]
        return out


# -- the databases that can give back what a log lost ---------------------------------------------------

def _open_source(label: str, db: Path, home: Home, *, this_node: bool, conn: Connection | None = None) -> Source:
    src = Source(label, db, this_node=this_node)
    try:
        src.conn = conn if conn is not None else connect(db, readonly=True)
        src.positions = {spec.name: applier.applied_position(src.conn, spec.position) for spec in home_logs(home)}
    except (sqlite3.Error, OSError) as exc:
        src.problem = f"its database {db} cannot be read ({exc})"
        src.conn = None
    return src


def _sources(home: Home, conn: Connection | None) -> tuple[list[Source], list[Any]]:
    """This node's database first, then each peer's on this machine (a node of a shared directory says in
    `nodes/` where its home is); peers on other machines are returned apart (their databases cannot be read
    from here)."""
    out: list[Source] = []
    if conn is not None:
        out.append(_open_source("this node's database", home.db_file, home, this_node=True, conn=conn))
    elsewhere: list[Any] = []
    if home.shared is None:
        return out, elsewhere
    from .process import HOST
    from .log import peers as peers_mod

    me = _node_id(home)
    for peer in peers_mod.read_peers(home):
        if peer.node_id == me:
            continue
        if peer.host != HOST:
            elsewhere.append(peer)
            continue
        db = Home(Path(peer.home)).db_file
        if not db.exists():
            out.append(Source(peer.label(), db, problem=f"its database {db} is not there"))
            continue
        out.append(_open_source(peer.label(), db, home, this_node=False))
    return out, elsewhere


def _node_id(home: Home) -> str:
    from . import config as config_mod

    try:
        return config_mod.load_node(home.node_file).node_id
    except Exception:  # noqa: BLE001 - a node.toml that does not load names no node
        return ""


def _close_sources(sources: list[Source]) -> None:
    for src in sources:
        if src.conn is not None and not src.this_node:
            src.conn.close()


# -- checking -------------------------------------------------------------------------------------------

# a log being written anew by a repair (_rewrite_log): `.<log file>.repairing-<pid>` beside it
_REPAIRING = re.compile(r"\..+\.repairing-(?P<pid>\d+)")


def _sweep_repairing(home: Home) -> None:
    """The logs a killed repair left half-written (their process gone): the next check or repair removes them."""
    sweep(home.log_dir, _REPAIRING)


def check_home(home: Home, *, conn: Connection | None = None, verify: bool = True) -> list[LogReport]:
    """Read every frame of every log of the home, resynchronising past damage; set each against the
    database's position; and, for every record the log lost, find a database that gives it back (proved by
    a replay when `verify`). A home with no database yet has applied nothing: checking it creates none."""
    _sweep_repairing(home)
    own = conn is None
    if conn is None and home.db_file.exists():
        conn = connect(home.db_file, readonly=True)
    sources, elsewhere = _sources(home, conn)
    try:
        reports = []
        for spec in home_logs(home):
            applied = engine.applied_position(conn, spec.position) if conn is not None else Applied()
            others = max([p.seq(spec.position) for p in _peers(home)] + [0])
            if not spec.path.exists():
                if applied.seq == 0 and others == 0:
                    continue  # a log this home never wrote (a home older than the vector log)
                _lost_whole(spec)
            with FileLog(spec.path, readonly=True) as flog:
                health = inspect(flog, applied, collect_op_ids=True, others_applied=others)
                report = LogReport(spec, health)
                if health.spots:
                    report.rewrites = _plan(spec, flog, health, sources, elsewhere)
                    if verify:
                        _verify(spec, flog, health, report.rewrites, sources, scratch_in=home.root)
                    report.others = _others_losing(home, spec, report.rewrites, sources, elsewhere)
                if conn is not None:
                    report.lost = _lost_changes(conn, health, spec, report.rewrites)
                    if report.lost and verify and spec.name == "pages" and not health.applied_past_cut:
                        report.cascade, report.pages_lost = _cost_here(spec, flog, health, report.rewrites, conn,
                                                                       scratch_in=home.root)
            if conn is not None:
                report.held = held_lost(conn, spec.path)
            health.op_ids = set()  # only needed to work out the lost changes
            reports.append(report)
        return reports
    finally:
        _close_sources(sources)
        if own and conn is not None:
            conn.close()


def _lost_whole(spec: LogSpec) -> None:
    """A log file gone whole (deleted) that this node or a peer applied: every record it held is lost, and the
    databases that applied them give them back like any other damage. It is made again empty — as the next open
    of any command makes it — so the check reads it and the repair writes it anew under its writers' lock; never
    where its directory is gone too (a shared directory not mounted: that is said, not papered over)."""
    if not spec.path.parent.is_dir():
        raise FileNotFoundError(errno.ENOENT, f"the {spec.name} log's directory is gone", str(spec.path.parent))
    FileLog(spec.path).close()


def _peers(home: Home) -> list[Any]:
    if home.shared is None:
        return []
    from .log import peers as peers_mod

    me = _node_id(home)
    return [p for p in peers_mod.read_peers(home) if p.node_id != me]


def _give_back(spec: LogSpec, conn: Connection, seq: int, related: Related) -> Given:
    return give_back_page(conn, seq, related) if spec.name == "pages" else give_back_vector(conn, seq, related)


def _related(flog: FileLog, health: LogHealth, sources: list[Source], spec: LogSpec) -> Related:
    """The log's intact records about what the lost records touched (their pages, comments, spaces, agents, as
    the databases that applied them name them), and every purge — one walk of the log."""
    out = Related()
    kinds = kinds_of(spec.name)
    keys, every = kinds.related_keys, kinds.related_all
    if not keys and not every:
        return out
    wanted: set[str] = set()
    for src in sources:
        if src.conn is None:
            continue
        for seq in health.lost_seqs:
            row = src.conn.execute("SELECT result FROM applied_ops WHERE seq = ?", (seq,)).fetchone()
            try:
                result = json.loads(row["result"]) if row is not None and row["result"] else {}
            except ValueError:
                continue
            if isinstance(result, dict):
                wanted |= {str(result[k]) for k in keys if result.get(k)}
    for what, item in walk(flog, health.applied, others_applied=_others_seq(health)):
        if what != "keep":
            continue
        record = item[1]
        if record.type in every:
            out.every.setdefault(record.type, []).append(record)
        for key in keys:
            value = record.payload.get(key)
            if isinstance(value, str) and value in wanted:
                out.by_id.setdefault(value, []).append(record)
    return out


def _plan(spec: LogSpec, flog: FileLog, health: LogHealth, sources: list[Source], elsewhere: list[Any]
          ) -> dict[int, Rewrite]:
    """For each seq the log lost: a record given back by a database that applied it (its candidates, for the
    proof to choose among), else a tombstone that says why none could."""
    out: dict[int, Rewrite] = {}
    legible: dict[int, str] = {}
    for spot in health.spots:
        if len(spot.seqs) == 1 and spot.end > spot.offset:
            legible[spot.seqs[0]] = _legible(flog, spot, sources)
    related = _related(flog, health, sources, spec) if health.lost_seqs else Related()
    out_of_place = health.found
    for seq in health.lost_seqs:
        if seq in out_of_place:
            back = _found_out_of_place(spec, flog, seq, out_of_place[seq], sources)
            if back is not None:
                out[seq] = back
                continue
        reasons: list[str] = []
        what = ""
        found: Rewrite | None = None
        # every database that applied it offers what its rows allow, the one nearest the record first (its rows
        # are the record's own longest: a later move it has not applied yet left the page where it was created)
        applied_it = []
        for src in sources:
            if src.conn is None:
                reasons.append(f"{src.label}: {src.problem}")
                continue
            if src.this_node and health.applied_past_cut:
                reasons.append(f"{src.label} applied another log than this one")
                continue
            at = src.positions.get(spec.name, Applied())
            if at.seq < seq:
                reasons.append(f"{src.label} applied the log only through seq {at.seq:,}")
                continue
            applied_it.append((at.seq, not src.this_node, src))
        for _at, _peer, src in sorted(applied_it, key=lambda t: (t[0], t[1])):
            given = _give_back(spec, src.conn, seq, related)
            what = what or given.what
            if not given.records:
                reasons.append(f"{src.label} applied it, but {given.why}")
                continue
            candidates = [r.at_seq(seq) for r in given.records]
            if found is None:
                found = Rewrite(seq, given.how, candidates[0], given.what, src.label, candidates=candidates,
                                note=given.note)
            elif found.how == "recovered" and given.how == "recovered":
                seen = {r.body() for r in found.candidates}
                found.candidates += [r for r in candidates if r.body() not in seen]
        if found is not None:
            out[seq] = found
        else:
            for peer in elsewhere:
                if peer.seq(spec.position) >= seq:
                    reasons.append(f"{peer.label()} applied it, but its database is on another machine — run "
                                   "`crewlet log repair` there to give it back")
            if not reasons:
                reasons.append("no database of this home applied it")
            what = what or legible.get(seq, "")
            why = "; ".join(reasons)
            out[seq] = Rewrite(seq, "lost", tombstone(seq, spec.name, why, was=what).at_seq(seq), what, why=why)
    return out


def _found_out_of_place(spec: LogSpec, flog: FileLog, seq: int, offset: int, sources: list[Source]) -> Rewrite | None:
    """The record of `seq`, from its intact frame further on in the log (two frames swapped): the very record,
    put back in its place — unless a database that applied `seq` applied another record there."""
    frame = flog.frame_at(offset)
    if not isinstance(frame, Frame) or frame.seq != seq:
        return None
    try:
        record = Record.from_body(frame.body, seq)
    except ValueError:
        return None
    conn = None
    for src in sources:
        if src.conn is None or src.positions.get(spec.name, Applied()).seq < seq:
            continue
        conn = conn or src.conn
        if spec.name == "pages":
            row = src.conn.execute("SELECT op_id FROM applied_ops WHERE seq = ?", (seq,)).fetchone()
            if row is not None and row["op_id"] != record.op_id:
                return None    # not the record that stood there: a stranger claiming its seq
    what = guess_what(frame.body, conn or next((s.conn for s in sources if s.conn is not None), None))
    what = what.removesuffix(" (read from the damaged bytes)")   # these bytes are intact
    return Rewrite(seq, "found", record, what, f"its intact frame, out of its place at byte offset {offset:,}")


def _legible(flog: FileLog, spot: Spot, sources: list[Source]) -> str:
    """What the damaged bytes of one record still say of it (the page and the kind of change)."""
    data = flog.read_bytes(spot.offset, min(spot.end - spot.offset, 1 << 20))
    conn = next((s.conn for s in sources if s.conn is not None), None)
    return guess_what(data, conn)


def write_repaired(flog: FileLog, health: LogHealth, rewrites: dict[int, Rewrite], dest: Path, *,
                   through: int | None = None) -> int:
    """Write the repaired log into `dest` (a new file, synced): every intact record as it is, every lost seq
    given back or tombstoned, duplicates and junk left out. `through`: stop after that seq (a replay's
    prefix). Returns the bytes written."""
    written = 0
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        run: list[bytes] = []
        run_bytes = 0

        def put(data: bytes) -> None:
            nonlocal run_bytes, written
            run.append(data)
            run_bytes += len(data)
            if run_bytes >= 1 << 20:
                flush()

        def flush() -> None:
            nonlocal run_bytes, written
            view = memoryview(b"".join(run))
            while view:
                n = os.write(fd, view)
                view = view[n:]
                written += n
            run.clear()
            run_bytes = 0

        done = False
        for what, item in walk(flog, health.applied, others_applied=_others_seq(health)):
            if what == "keep":
                frame = item[0]
                if through is not None and frame.seq > through:
                    break
                put(encode_frame(frame.seq, frame.body))
            elif what == "spot":
                for seq in item.seqs:
                    if through is not None and seq > through:
                        done = True
                        break
                    put(encode_frame(seq, rewrites[seq].record.body()))
                if done:
                    break
        flush()
        _sync_fd(fd)
    finally:
        os.close(fd)
    return written


def _others_seq(health: LogHealth) -> int:
    """The furthest seq a cut at the end reaches (what `inspect` was told other nodes applied)."""
    cut = [s for s in health.spots if s.kind == "cut" and s.seqs]
    return cut[-1].seqs[-1] if cut else 0


def _table_digests(conn: Connection, tables: tuple[str, ...]) -> dict[str, str]:
    from .store.digest import _digest_rows

    return {t: _digest_rows(conn, REPLICATED[t])[0] for t in tables}


# replays a repair may run to choose among the candidates of what it gives back (each replays the log from the
# first lost record to each witness's position): one candidate per lost record is the common case
MAX_PROOFS = 24


@contextmanager
def _quiet_applier() -> Iterator[None]:
    """A proving replay applies candidates that may be wrong (a parent that did not exist yet): the applier's
    warnings about them are the proof's business, never the person's terminal."""
    me = threading.get_ident()

    def drop(record: logging.LogRecord) -> bool:
        return record.thread != me

    logger = logging.getLogger("crewlet.applier")
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


class _Prover:
    """Replays the repaired log — as the rewrites now choose — up to each witness's position and says where it
    differs from that witness's rows. A witness is a database that applied the lost records (the one that gave
    them back, and every other readable one that went as far): a record it gave back is kept only when the
    replay gives every witness exactly its rows. The log before the first lost record is the same in every
    trial: it is replayed once, and each trial starts from a copy."""

    def __init__(self, spec: LogSpec, flog: FileLog, health: LogHealth, rewrites: dict[int, Rewrite],
                 witnesses: list[Source], scratch: Path, first: int) -> None:
        self.spec, self.flog, self.health, self.scratch = spec, flog, health, Path(scratch)
        self.witnesses = sorted(witnesses, key=lambda w: w.positions[spec.name].seq)
        self.tables = TABLES[spec.name]
        self.theirs = {w.label: _table_digests(w.conn, self.tables) for w in self.witnesses}
        self.trials = 0
        prefix = self.scratch / "base.log"
        write_repaired(flog, health, rewrites, prefix, through=first - 1)
        self.base = connect(self.scratch / "base.db")
        with FileLog(prefix, readonly=True) as plog:
            spec.apply(self.base, plog, None)

    def differs(self, rewrites: dict[int, Rewrite], *, keep: Path | None = None) -> dict[str, str]:
        """Witness label -> what differs ("" for none); a replay that cannot run (a full disk) differs."""
        self.trials += 1
        n = self.trials
        path = keep or self.scratch / f"trial-{n}.db"
        trial = connect(path)
        out: dict[str, str] = {}
        try:
            self.base.backup(trial)
            for w in self.witnesses:
                at = w.positions[self.spec.name].seq
                prefix = self.scratch / f"trial-{n}-{at}.log"
                write_repaired(self.flog, self.health, rewrites, prefix, through=at)
                with FileLog(prefix, readonly=True) as plog:
                    self.spec.apply(trial, plog, None)
                prefix.unlink(missing_ok=True)
                mine = _table_digests(trial, self.tables)
                differ = [t for t in self.tables if mine[t] != self.theirs[w.label][t]]
                out[w.label] = ", ".join(differ)
        except (OSError, sqlite3.Error) as exc:
            return {w.label: f"the replay that proves it could not run ({exc})" for w in self.witnesses}
        finally:
            trial.close()
            if keep is None:
                for side in ("", "-wal", "-shm"):
                    Path(f"{path}{side}").unlink(missing_ok=True)
        return out

    def close(self) -> None:
        self.base.close()


def _assignments(options: dict[int, int], budget: int) -> Iterator[dict[int, int]]:
    """Which candidate each lost record tries ({seq: index}; a seq left out takes its first): every one its
    first, then one record at a time off its first, then two …, at most `budget` in all."""
    seqs = sorted(s for s, n in options.items() if n > 1)
    yield {}
    count = 1
    for k in range(1, len(seqs) + 1):
        for combo in itertools.combinations(seqs, k):
            for idxs in itertools.product(*(range(1, options[s]) for s in combo)):
                if count >= budget:
                    return
                count += 1
                yield dict(zip(combo, idxs))


def _witnesses(spec: LogSpec, health: LogHealth, sources: list[Source], first: int) -> list[Source]:
    return [s for s in sources if s.conn is not None and not (s.this_node and health.applied_past_cut)
            and s.positions.get(spec.name, Applied()).seq >= first]


def _verify(spec: LogSpec, flog: FileLog, health: LogHealth, rewrites: dict[int, Rewrite],
            sources: list[Source], *, scratch_in: Path) -> None:
    """Choose, among the candidates of each record given back, those a replay proves: the repaired log replayed
    up to each witness database's position gives its rows exactly. A record is rebuilt as of its seq, and the
    rows now do not always say what it was (a page moved since: where was it created?): the candidates are what
    they allow, the most likely first. When no choice proves, every rebuilt record becomes a tombstone that
    says so (a record given back as its outcome is exact, and stays)."""
    given = {seq: rw for seq, rw in rewrites.items() if not rw.lost}
    if not given:
        return
    first = min(given)
    witnesses = _witnesses(spec, health, sources, first)
    if not witnesses:
        return
    # the replays are this node's own work: in its home (never the shared directory), removed after
    with tempfile.TemporaryDirectory(prefix=".crewlet-repair-", dir=scratch_in if scratch_in.is_dir() else None) as scratch, \
            _quiet_applier():
        try:
            prover = _Prover(spec, flog, health, rewrites, witnesses, Path(scratch), first)
        except (OSError, sqlite3.Error) as exc:   # a full disk: nothing is given back unproved
            differ = {w.label: f"the replay that proves it could not run ({exc})" for w in witnesses}
        else:
            try:
                options = {seq: len(rw.candidates or [rw.record]) for seq, rw in given.items()}
                differ = {}
                for choice in _assignments(options, MAX_PROOFS):
                    for seq, rw in given.items():
                        rewrites[seq] = dataclasses.replace(rw, record=(rw.candidates or [rw.record])[choice.get(seq, 0)])
                    differ = {label: d for label, d in prover.differs(rewrites).items() if d}
                    if not differ:
                        return
            finally:
                prover.close()
    label, what = next(iter(differ.items()))
    why = (f"rebuilt from the rows of {given[min(given)].source}, but " + (
        what if what.startswith("the replay") else
        f"no record its rows allow gives, replayed, the rows of {label} (they differ in {what})"))
    for seq, rw in given.items():
        if rw.how in ("outcome", "found"):   # exact: the outcome it was given, the very record out of place
            rewrites[seq] = rw
            continue
        rewrites[seq] = Rewrite(seq, "lost", tombstone(seq, spec.name, why, was=rw.what).at_seq(seq), rw.what, why=why)


def _cost_here(spec: LogSpec, flog: FileLog, health: LogHealth, rewrites: dict[int, Rewrite], conn: Connection, *,
               scratch_in: Path) -> tuple[list[LostChange], list[str]]:
    """What the tombstones cost this node's database beyond the lost records themselves: a replay of the
    repaired log up to its position, set against its rows — the later changes it applied that the replay
    refuses (a save of a page whose create is lost), and the pages it holds that the replay does not (with
    their revisions and comments) or holds otherwise."""
    lost = sorted(seq for seq, rw in rewrites.items() if rw.lost)
    me = Source("this node's database", Path(), conn=conn, this_node=True,
                positions={spec.name: engine.applied_position(conn, spec.position)})
    if not lost or me.positions[spec.name].seq < lost[0]:
        return [], []
    with tempfile.TemporaryDirectory(prefix=".crewlet-repair-", dir=scratch_in if scratch_in.is_dir() else None) as scratch, \
            _quiet_applier():
        kept = Path(scratch) / "cost.db"
        try:
            prover = _Prover(spec, flog, health, rewrites, [me], Path(scratch), lost[0])
            try:
                prover.differs(rewrites, keep=kept)
            finally:
                prover.close()
            replay = connect(kept, readonly=True)
        except (OSError, sqlite3.Error) as exc:
            return [LostChange(0, "", "", "", f"what else it costs could not be worked out ({exc})")], []
        try:
            theirs = {r["seq"]: r for r in replay.execute("SELECT seq, status, code FROM applied_ops WHERE seq > ?",
                                                             (lost[0],))}
            cascade = []
            for r in conn.execute("SELECT op_id, seq, type, status, code, result FROM applied_ops WHERE seq > ? "
                                  "ORDER BY seq", (lost[0],)):
                t = theirs.get(r["seq"])
                if r["seq"] in rewrites or (t is not None and (t["status"], t["code"]) == (r["status"], r["code"])):
                    continue
                now = f"{t['status']}" + (f": {t['code']}" if t["code"] else "") if t is not None else "not applied"
                cascade.append(LostChange(r["seq"], r["op_id"], r["type"], f"{r['status']} here, {now} after",
                                          what_changed(conn, r["result"])))
            pages = []
            replayed = {r[0]: tuple(r) for r in replay.execute(REPLICATED["pages"])}
            for r in conn.execute(REPLICATED["pages"]):
                if replayed.get(r[0]) == tuple(r):
                    continue
                revisions = conn.execute("SELECT count(*) FROM revisions WHERE page_id = ?", (r[0],)).fetchone()[0]
                comments = conn.execute("SELECT count(*) FROM comments WHERE page_id = ?", (r[0],)).fetchone()[0]
                name = f"{r['container']}/{r['title']}"
                if r[0] in replayed:
                    pages.append(f"{name}: it would no longer read as it does here")
                else:
                    pages.append(f"{name}: the page, its {revisions} revision{'s' if revisions != 1 else ''} and "
                                 f"{comments} comment{'s' if comments != 1 else ''}")
            return cascade, pages
        finally:
            replay.close()


def _others_losing(home: Home, spec: LogSpec, rewrites: dict[int, Rewrite], sources: list[Source],
                   elsewhere: list[Any]) -> list[str]:
    """Other nodes that applied a record the repair loses: after it they hold a change no log has."""
    lost = sorted(seq for seq, rw in rewrites.items() if rw.lost)
    if not lost:
        return []
    out = []
    for peer in _peers(home):
        through = peer.seq(spec.position)
        theirs = [seq for seq in lost if seq <= through]
        if theirs:
            names = ", ".join(f"seq {seq} ({rewrites[seq].what or 'unknown'})" for seq in theirs[:5])
            more = f" and {len(theirs) - 5} more" if len(theirs) > 5 else ""
            out.append(f"{peer.label()} applied the {spec.name} log through seq {through:,}: it holds {names}{more}, "
                       "which the repaired log will not — at its next open it is told so, and a `crewlet log repair` "
                       "there rebuilds its database without them")
    return out


def _lost_changes(conn: Connection, health: LogHealth, spec: LogSpec, rewrites: dict[int, Rewrite]) -> list[LostChange]:
    """The changes this database applied that the repaired log will not hold."""
    lost_seqs = {seq for seq, rw in rewrites.items() if rw.lost}
    if spec.position == vectors.POSITION:  # vectors: the embedding duty embeds them again
        if health.applied_past_cut:
            rows = conn.execute("SELECT seq, source_id FROM vectors WHERE seq > ? ORDER BY seq", (health.prefix_records,))
        else:
            rows = [r for seq in sorted(lost_seqs)
                    for r in conn.execute("SELECT seq, source_id FROM vectors WHERE seq = ?", (seq,))]
        return [LostChange(r["seq"], "", "vector.put", "applied",
                           describe_page_change(conn, "", json.dumps({"page_id": r["source_id"]})).strip()
                           + " (embedded again by the embedding duty)") for r in rows]
    if health.applied_past_cut:
        # the database applied another log than this one: every change the log does not hold is lost
        return [LostChange(r["seq"], r["op_id"], r["type"], r["status"], what_changed(conn, r["result"]))
                for r in conn.execute("SELECT op_id, seq, type, status, result FROM applied_ops ORDER BY seq")
                if r["op_id"] not in health.op_ids and r["seq"] not in rewrites]
    out = []
    for seq in sorted(lost_seqs):
        row = conn.execute("SELECT op_id, seq, type, status, result FROM applied_ops WHERE seq = ?", (seq,)).fetchone()
        if row is not None and row["type"] != LOST:
            out.append(LostChange(row["seq"], row["op_id"], row["type"], row["status"], what_changed(conn, row["result"])))
    return out


# -- what earlier repairs did, as every node reads it at its next open --------------------------------------

def _note_repair(log: Path, entry: dict[str, Any]) -> None:
    path = journal_path(log)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        os.write(fd, (json.dumps(entry, sort_keys=True) + "\n").encode("utf-8"))
        _sync_fd(fd)
    finally:
        os.close(fd)


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
    moved: dict[str, tuple[str, int]] = field(default_factory=dict)   # log name -> (the damaged file kept, its bytes)
    database_kept_as: str | None = None
    rebuilt: bool = False
    applied: int = 0                  # records replayed into the rebuilt database
    lost: list[LostChange] = field(default_factory=list)
    rewrites: list[Rewrite] = field(default_factory=list)
    records_lost: int = 0             # records the logs no longer hold (tombstones, and repeats taken out)
    # changes this node's database applied that the repaired log lost: the database is kept as it is, holding
    # them (reads work; writes wait for a second, asked repair that rebuilds it), with what else they cost
    kept: list[LostChange] = field(default_factory=list)
    refused_after: list[LostChange] = field(default_factory=list)
    pages_lost: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"moved_aside": {k: {"file": f, "bytes": n} for k, (f, n) in self.moved.items()},
                "database_kept_as": self.database_kept_as, "rebuilt": self.rebuilt, "replayed": self.applied,
                "lost": [vars(c) for c in self.lost], "rewritten": [r.to_json() for r in self.rewrites],
                "records_lost": self.records_lost, "database_holds_lost": [vars(c) for c in self.kept],
                "refused_after": [vars(c) for c in self.refused_after], "pages_lost": self.pages_lost}


def _rewrite_log(home: Home, report: LogReport) -> tuple[Path, int]:
    """Write the log anew under its writers' lock (refused if it changed since it was checked), keep the damaged
    file whole beside it, and note the repair beside the logs. Returns (the file kept aside, its bytes)."""
    spec, health = report.spec, report.health
    aside = aside_path(spec, report)
    fresh = spec.path.with_name(f".{spec.path.name}.repairing-{os.getpid()}")
    fresh.unlink(missing_ok=True)
    with FileLog(spec.path, readonly=True) as flog, flog.locked() as fd:
        size = os.fstat(fd).st_size
        if size != health.size:
            raise LogMismatch(spec.path, health.end, None,
                              f"the log changed while the repair was being decided ({health.size:,} bytes, now "
                              f"{size:,}): nothing was changed — run the repair again", kind="changed")
        try:
            write_repaired(flog, health, report.rewrites, fresh)
            try:
                os.link(spec.path, aside)       # the damaged file, whole, under its new name
            except OSError:
                shutil.copyfile(spec.path, aside)
                with open(aside, "rb+") as fh:
                    os.fsync(fh.fileno())
            os.replace(fresh, spec.path)        # every reader sees the old log or the new, never half of one
        finally:
            fresh.unlink(missing_ok=True)
        fsync_dir(spec.path.parent)
    _note_repair(spec.path, {
        "id": uuid.uuid4().hex, "at": now_ms(), "file": spec.path.name, "log": spec.name,
        "by": {"node": _node_id(home), "home": str(home.root)}, "aside": aside.name,
        "spots": [s.to_json() for s in health.spots],
        "written": [{"seq": rw.seq, "how": rw.how, "op_id": rw.record.op_id, "what": rw.what, "source": rw.source,
                     "why": rw.why} for rw in sorted(report.rewrites.values(), key=lambda r: r.seq)]})
    return aside, size


def repair_home(home: Home, reports: list[LogReport], *,
                progress: Callable[[int], None] | None = None) -> RepairResult:
    """Carry out the repair the reports describe (the caller has asked, and been told what is lost).

    Each damaged log is written anew (every intact record kept; every lost seq given back or tombstoned), the
    damaged file kept whole beside it. This node's database is kept — its position moves to where its record
    now is. When it applied a record the repaired log lost, it is kept too, holding that change and what the
    tombstone costs after it (named in the report): nothing it holds is thrown away by this repair; it reads as
    it is, refuses writes, and a second repair — asked again, knowing the cost — rebuilds it. Only a database
    that applied another log than this one, or that was kept so by an earlier repair, is moved aside and
    rebuilt here."""
    result = RepairResult()
    if any(r.needs_rebuild for r in reports):
        _refuse_while_open(home)
    for report in reports:
        if not report.needs_cut:
            continue
        aside, size = _rewrite_log(home, report)
        result.moved[report.spec.name] = (str(aside), size)
        result.rewrites += sorted(report.rewrites.values(), key=lambda r: r.seq)
        result.records_lost += report.records_lost
        if report.keeps_lost:
            result.kept += report.lost
            result.refused_after += report.cascade
            result.pages_lost += report.pages_lost
    if any(r.needs_rebuild for r in reports):
        result.lost = [c for r in reports for c in r.lost + r.held]
        kept = _rebuild(home, result, progress)
        result.database_kept_as = str(kept) if kept is not None else None
        result.rebuilt = True
    if home.db_file.exists():
        # opening moves the position to the repaired log, and checks it once more
        with Node.open(home, sync_containers=False) as node:
            if node.damage is not None and not (result.kept and node.damage.kind == "diverged"):
                raise node.damage
    return result


# this node's own rows a rebuilt database takes over from the one it replaces — its agents' diaries (on no log), the
# embedding duty's holds (a provider's refusal of a page's revision holds whatever the rebuild lost) —: every
# node-local table an adoption carries but those that hold only for the content the rebuild changes
REBUILD_CARRIES = tuple(t for t in CARRIED_LOCAL if t not in STALE_AFTER_REBUILD)


def _refuse_while_open(home: Home) -> None:
    """A rebuild swaps the database file: a process that has it open (the app, `crewlet worker`, `crewlet mcp`, a
    script) would go on with the old file, kept aside, and lose every write it made there. Refused, naming it,
    before anything is changed."""
    from .leases import running
    from .store.holders import other_holder

    who = running(home.node_lease_dir) or other_holder(home.db_file)
    if who is not None:
        raise Refused(f"{who} has {home.root} open — a repair that rebuilds the database replaces the file under it: "
                      "stop it (quit the app, stop `crewlet worker` or `crewlet mcp`) and repair again; nothing was "
                      "changed", code="busy")


def _rebuild(home: Home, result: RepairResult, progress: Callable[[int], None] | None) -> Path | None:
    """The database replayed from the repaired logs into a file beside it, then swapped in for the old one (kept
    aside) with this node's own rows carried over (`REBUILD_CARRIES`) — a swap written down first, so a kill
    anywhere in it is finished by the next open (core/store/replace.py) rather than leaving a database without its
    diaries."""
    from .store import replace as replace_db


    def replay(conn: Connection) -> None:
        for spec in home_logs(home):
            if spec.path.exists():
                with FileLog(spec.path, readonly=True) as flog:
                    result.applied += spec.apply(conn, flog, progress)

    return replace_db.rebuild(home.db_file, ".rebuilding", replay, database_aside_path(home, "before-repair"),
                              REBUILD_CARRIES, (home.index_dir, home.codes_dir))


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


__all__ = ["LogSpec", "LogReport", "LostChange", "Rewrite", "RepairResult", "Applied", "home_logs", "check_home",
           "repair_home", "relocate", "held_lost", "repairs_of"]
