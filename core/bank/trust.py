"""An entry's trust tier, derived — never stored by hand (spec 003, "Trust tiers"):

- HUMAN_VERIFIED: a person verified it, and it is in use;
- GROUNDED: accepted (in use), it cites something, and every citation's last check held (held, shifted or moved)
  — and, where the caller read the cited file at the branch head now, its blob is the one last checked;
- UNGROUNDED: anything else (nothing checked supports it, a citation changed, went, or was not read yet, the
  file changed since its last check, or the entry is not in use).

Each citation's state says its last result and its age: "held, checked 3 h ago at 1a2b3c4".
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..pages.entry_model import HOLDING, IN_USE, NOT_READ_YET

HUMAN_VERIFIED, GROUNDED, UNGROUNDED = "HUMAN_VERIFIED", "GROUNDED", "UNGROUNDED"
TIER_RANK = {HUMAN_VERIFIED: 0, GROUNDED: 1, UNGROUNDED: 2}     # verified and grounded rank above the others


@dataclass
class CitationState:
    """One citation of an entry with its last check (None: never read)."""

    index: int                           # 1-based
    citation: dict[str, Any]
    result: str = NOT_READ_YET
    commit: str | None = None
    blob: str | None = None
    anchor: dict[str, Any] | None = None     # where it stands now, when a recheck re-anchored it
    message: str | None = None
    checked_at: int | None = None
    changed_since: bool = False          # the file's blob at the branch head differs from the one last checked
    checks: list[dict[str, Any]] = field(default_factory=list)   # every check, oldest first (show's)

    @property
    def holds(self) -> bool:
        return self.result in HOLDING and not self.changed_since

    def age(self, now_ms: int) -> str:
        """'3 h ago'; '' when never checked."""
        if self.checked_at is None:
            return ""
        return ago(now_ms - self.checked_at)

    def said(self, now_ms: int) -> str:
        """'held, checked 3 h ago at 1a2b3c4' — the result and its age, as a serve carries it."""
        if self.checked_at is None:
            return "not read yet"
        at = f" at {self.commit[:7]}" if self.commit else ""
        changed = "; the file changed since" if self.changed_since else ""
        return f"{self.result.replace('_', ' ')}, checked {self.age(now_ms)}{at}{changed}"

    def to_json(self, now_ms: int) -> dict[str, Any]:
        return {"index": self.index, "citation": self.citation, "result": self.result, "commit": self.commit,
                "blob": self.blob, "anchor": self.anchor, "message": self.message, "checked_at": self.checked_at,
                "changed_since": self.changed_since, "said": self.said(now_ms)}


def ago(ms: int) -> str:
    s = max(0, ms) // 1000
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= size:
            return f"{s // size} {unit} ago"
    return "just now"


def trust_tier(status: str, verified_by: str | None, citations: Sequence[CitationState],
               head_blobs: Mapping[int, str | None] | None = None) -> str:
    """The tier an entry serves at. `head_blobs`: citation index -> the cited file's blob at the branch head now
    (read by the caller at serve time; an index left out was not read, and its last check stands)."""
    if status not in IN_USE:
        return UNGROUNDED
    if verified_by:
        return HUMAN_VERIFIED
    if not citations:
        return UNGROUNDED
    for c in citations:
        if head_blobs is not None and c.index in head_blobs and c.blob is not None and head_blobs[c.index] != c.blob:
            c.changed_since = True
        if not c.holds:
            return UNGROUNDED
    return GROUNDED
