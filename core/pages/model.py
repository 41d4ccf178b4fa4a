"""What a page is, as readers see it."""
from __future__ import annotations

import difflib
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from ..text.titles import LINE_BREAK_RE, clean_title, normalise_title, title_problem  # noqa: F401 - the page's rules

from ..sections.pages import MAX_BODY_BYTES, MAX_TITLE  # noqa: F401 - the hard ceilings, beside the [limits] section
# C0 controls (but tab and newline), DEL and C1: never part of a title, shown inert in a body
CONTROL_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# what the listing's SQL trims (trim(body, char(9,10,13,32))): the two must agree
FOLDER_BLANK = " \t\n\r"
WINDOW_MAX = 500


def line_diff(old: str, new: str, old_name: str, new_name: str) -> list[str]:
    """The unified line diff every surface shows (CLI, app, conflict view)."""
    return list(difflib.unified_diff(old.splitlines(), new.splitlines(), old_name, new_name, lineterm=""))


def is_folder(body: str) -> bool:
    """A folder is a page with nothing written in it: derived on every read, never stored."""
    return body.strip(FOLDER_BLANK) == ""


@dataclass
class Page:
    id: str
    container: str
    title: str
    address: str
    body: str
    revision: int
    parent_id: str | None
    created_by: str
    created_at: int
    saved_by: str
    saved_at: int
    updated_at: int
    trashed_at: int | None
    trashed_by: str | None
    version: int
    is_folder: bool = False
    child_count: int = 0
    ancestors: list[dict[str, str]] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)

    @property
    def ref(self) -> str:
        return f"{self.container}/{self.title}"

    def to_json(self, *, with_body: bool = True) -> dict[str, Any]:
        out = asdict(self)
        # one meaning on every surface (MCP's page_brief says the same): CONTAINER/address, what opens the page
        # whatever its case; the title is its own field
        out["address"] = f"{self.container}/{self.address}"
        out["ref"] = self.ref
        if not with_body:
            out.pop("body")
        return out

    @classmethod
    def from_row(cls, row: Any, child_count: int = 0) -> Page:
        """A listing may select an empty body with an `is_folder` column instead of the whole text."""
        keys = row.keys()
        folder = bool(row["is_folder"]) if "is_folder" in keys else is_folder(row["body"])
        labels = json.loads(row["labels"]) if "labels" in keys and row["labels"] else []
        if "child_count" in keys:
            child_count = row["child_count"]
        return cls(
            id=row["id"], container=row["container"], title=row["title"], address=row["address"],
            body=row["body"], revision=row["revision"], parent_id=row["parent_id"],
            created_by=row["created_by"], created_at=row["created_at"], saved_by=row["saved_by"],
            saved_at=row["saved_at"], updated_at=row["updated_at"], trashed_at=row["trashed_at"],
            trashed_by=row["trashed_by"], version=row["version"], is_folder=folder,
            child_count=child_count, labels=labels,
        )


@dataclass
class Revision:
    page_id: str
    revision: int
    title: str
    body: str
    author: str
    at: int
    kind: str
    message: str | None

    def to_json(self, *, with_body: bool = True) -> dict[str, Any]:
        out = asdict(self)
        if not with_body:
            out.pop("body")
        return out


@dataclass
class Comment:
    id: str
    page_id: str
    author: str
    body: str
    created_at: int
    edited_at: int | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Window:
    """One level of an outline: at most WINDOW_MAX pages, the level's total, and a cursor."""

    container: str
    parent_id: str | None
    pages: list[Page]
    total: int
    next_cursor: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "container": self.container, "parent_id": self.parent_id, "total": self.total,
            "next_cursor": self.next_cursor, "pages": [p.to_json(with_body=False) for p in self.pages],
        }
