"""The one duty runner: every background duty of a node, run by one loop.

A **duty** is a piece of background work derived from the applied rows: applying what other writers
appended to the log, the keyword index, the trash reaper, and (as they arrive) the embedding duty, the
semantic index's training and the sync applier. Each has a name, a cursor kept in SQLite (the `duties`
table, so any process can say how far a duty is), a `run_pass(ctx)` that does at most a budget of work
and reports progress, and a status.

`crewlet worker` (`--once`: until every duty has nothing left to do) and the app's background worker
both drive a `DutyRunner`; nothing else loops over duties.

One **lease** per duty decides who runs it. A node duty's lease lives with the home (the app and a CLI
worker open on the same home must not both run the indexer); a fleet duty's lives with the log (every
node that shares the log shares it: one embedding duty for the company). A lease is a small file
holding its owner and an expiry, rewritten under an flock; the holder renews it at every pass, and a
lease whose holder stopped renewing is taken over once it has expired — and at once when its holder is on this
machine and no longer runs (killed: the lease records the holder's pid and process start time, so a pid the
kernel gave to another program does not pass for it).
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..clock import now_ms
from ..errors import CrewletError
from ..leases import DEFAULT_LEASE_S, Lease, LeaseHolder, new_owner  # noqa: F401 - the runner's leases
from ..log import FileLog

if TYPE_CHECKING:
    from ..node import Node

log = logging.getLogger("crewlet.worker")

Scope = Literal["node", "fleet"]
# (duty name, done, total, label): a duty's progress through its current pass
ProgressFn = Callable[[str, int, int, str], None]

SETTLE_TICKS = 8          # run_until_idle: whole ticks at most, each after one in which a duty worked


# -- what a pass says --------------------------------------------------------------------------------

@dataclass
class DutyPass:
    """What one pass of a duty did."""

    summary: str = ""                         # one line for a person ("caught up: 12 indexed")
    more: bool = False                        # stopped at its budget with work left: run again at once
    worked: bool = False                      # changed anything (a line worth printing in the loop)
    cursor: str | None = None                 # where the duty is, kept in SQLite between passes
    counts: dict[str, int] = field(default_factory=dict)
    status: dict[str, Any] = field(default_factory=dict)   # the duty's state after the pass, for screens


@dataclass
class DutyReport:
    """One pass as the runner saw it: the duty's answer, or why it did not run."""

    duty: str
    ran: bool
    result: DutyPass | None = None
    skipped: str = ""                         # why it did not run (the lease is held elsewhere)
    error: str = ""                           # the pass failed; tried again at the next tick
    seconds: float = 0.0

    @property
    def more(self) -> bool:
        return bool(self.result and self.result.more)

    def line(self) -> str:
        if self.error:
            return f"{self.duty}: failed — {self.error}"
        if not self.ran:
            return f"{self.duty}: not run — {self.skipped}"
        assert self.result is not None
        return f"{self.duty}: {self.result.summary or 'nothing to do'}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"duty": self.duty, "ran": self.ran, "seconds": round(self.seconds, 3)}
        if self.skipped:
            out["skipped"] = self.skipped
        if self.error:
            out["error"] = self.error
        if self.result is not None:
            out |= {"summary": self.result.summary, "more": self.result.more, "cursor": self.result.cursor,
                    "counts": self.result.counts, "status": self.result.status}
        return out


# -- a pass's context ----------------------------------------------------------------------------------

class LeaseLost(Exception):
    """The duty's lease passed to another holder mid-pass: stop publishing at once."""


@dataclass
class PassContext:
    """What a duty is given for one pass."""

    cursor: str | None                        # the cursor its last pass left in SQLite
    stop: threading.Event                     # set when the runner is asked to stop: finish promptly
    deadline: float | None = None             # time.monotonic() by which the pass should hand back
    _progress: ProgressFn | None = None
    _renew: Callable[[], bool] | None = None
    duty: str = ""
    _status: Callable[[dict[str, Any]], None] | None = None

    def progress(self, done: int, total: int, label: str = "") -> None:
        if self._progress is not None:
            self._progress(self.duty, done, total, label)

    def note_status(self, status: dict[str, Any]) -> None:
        """Merge `status` into the duty's status row now, mid-pass (a long pass says where it is to any
        process that reads the row: `crewlet index status` while the index trains); the pass's own
        status, when it ends, is written over it as usual."""
        if self._status is not None:
            self._status(status)

    def renew(self) -> None:
        """Long passes call this as they make progress; raises LeaseLost when another holder took over."""
        if self._renew is not None and not self._renew():
            raise LeaseLost(f"the {self.duty} lease passed to another holder")

    def out_of_time(self) -> bool:
        return self.stop.is_set() or (self.deadline is not None and time.monotonic() >= self.deadline)


class Duty(ABC):
    """A background duty. Subclasses set `name`, `scope` and `interval_s`."""

    name: str = "duty"
    scope: Scope = "node"
    interval_s: float = 60.0                  # how often a pass runs while the duty has nothing to do

    @abstractmethod
    def run_pass(self, ctx: PassContext) -> DutyPass:
        """Do at most one budget of work. Raise to fail the pass (the runner logs it and retries later)."""

    def close(self) -> None:  # noqa: B027  a hook, not a duty's obligation: a duty that holds nothing has none
        """Release what the duty holds (connections, models)."""


