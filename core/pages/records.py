"""The page records, built in one place: `KnowledgeBase` and the importer both write through these, so
a payload has one shape whoever writes it (the applier reads exactly these keys).

Builders check nothing — the writer has asked the rules, and the applier decides what depends on order.
They only shape: a note is stripped and left out when empty, labels are trimmed, lower-cased,
de-duplicated and sorted (what the applier stores, and what Confluence answers with).
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..log import Record


def normalise_labels(labels: Iterable[str]) -> list[str]:
    return sorted({str(lab).strip().lower() for lab in labels if str(lab).strip()})


def _note(payload: dict[str, Any], message: str | None) -> dict[str, Any]:
    if message and message.strip():
        payload["message"] = message.strip()
    return payload


def page_create(actor: str, *, page_id: str, container: str, title: str, body: str, parent_id: str | None,
                message: str | None = None, labels: Iterable[str] = (), op_id: str | None = None) -> Record:
    payload: dict[str, Any] = {"page_id": page_id, "container": container, "title": title, "body": body,
                               "parent_id": parent_id}
    _note(payload, message)
    shaped = normalise_labels(labels)
    if shaped:
        payload["labels"] = shaped
    return Record.new("page.create", actor, payload, op_id=op_id)


def page_save(actor: str, *, page_id: str, base_revision: int, body: str, message: str | None = None,
              op_id: str | None = None) -> Record:
    payload = _note({"page_id": page_id, "base_revision": int(base_revision), "body": body}, message)
    return Record.new("page.save", actor, payload, op_id=op_id)


def page_rename(actor: str, *, page_id: str, title: str, op_id: str | None = None) -> Record:
    return Record.new("page.rename", actor, {"page_id": page_id, "title": title}, op_id=op_id)


def page_labels(actor: str, *, page_id: str, labels: Iterable[str], op_id: str | None = None) -> Record:
    """Attach labels (never detaches: the applier adds them to those the page has)."""
    return Record.new("page.labels", actor, {"page_id": page_id, "labels": normalise_labels(labels)}, op_id=op_id)
