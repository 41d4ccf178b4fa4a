"""Repeats by meaning, before an entry is written (spec 003, "Repeats before write"): entries in use nearer
than KNOWLEDGE_SIMILARITY_THRESHOLD to a new body are returned to the writer, with nothing written, unless it
says the fact is distinct (`distinct: true`) or the write supersedes one. An exact repeat is folded apart, as a
corroboration (EntryBank.add)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import CrewletError

if TYPE_CHECKING:
    from .entries import Entry


class SimilarEntries(CrewletError):
    """Nothing written: entries in the bank say nearly the same. `similar`: (entry, similarity), nearest first."""

    code = "similar_entries"

    def __init__(self, message: str, *, similar: list[tuple[Entry, float]], **details: Any) -> None:
        super().__init__(message, fix="if yours is a different fact, write it again saying it is distinct; if it "
                                      "corrects one of them, supersede that entry", **details)
        self.similar = similar