# -- the runner ----------------------------------------------------------------------------------------

@dataclass
class DutyRecord:
    """A duty's row in the `duties` table: what its last pass left, readable from any process."""

    name: str
    cursor: str | None
    last_run_at: int | None
    last_summary: str
    last_error: str
    holder: str
    status: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def duty_records(node: Node) -> dict[str, DutyRecord]:
    """Every duty's row (under the node's lock): what its last pass left, and who ran it."""
    with node.lock:
        return read_duty_records(node.conn)


def read_duty_records(conn: Any) -> dict[str, DutyRecord]:
    rows = conn.execute("SELECT name, cursor, last_run_at, last_summary, last_error, holder, status FROM duties")
    out = {}
    for r in rows:
        try:
            status = json.loads(r["status"]) if r["status"] else {}
        except ValueError:
            status = {}
        out[r["name"]] = DutyRecord(r["name"], r["cursor"], r["last_run_at"], r["last_summary"] or "",
                                    r["last_error"] or "", r["holder"] or "", status)
    return out


class DutyRunner:
    """Runs a node's duties: each due duty whose lease this runner holds gets one pass per tick.

    `node` gives the SQLite connection (under `node.lock`) for the duties table and the home for the
    lease directories. The runner is used from one thread at a time.
    """

    def __init__(self, node: Node, duties: Sequence[Duty], *, label: str = "worker",
                 lease_s: float = DEFAULT_LEASE_S) -> None:
        self.node = node
        self.duties = list(duties)
        self.owner = new_owner(label)
        self.label = f"{label} (pid {os.getpid()})"
        self.leases = {d.name: self._lease(d.scope, d.name, max(lease_s, 3 * d.interval_s)) for d in self.duties}
        self._next: dict[str, float] = {d.name: 0.0 for d in self.duties}
        self._more: dict[str, bool] = {d.name: False for d in self.duties}
        self.last: dict[str, DutyReport] = {}

    def _lease(self, scope: Scope, name: str, ttl_s: float) -> Any:
        """A fleet duty's lease on a company on NATS JetStream is a key every node shares (kv_lease.py)."""
        company = getattr(self.node, "company", None)
        if scope == "fleet" and company is not None and company.log.backend == "jetstream":
            from .kv_lease import KvLease

            log = self.node.log
            assert not isinstance(log, FileLog)   # a company on NATS: its log is the streams
            return KvLease(log.conn, company.log.stream_prefix, name, self.owner, self.label, ttl_s)
        return Lease(self._lease_dir(scope), name, self.owner, self.label, ttl_s)

    def _lease_dir(self, scope: Scope) -> Path:
        home = self.node.home
        return home.fleet_lease_dir if scope == "fleet" else home.node_lease_dir

    # -- one pass of one duty ------------------------------------------------------------------------
    def _cursor(self, name: str) -> str | None:
        with self.node.lock:
            row = self.node.conn.execute("SELECT cursor FROM duties WHERE name = ?", (name,)).fetchone()
        return row["cursor"] if row else None

    def _record(self, report: DutyReport) -> None:
        result = report.result
        with self.node.lock:
            self.node.conn.execute(
                "INSERT INTO duties (name, cursor, last_run_at, last_summary, last_error, holder, status) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET "
                "cursor = COALESCE(excluded.cursor, duties.cursor), last_run_at = excluded.last_run_at, "
                "last_summary = excluded.last_summary, last_error = excluded.last_error, holder = excluded.holder, "
                "status = COALESCE(excluded.status, duties.status)",
                (report.duty, result.cursor if result else None, now_ms(), result.summary if result else "",
                 report.error, self.label, json.dumps(result.status, default=str) if result and result.status else None))

    def _note_status(self, name: str, status: dict[str, Any]) -> None:
        with self.node.lock:
            self.node.conn.execute(
                "INSERT INTO duties (name, status) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET status = "
                "json_patch(COALESCE(duties.status, '{}'), excluded.status)", (name, json.dumps(status, default=str)))

    def run_one(self, duty: Duty, *, stop: threading.Event, progress: ProgressFn | None = None,
                budget_s: float | None = None, record_idle: bool = True) -> DutyReport:
        lease = self.leases[duty.name]
        try:
            held = lease.acquire()
        except OSError as exc:
            return DutyReport(duty.name, ran=False, error=f"its lease could not be taken: {exc}")
        if held is not None:
            return DutyReport(duty.name, ran=False, skipped=held.describe())

        def renew() -> bool:
            return lease.acquire() is None

        ctx = PassContext(cursor=self._cursor(duty.name), stop=stop, duty=duty.name, _progress=progress,
                          _renew=renew, deadline=(time.monotonic() + budget_s) if budget_s else None,
                          _status=lambda status: self._note_status(duty.name, status))
        started = time.perf_counter()
        try:
            result = duty.run_pass(ctx)
            report = DutyReport(duty.name, ran=True, result=result)
        except LeaseLost as exc:
            report = DutyReport(duty.name, ran=False, skipped=str(exc))
        except CrewletError as exc:
            # a refusal the node already knows and says (a damaged log, a home it cannot write): no traceback
            log.info("%s pass refused: %s", duty.name, exc)
            report = DutyReport(duty.name, ran=True, error=str(exc) or type(exc).__name__)
        except Exception as exc:  # the loop outlives one bad pass; the error is recorded and shown
            log.exception("%s pass failed", duty.name)
            report = DutyReport(duty.name, ran=True, error=str(exc) or type(exc).__name__)
        report.seconds = time.perf_counter() - started
        idle = report.ran and not report.error and not (report.result and (report.result.worked or report.result.more))
        if record_idle or not idle:
            try:
                self._record(report)
            except Exception:  # a locked or read-only database must not stop the duties themselves
                log.exception("could not record the %s pass", duty.name)
        self.last[duty.name] = report
        return report

    # -- ticks ---------------------------------------------------------------------------------------
    def tick(self, *, stop: threading.Event, progress: ProgressFn | None = None, force: bool = False,
             budget_s: float | None = None, record_idle: bool = True,
             on_report: Callable[[DutyReport], None] | None = None) -> list[DutyReport]:
        """One pass of every duty that is due (`force`: every duty), in their order. `on_report` hears each
        pass as it ends, not when the tick does: the keyword index's first build is told while the
        embedding duty after it still loads its model (the app's search waits on that report)."""
        reports = []
        now = time.monotonic()
        for duty in self.duties:
            if stop.is_set():
                break
            if not force and not self._more[duty.name] and now < self._next[duty.name]:
                continue
            report = self.run_one(duty, stop=stop, progress=progress, budget_s=budget_s, record_idle=record_idle)
            reports.append(report)
            if on_report is not None:
                on_report(report)
            self._more[duty.name] = report.more and not report.error
            # a duty whose lease is held elsewhere is asked again a little later, not every tick
            wait = duty.interval_s if report.ran else min(duty.interval_s, 10.0)
            self._next[duty.name] = time.monotonic() + wait
        return reports

    def pending(self) -> bool:
        return any(self._more.values())

    def run_until_idle(self, *, stop: threading.Event | None = None, progress: ProgressFn | None = None,
                       on_report: Callable[[DutyReport], None] | None = None) -> list[DutyReport]:
        """Every duty, pass after pass, until none has anything left to do (`crewlet worker --once`).

        Idle means a whole tick of every duty in which none changed anything or had more: a duty that
        said it had nothing to do is asked again after the others worked, since what they did (pages
        embedded, purged, applied) can be its work (the semantic index over a corpus the embedding duty
        grew). At most SETTLE_TICKS such ticks: a duty that works on every pass is not run for ever."""
        stop = stop or threading.Event()
        reports: list[DutyReport] = []

        def note(report: DutyReport) -> None:
            reports.append(report)
            if on_report:
                on_report(report)

        for settling in range(SETTLE_TICKS):
            if stop.is_set():
                break
            first = len(reports)
            # a settling tick's pass that found nothing to do is neither recorded nor reported: the duty's
            # working pass said what is still true (`crewlet worker --status`, `--once --json`)
            def heard(r: DutyReport, settling: int = settling) -> None:
                if not settling or r.error or not r.ran or (r.result is not None and (r.result.worked or r.result.more)):
                    note(r)

            self.tick(stop=stop, progress=progress, force=True, record_idle=not settling, on_report=heard)
            while self.pending() and not stop.is_set():
                for duty in [d for d in self.duties if self._more[d.name]]:
                    report = self.run_one(duty, stop=stop, progress=progress)
                    self._more[duty.name] = report.more and not report.error
                    note(report)
            worked = [r for r in reports[first:] if r.result is not None and r.result.worked]
            if not worked or len(self.duties) == 1:
                break
        return reports

    def run_forever(self, *, stop: threading.Event, wake: threading.Event | None = None,
                    progress: ProgressFn | None = None, on_report: Callable[[DutyReport], None] | None = None,
                    max_sleep_s: float = 60.0) -> None:
        """Tick until `stop` is set. `wake` runs every duty at once (the app sets it after a write)."""
        wake = wake or threading.Event()
        try:
            while not stop.is_set():
                forced = wake.is_set()
                wake.clear()
                self.tick(stop=stop, progress=progress, force=forced, on_report=on_report)
                if self.pending():
                    continue
                now = time.monotonic()
                sleep = min([max(0.05, t - now) for t in self._next.values()] + [max_sleep_s])
                wake.wait(sleep)
        finally:
            self.release()

    def release(self) -> None:
        """Give every lease back (a clean exit: the next holder need not wait for the expiry)."""
        for lease in self.leases.values():
            try:
                lease.release()
            except OSError:
                pass

    def close(self) -> None:
        self.release()
        for duty in self.duties:
            try:
                duty.close()
            except Exception:  # pragma: no cover - closing is best effort
                log.exception("closing %s", duty.name)
