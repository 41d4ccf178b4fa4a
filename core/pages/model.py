"""What a page is, as readers see it."""
from __future__ import annotations

import difflib
import json
import re
import unicodedata
from dataclasses import asdict, dataclass, field
from typing import Any

_WS = re.compile(r"\s+")
MAX_TITLE = 255
# half the log's 64 MiB frame limit: JSON escaping can grow a body
MAX_BODY_BYTES = 32 * 1024 * 1024
# C0 controls (but tab and newline), DEL and C1: never part of a title, shown inert in a body
CONTROL_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
TITLE_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f]")
# what the listing's SQL trims (trim(body, char(9,10,13,32))): the two must agree
FOLDER_BLANK = " \t\n\r"
WINDOW_MAX = 500


# the bidi controls: marks, embeddings, overrides and isolates (they reorder how a line shows)
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# characters that show as nothing but are not format characters (category Cf covers the rest)
_INVISIBLE = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180f\u3164\uffa0")
_JOINERS = frozenset("\u200c\u200d")


def normalise_title(title: str) -> str:
    """The address a title is claimed at: compatibility-folded (NFKC: "Café" typed either way, a
    full-width letter or a ligature are the same address), runs of whitespace collapsed, trimmed,
    lower-cased."""
    if title.isascii():
        return _WS.sub(" ", title).strip().lower()
    folded = _WS.sub(" ", unicodedata.normalize("NFKC", title)).strip().lower()
    return unicodedata.normalize("NFKC", folded)


def clean_title(title: str) -> str:
    """The displayed title: NFC (one spelling of every accented letter), whitespace runs collapsed
    and trimmed, capitalisation kept."""
    if not title.isascii():
        title = unicodedata.normalize("NFC", title)
    return _WS.sub(" ", title).strip()


def _joiner_needed(title: str, i: int) -> bool:
    """A zero-width (non-)joiner is part of the writing between two letters of a script that joins
    (Arabic, Persian, the Indic scripts: past U+0590), and a ZWJ glues an emoji sequence."""
    before = title[i - 1] if i > 0 else ""
    after = title[i + 1] if i + 1 < len(title) else ""
    if not before or not after:
        return False
    if title[i] == "\u200d" and unicodedata.category(after) == "So" and (
            unicodedata.category(before) == "So" or before == "\ufe0f"):
        return True
    return (ord(before) >= 0x0590 and ord(after) >= 0x0590
            and unicodedata.category(before)[0] in "LM" and unicodedata.category(after)[0] in "LM")


# a title is one line: a break inside one is refused, never folded into a space (around it, it is trimmed)
LINE_BREAK_RE = re.compile("[\n\r\x0b\x0c\x85\u2028\u2029]")


def title_problem(title: str) -> str | None:
    """Why a (cleaned) title cannot be used, naming the first offending character and where it is:
    a control character, a bidi control, or a character that shows as nothing (a title is an
    address: two that look the same must be the same)."""
    if title.isascii() and not TITLE_CONTROL_RE.search(title):
        return None
    for i, ch in enumerate(title):
        category = unicodedata.category(ch)
        if LINE_BREAK_RE.match(ch):
            kind = "a line break: a title is one line"
        elif category == "Cc":
            kind = "a control character"
        elif ch in BIDI_CONTROLS:
            kind = "a bidi control: it reorders how the title shows"
        elif (category == "Cf" or ch in _INVISIBLE) and not (ch in _JOINERS and _joiner_needed(title, i)):
            kind = "an invisible character"
        else:
            continue
        name = unicodedata.name(ch, "")
        shown = "".join(f"<U+{ord(c):04X}>" if c == ch else c for c in title[max(0, i - 20): i + 21])
        return (f"a title cannot hold U+{ord(ch):04X}{' ' + name if name else ''} ({kind}), found at character "
                f"{i + 1}: '{shown}' — remove it")
    return None


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
        out["ref"] = self.ref
        if not with_body:
            out.pop("body")
        return out

    @classmethod
    def from_row(cls, row: Any, child_count: int = 0) -> "Page":
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
