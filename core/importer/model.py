"""What an import reports: the problems that stop it, the notes that do not, and the plan it wrote."""
from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import IO, TYPE_CHECKING, Any

from ..errors import CrewletError, Description
from .store import Spill

if TYPE_CHECKING:
    from .store import PlanStore


@dataclass
class ImportProblem:
    """Something the operator corrects in an editor before anything is written."""

    code: str                 # no_title | duplicate | not_declared | invalid_space | bad_yaml | bad_frontmatter
    #                           not_utf8 | not_text | unreadable | parent_cycle | forbidden | trashed | invalid_title
    message: str
    fix: str
    files: list[str] = field(default_factory=list)
    line: int | None = None

    def __str__(self) -> str:
        where = ""
        if len(self.files) == 1:
            where = self.files[0] + (f":{self.line}" if self.line else "") + ": "
        return f"{where}{self.message} — {self.fix}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ImportNote:
    """Something worth knowing that does not stop the run (a missing parent, a disambiguated title)."""

    code: str
    message: str
    files: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return (self.files[0] + ": " if len(self.files) == 1 else "") + self.message

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ImportFailure:
    """A record the applier refused while writing (e.g. a title claimed by a concurrent writer)."""

    file: str | None
    container: str
    title: str
    op: str
    code: str | None
    reason: str | None

    def __str__(self) -> str:
        return f"{self.file or self.container + '/' + self.title}: {self.op} refused ({self.code}): {self.reason}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class PlannedPage:
    """One page the tree publishes, and what the run does to it."""

    kind: str                      # doc | skill | folder
    source: str | None             # the file (or directory, for a folder) relative to the root, '/'-separated
    container: str
    title: str
    body: str
    labels: list[str] = field(default_factory=list)
    page_id: str | None = None     # pre-assigned for a create, the existing page's id otherwise
    action: str = "create"         # create | update | unchanged
    changes: list[str] = field(default_factory=list)   # for an update: body, title, labels
    parent_id: str | None = None   # for a create: where it lands
    parent_title: str | None = None
    base_revision: int | None = None
    new_labels: list[str] = field(default_factory=list)  # labels not yet attached to an existing page

    @property
    def ref(self) -> str:
        return f"{self.container}/{self.title}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "source": self.source, "container": self.container, "title": self.title,
                "ref": self.ref, "page_id": self.page_id, "action": self.action, "changes": list(self.changes),
                "parent_id": self.parent_id, "parent_title": self.parent_title, "labels": list(self.labels)}


def _spill(name: str, kind: Any) -> Any:
    return field(default_factory=lambda: Spill(name, lambda d: kind(**d), asdict))


