"""What an import reports: the problems that stop it, the notes that do not, and the plan it wrote."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import CrewletError


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


@dataclass
class ImportReport:
    root: str
    mode: str                       # "spaces" (the spec's layout) | "tree" (--into KEY)
    into: str | None = None
    dry_run: bool = False
    pages: list[PlannedPage] = field(default_factory=list)
    notes: list[ImportNote] = field(default_factory=list)
    problems: list[ImportProblem] = field(default_factory=list)
    failures: list[ImportFailure] = field(default_factory=list)
    declared: list[str] = field(default_factory=list)   # spaces declared (or, on a dry run, to be declared)
    records: int = 0                                       # records written
    files: int = 0                                         # .md files read
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.failures

    def count(self, action: str) -> int:
        return sum(1 for p in self.pages if p.action == action)

    def summary(self) -> dict[str, Any]:
        return {"created": self.created, "updated": self.updated, "unchanged": self.unchanged,
                "notes": len(self.notes), "failures": len(self.failures), "records": self.records,
                "files": self.files, "seconds": round(self.seconds, 3)}

    def to_json(self) -> dict[str, Any]:
        by_action: dict[str, list[dict[str, Any]]] = {"create": [], "update": [], "unchanged": []}
        for p in self.pages:
            by_action[p.action].append(p.to_json())
        return {
            "root": self.root, "mode": self.mode, "into": self.into, "dry_run": self.dry_run,
            **self.summary(),
            "declared": list(self.declared),
            "creates": by_action["create"], "updates": by_action["update"], "unchanged_pages": by_action["unchanged"],
            "notes": [n.to_json() for n in self.notes],
            "problems": [p.to_json() for p in self.problems],
            "failures": [f.to_json() for f in self.failures],
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
        }


class ImportProblems(CrewletError):
    """The plan has problems: nothing was written. Carries every problem and the report so far."""

    code = "import_problems"

    def __init__(self, report: ImportReport) -> None:
        n = len(report.problems)
        verb = "would stop" if report.dry_run else "stopped"
        super().__init__(f"import {verb}: {n} problem{'s' if n != 1 else ''}, nothing written")
        self.report = report
        self.problems = report.problems

    def to_json(self) -> dict[str, Any]:
        return {"error": self.code, "message": str(self), "problems": [p.to_json() for p in self.problems]}
