"""What earlier repairs did to a home's logs, as every node reads it when it opens: the notes a repair leaves
beside the logs (`repairs.jsonl`), where the record this database applied last stands now (`relocate`), and
what it applied that the repaired log no longer holds (`held_lost`). `core/repair.py` writes the notes; the
node reads them here, below both.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .log import FileLog
from .log.framing import Applied, Frame, frame_digest
from .pages import applier, reads
from .store import Connection
from .vectors import records as vectors

REPAIR_NOTES = "repairs.jsonl"   # beside the logs: what each repair wrote (core/repair.py)


@dataclass
class LostChange:
    """An applied change the repaired log does not hold: rebuilding the database loses it."""

    seq: int
    op_id: str
    type: str
    status: str
    what: str        # the page it touched, as CONTAINER/Title, when known

    def line(self) -> str:
        what = f" {self.what}" if self.what else ""
        return f"seq {self.seq} {self.type}{what} ({self.status})"


def what_changed(conn: Connection, result: str | None) -> str:
    """The page an applied record's outcome names, as CONTAINER/Title ("" when it names none)."""
    try:
        page_id = json.loads(result or "{}").get("page_id")
    except (ValueError, AttributeError):
        return ""
    if not page_id:
        return ""
    return reads.where_is(conn, page_id)


def journal_path(log: Path) -> Path:
    return log.with_name(REPAIR_NOTES)


def repairs_of(log: Path) -> list[dict[str, Any]]:
    """Every repair noted for this log file (oldest first); none when no repair ever ran."""
    path = journal_path(log)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("file") == log.name:
            out.append(entry)
    return out


def relocate(flog: FileLog, applied: Applied, conn: Connection, spec_name: str) -> Frame | None:
    """After a repair wrote the log anew, where the record this database applied last now is: the frame of its
    seq, when it holds that very record (its digest), the record a repair gave back in its place (the same
    op_id: it did the same), or the tombstone a repair wrote there (then `held_lost` names the change this
    database holds). None when no repair explains the difference (then it is damage)."""
    entries = repairs_of(flog.path)
    if not entries or applied.nothing:
        return None
    found = None
    for frame in flog.frames(0):
        if frame.seq == applied.seq:
            found = frame
            break
    if found is None:
        return None
    if applied.digest is None or frame_digest(found.body) == applied.digest:
        return found
    written = {int(w["seq"]): w for e in entries for w in e.get("written", [])}
    if applied.seq not in written:
        return None
    if written[applied.seq].get("how") == "lost":
        return found   # its record is a tombstone now: this database holds a change the log lost (`held_lost`)
    given = written
    if spec_name == "pages":
        row = conn.execute("SELECT op_id FROM applied_ops WHERE seq = ?", (applied.seq,)).fetchone()
        return found if row is not None and row["op_id"] == given[applied.seq].get("op_id") else None
    return found


def held_lost(conn: Connection, log: Path) -> list[LostChange]:
    """Records an earlier repair could not give back that this database applied (it holds a change the log no
    longer has): from the repair notes beside the log."""
    path = Path(log)
    entries = repairs_of(path)
    if not entries:
        return []
    position = applier.APPLIER if path.name == "pages.log" else vectors.POSITION
    through = applier.position(conn, position)[0]
    out = []
    for entry in entries:
        for w in entry.get("written", []):
            seq = int(w["seq"])
            if w.get("how") != "lost" or seq > through:
                continue
            if position == applier.APPLIER:
                row = conn.execute("SELECT op_id, type, status, result FROM applied_ops WHERE seq = ?", (seq,)).fetchone()
                if row is not None and row["op_id"] != w.get("op_id"):
                    out.append(LostChange(seq, row["op_id"], row["type"], row["status"],
                                          what_changed(conn, row["result"])))
    return out