@dataclass
class ImportReport:
    """What an import planned and did. A native import keeps its plan in a file of its own (`plan`, see
    store.py): `iter_pages()` reads it in write order, `pages` materialises it (a test's or a small tree's
    convenience), `write_json` streams the whole report; `close()` deletes the file (collecting the report
    does too). Notes, problems and failures keep their first thousand in memory and the rest in that file."""

    root: str
    mode: str                       # "spaces" (the spec's layout) | "tree" (--into KEY)
    into: str | None = None
    dry_run: bool = False
    _pages: list[PlannedPage] = field(default_factory=list, repr=False)
    notes: Any = _spill("notes", ImportNote)
    problems: Any = _spill("problems", ImportProblem)
    failures: Any = _spill("failures", ImportFailure)
    declared: list[str] = field(default_factory=list)   # spaces declared (or, on a dry run, to be declared)
    records: int = 0                                       # records written
    files: int = 0                                         # .md files read
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    plan: PlanStore | None = field(default=None, repr=False)

    def keep_plan(self, store: PlanStore) -> None:
        """The plan lives in `store` from now on; so do notes, problems and failures past the first thousand."""
        self.plan = store
        for spill in (self.notes, self.problems, self.failures):
            spill.store = store

    @property
    def pages(self) -> list[PlannedPage]:
        return list(self.iter_pages()) if self.plan is not None else self._pages

    @pages.setter
    def pages(self, value: list[PlannedPage]) -> None:
        self._pages = value

    def iter_pages(self, action: str | None = None) -> Iterator[PlannedPage]:
        """The planned pages in write order (parents first), those of one action if given."""
        if self.plan is None:
            yield from (p for p in self._pages if action is None or p.action == action)
            return
        where, args = ("WHERE action = ?", (action,)) if action else ("", ())
        for r in self.plan.rows(f"SELECT kind, source, container, title, labels, page_id, action, changes, parent_id, "
                                f"parent_title, base_revision, new_labels FROM plan {where} ORDER BY ord", args):
            yield PlannedPage(kind=r[0], source=r[1], container=r[2], title=r[3], body="",
                              labels=json.loads(r[4]) if r[4] else [], page_id=r[5], action=r[6],
                              changes=json.loads(r[7]) if r[7] else [], parent_id=r[8], parent_title=r[9],
                              base_revision=r[10], new_labels=json.loads(r[11]) if r[11] else [])

    @property
    def ok(self) -> bool:
        return not self.problems and not self.failures

    def count(self, action: str) -> int:
        if self.plan is None:
            return sum(1 for p in self._pages if p.action == action)
        return self.plan.one("SELECT count(*) FROM plan WHERE action = ?", (action,))[0]

    def container_counts(self) -> dict[str, dict[str, int]]:
        """container -> {create, update, unchanged}: how many pages of each the plan holds."""
        counts: dict[str, dict[str, int]] = {}
        if self.plan is None:
            for p in self._pages:
                counts.setdefault(p.container, {"create": 0, "update": 0, "unchanged": 0})[p.action] += 1
            return counts
        for container, action, n in self.plan.rows("SELECT container, action, count(*) FROM plan "
                                                   "GROUP BY container, action"):
            counts.setdefault(container, {"create": 0, "update": 0, "unchanged": 0})[action] += n
        return counts

    def close(self) -> None:
        if self.plan is not None:
            for spill in (self.notes, self.problems, self.failures):
                if spill.spilled:           # what a caller may still read once the plan's file is gone
                    spill.head, spill.spilled, spill.store = list(spill), 0, None
            self.plan.close()

    def summary(self) -> dict[str, Any]:
        return {"created": self.created, "updated": self.updated, "unchanged": self.unchanged,
                "notes": len(self.notes), "failures": len(self.failures), "records": self.records,
                "files": self.files, "seconds": round(self.seconds, 3)}

    def _head(self) -> dict[str, Any]:
        return {"root": self.root, "mode": self.mode, "into": self.into, "dry_run": self.dry_run,
                **self.summary(), "declared": list(self.declared)}

    def _tail(self) -> dict[str, Any]:
        return {"timings": {k: round(v, 3) for k, v in self.timings.items()}}

    def to_json(self) -> dict[str, Any]:
        by_action: dict[str, list[dict[str, Any]]] = {"create": [], "update": [], "unchanged": []}
        for p in self.iter_pages():
            by_action[p.action].append(p.to_json())
        return {
            **self._head(),
            "creates": by_action["create"], "updates": by_action["update"], "unchanged_pages": by_action["unchanged"],
            "notes": [n.to_json() for n in self.notes],
            "problems": [p.to_json() for p in self.problems],
            "failures": [f.to_json() for f in self.failures],
            **self._tail(),
        }

    def write_json(self, out: IO[str], encode: Any = None, *, indent: int = 2) -> None:
        """`to_json()`'s document, written as it is read: the pages one at a time from the plan, so a
        million of them never stand in memory at once. `encode(value, indent)` is the JSON encoder (the
        CLI's sanitising one); each entry of a list is written on its own line(s)."""
        enc = encode or (lambda value, ind: json.dumps(value, ensure_ascii=False, indent=ind))
        pad = " " * indent

        def scalar_items(data: dict[str, Any]) -> None:
            for key, value in data.items():
                out.write(f",\n{pad}{enc(key, None)}: {enc(value, None)}")

        def listing(key: str, items: Any) -> None:
            out.write(f",\n{pad}{enc(key, None)}: [")
            first = True
            for item in items:
                text = enc(item, indent).replace("\n", "\n" + pad * 2)
                out.write(("\n" if first else ",\n") + pad * 2 + text)
                first = False
            out.write("]" if first else f"\n{pad}]")

        head = self._head()
        del head["notes"], head["failures"]        # to_json's lists replace these counts
        first_key = next(iter(head))
        out.write("{\n" + f"{pad}{enc(first_key, None)}: {enc(head.pop(first_key), None)}")
        scalar_items(head)
        for key, action in (("creates", "create"), ("updates", "update"), ("unchanged_pages", "unchanged")):
            listing(key, (p.to_json() for p in self.iter_pages(action)))
        listing("notes", (n.to_json() for n in self.notes))
        listing("problems", (p.to_json() for p in self.problems))
        listing("failures", (f.to_json() for f in self.failures))
        scalar_items(self._tail())
        out.write("\n}\n")


class ImportProblems(CrewletError):
    """The plan has problems: nothing was written. Carries every problem and the report so far."""

    code = "import_problems"

    def __init__(self, report: ImportReport) -> None:
        n = len(report.problems)
        verb = "would stop" if report.dry_run else "stopped"
        super().__init__(f"import {verb}: {n} problem{'s' if n != 1 else ''}, nothing written")
        self.report = report
        self.problems = report.problems

    def description(self) -> Description:
        return super().description().with_details(problems=[p.to_json() for p in self.problems])
