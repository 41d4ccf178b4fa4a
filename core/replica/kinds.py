"""A record kind as one declaration: everything the house needs of it, in one place.

A log's records are of a few kinds (`page.save`, `vector.put`, …). Each kind is declared once, as a
`RecordKind`, beside its log (`core/pages/kinds.py`, `core/vectors/kinds.py`), and everything that used to be a
hand-kept list per kind is read off the declarations (`LogKinds`):

- the **shapes** the applier checks a payload against before its handler reads it (shapes.py);
- the **handlers** (and the verdicts: a record that carries its own outcome, a repair's tombstone) the
  applier registers with the engine (appliers.py);
- the **tables** its handler writes: each must be declared replicated in the content digest
  (core/store/digest.py `TABLES`), and the tables a log's kinds write are what a repair's replay compares;
- how a **repair gives it back** from a database that applied it when the log lost it (core/recover.py
  dispatches on the declaration: no per-kind branch anywhere else), or why none can (a tombstone stands);
- which payload keys **relate** records (a repair collects the log's intact records about what a lost
  record touched by these keys, to rebuild it as of its seq).

Every kind on a log replicates (every node applies the log), so what it writes must be replicated: that is what
"whether it replicates" comes to, and `house_problems` checks it. Forgetting a part is an error at import (every
part is a required argument, checked in `__post_init__`), and `house_problems` (run by
tests/test_record_kinds.py on a freshly migrated database) names a table a kind writes that the digest does not
cover, a replicated table no kind writes, and a table the migrations make that is declared nowhere. Spec 003's
entries (issue 35) are the next kinds: each is one declaration (core/pages/kinds.py says how), one migration (and
its table's line in the digest's `TABLES`) and one handler function, with its builder and its give-back.

Nothing here knows a page or a vector: this is the replica floor (tests/test_import_graph.py).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..clock import now_ms
from ..log import Record
from ..store.digest import REPLICATED, TABLES
from .shapes import DICT, INT, NONE, TEXT, Shape, may, need

# a repair's give-back: (the database that applied it, the lost seq, its outcome row in applied_ops — None
# on a log whose records decide nothing —, the log's intact records about the same things) -> candidates
# rebuilt as of the seq, the most likely first, and what the rows no longer say ("" when they say it all).
# Raises CannotSay when the rows cannot say what the record was (then the next database is asked, and last a
# tombstone stands).
GiveBack = Callable[[Any, int, Any, "Related"], "tuple[list[Record], str]"]
Handler = Callable[[Any, Record], Any]
Verdict = Callable[[Record], Any]


class CannotSay(Exception):
    """The rows do not say what the record was."""


@dataclass
class Related:
    """The log's intact records that speak of the things lost records touched, in seq order: what a record
    rebuilt "as of its seq" is set against (a later move says the parent now is not the parent then; a later
    rename's outcome says the title it replaced; a later edit's actor who wrote the comment). Built by the repair
    in one walk of the log (core/repair.py `_related`), by the keys the kinds declare (`RecordKind.related`)."""

    by_id: dict[str, list[Record]] = field(default_factory=dict)   # page, comment, agent or space -> its records
    every: dict[str, list[Record]] = field(default_factory=dict)   # kind -> every intact record of it (`related_all`)

    def about(self, key: str | None) -> list[Record]:
        return self.by_id.get(key, []) if key else []

    def of_kind(self, kind: str) -> list[Record]:
        return self.every.get(kind, [])

    @property
    def purges(self) -> list[Record]:
        """Every intact page.purge (they re-file children)."""
        return self.of_kind("page.purge")


@dataclass(frozen=True)
class RecordKind:
    """One record kind, whole. Every part is required: a kind that forgets one does not import.

    - `type`: the record's type on the log ("page.save").
    - `build`: the builder every writer calls (its payload is exactly `shape`'s keys).
    - `shape`: what the payload holds; a payload of another shape is refused as malformed (filed as nothing on
      a filing log) before the handler reads it.
    - `handle` or `verdict`: the handler that writes its rows (refusing or finding nothing to do before its
      first write), or — for a record that carries its own outcome, a repair's tombstone — the verdict.
    - `writes`: every table the handler writes (each must be replicated: core/store/digest.py `TABLES`).
    - `give_back`: how a repair rebuilds it from a database that applied it (`GiveBack`), or a sentence saying
      why no database can (the repair then writes a tombstone where it stood).
    - `related`: the payload keys that name what it is about (page_id, comment_id …): the repair collects the
      log's intact records by these keys; `related_all`: every intact record of this kind is collected (its
      outcome names nothing a lost record could be matched by, or it touches every page: a purge re-files).
    """

    type: str
    build: Callable[..., Record]
    shape: Shape
    writes: tuple[str, ...]
    give_back: GiveBack | str
    handle: Handler | None = None
    verdict: Verdict | None = None
    related: tuple[str, ...] = ()
    related_all: bool = False

    def __post_init__(self) -> None:
        for problem in self.problems():
            raise TypeError(f"record kind '{self.type}': {problem}")

    def problems(self) -> list[str]:
        """What the declaration lacks (empty when it is whole)."""
        out = []
        if not isinstance(self.type, str) or "." not in self.type:
            out.append("its type must be 'family.verb' (as 'page.save')")
        if not callable(self.build):
            out.append("it has no builder (`build`): the function every writer calls")
        if not isinstance(self.shape, Mapping):
            out.append("it has no payload shape (`shape`, core/replica/shapes.py)")
        if (self.handle is None) == (self.verdict is None):
            out.append("it needs exactly one of a handler (`handle`) or a verdict (`verdict`)")
        elif not callable(self.handle or self.verdict):
            out.append("its handler is not a function")
        if not isinstance(self.writes, tuple) or not all(isinstance(t, str) and t for t in self.writes):
            out.append("`writes` must name the tables its handler writes (a tuple; () when it writes none)")
        if not (callable(self.give_back) or (isinstance(self.give_back, str) and self.give_back.strip())):
            out.append("`give_back` must rebuild it from a database's rows, or say why no database can")
        if not all(isinstance(k, str) and k for k in self.related):
            out.append("`related` must be payload keys")
        for key in self.related:
            if isinstance(self.shape, Mapping) and key not in self.shape:
                out.append(f"`related` names '{key}', which its shape does not hold")
        return out


class LogKinds:
    """Every kind one log's records are of, and what is read off them. `own_tables`: what the applier itself
    writes beside the handlers (a deciding log's outcomes, `applied_ops`)."""

    def __init__(self, log: str, kinds: Iterable[RecordKind], *, own_tables: tuple[str, ...] = ()) -> None:
        self.log = log
        self.kinds: dict[str, RecordKind] = {}
        for kind in kinds:
            if kind.type in self.kinds:
                raise TypeError(f"record kind '{kind.type}' is declared twice on the {log} log")
            self.kinds[kind.type] = kind
        self.own_tables = own_tables

    def __iter__(self) -> Iterator[RecordKind]:
        return iter(self.kinds.values())

    def __contains__(self, kind: str) -> bool:
        return kind in self.kinds

    def __getitem__(self, kind: str) -> RecordKind:
        return self.kinds[kind]

    @property
    def types(self) -> tuple[str, ...]:
        return tuple(self.kinds)

    @property
    def shapes(self) -> dict[str, Shape]:
        return {t: k.shape for t, k in self.kinds.items()}

    @property
    def handlers(self) -> dict[str, Handler]:
        return {t: k.handle for t, k in self.kinds.items() if k.handle is not None}

    @property
    def verdicts(self) -> dict[str, Verdict]:
        return {t: k.verdict for t, k in self.kinds.items() if k.verdict is not None}

    @property
    def tables(self) -> tuple[str, ...]:
        """Every table this log's records fill (what a repair's replay is compared with a database on), in the
        order the kinds first name them."""
        out: list[str] = []
        for name in [*self.own_tables, *(t for k in self.kinds.values() for t in k.writes)]:
            if name not in out:
                out.append(name)
        return tuple(out)

    @property
    def related_keys(self) -> tuple[str, ...]:
        out: list[str] = []
        for k in self.kinds.values():
            out += [key for key in k.related if key not in out]
        return tuple(out)

    @property
    def related_all(self) -> frozenset[str]:
        return frozenset(t for t, k in self.kinds.items() if k.related_all)

    def give_back(self, kind: str) -> GiveBack | None:
        """The kind's give-back, or None when no database can give it back (or the kind is unknown)."""
        declared = self.kinds.get(kind)
        return declared.give_back if declared is not None and callable(declared.give_back) else None

    def givers(self) -> list[tuple[str, GiveBack]]:
        """Every kind a database can give back, in declaration order (a filing log, whose databases keep no
        outcome naming a lost record's kind, asks each in turn)."""
        return [(t, k.give_back) for t, k in self.kinds.items() if callable(k.give_back)]


def every_table(logs: Sequence[LogKinds]) -> dict[str, str]:
    """table -> the log whose records fill it, over every log; a table two logs fill is refused (a repair
    replays one log and compares that log's tables)."""
    out: dict[str, str] = {}
    for log in logs:
        for table in log.tables:
            if out.setdefault(table, log.log) != log.log:
                raise TypeError(f"table '{table}' is written by both the {out[table]} and the {log.log} log")
    return out


def house_problems(logs: Sequence[LogKinds], conn: Any) -> list[str]:
    """What the declarations of `logs` leave undone, against the migrated database `conn` and the content
    digest's tables (core/store/digest.py `TABLES`): each line names the fix. Empty when the house is whole."""
    out = [f"record kind '{k.type}' on the {log.log} log: {p}" for log in logs for k in log for p in k.problems()]
    try:
        written = every_table(logs)
    except TypeError as exc:
        return [*out, str(exc)]
    for log in logs:
        for k in log:
            out += [f"record kind '{k.type}' writes table '{t}', which the content digest does not cover: add its "
                    "replicated rows to core/store/digest.py TABLES" for t in k.writes if t not in REPLICATED]
    out += [f"replicated table '{t}' is written by no record kind: name it in the `writes` of the kinds that fill it"
            for t in REPLICATED if t not in written]
    made = {r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
    declared = [t.name for t in TABLES]
    out += [f"table '{t}' is declared twice in core/store/digest.py TABLES" for t in sorted(set(declared))
            if declared.count(t) > 1]
    out += [f"table '{t}' (made by a migration) is not declared: add it to core/store/digest.py TABLES — replicated "
            "(its rows), a node's own (local) or carried" for t in sorted(made - set(declared))]
    out += [f"table '{t}' is declared in core/store/digest.py TABLES, but no migration makes it"
            for t in sorted(set(declared) - made)]
    return out


# -- the tombstone: a kind every log declares -------------------------------------------------------------

LOST = "log.lost"               # the tombstone's record type
REPAIR_ACTOR = "crewlet"
# its payload; the outcome it may carry (a refused or no-op record given back as that outcome) is checked by
# the verdict against LOST_OUTCOME
LOST_SHAPE: Shape = {"seq": may(INT), "log": may(TEXT), "why": may(TEXT), "was": may(TEXT), "outcome": may(DICT)}
LOST_OUTCOME: Shape = {"type": need(TEXT), "status": need(TEXT), "code": may(TEXT, NONE), "reason": may(TEXT, NONE),
                       "result": may(DICT, NONE)}
LOST_GIVE_BACK = "an earlier repair's tombstone is given back as the outcome every node stored for it"


def tombstone(seq: int, log: str, why: str, *, was: str = "") -> Record:
    """The record a repair writes where record `seq` was and nothing could give it back."""
    payload: dict[str, Any] = {"seq": seq, "log": log, "why": why}
    if was:
        payload["was"] = was
    return Record.new(LOST, REPAIR_ACTOR, payload)


# -- what every give-back reads ----------------------------------------------------------------------------

def at_of(op_id: str) -> int:
    """A record's instant as its op_id says it (12 hex digits of the writer's clock in ms, core/log/record.py)."""
    try:
        return int(op_id[:12], 16)
    except ValueError:
        return now_ms()


@dataclass
class Later:
    """An intact record after the lost one, with what this database decided for it."""

    record: Record
    status: str | None           # None: this database has not applied it
    result: dict[str, Any]

    @property
    def applied(self) -> bool:
        return self.status == "applied"


def later(conn: Any, related: Related, key: str | None, seq: int, kind: str | None = None) -> list[Later]:
    """The log's intact records about `key` after `seq` (of `kind`), each with this database's outcome."""
    out = []
    for rec in related.about(key):
        if rec.seq <= seq or (kind is not None and rec.type != kind):
            continue
        row = conn.execute("SELECT status, result FROM applied_ops WHERE op_id = ?", (rec.op_id,)).fetchone()
        result = json.loads(row["result"]) if row is not None and row["result"] else {}
        out.append(Later(rec, row["status"] if row is not None else None, result if isinstance(result, dict) else {}))
    return out


def unique(values: list[Any]) -> list[Any]:
    """`values` without repeats, in their first order."""
    out: list[Any] = []
    for v in values:
        if v not in out:
            out.append(v)
    return out
