"""What a diary note may be: one declarative fact, within a bound, holding no credential.

Each refusal names why and how to write the note instead, and never repeats what it refused (a
refused credential must not come back in an error a model reads, a log or a terminal).

The credential detector (`core.text.credentials`) and the list rule (`core.text.claims.list_items`) live
on floor 0, shared with the knowledge bank's entries, so a note and an entry refuse the same things alike.
"""
from __future__ import annotations

import unicodedata

from ..errors import Invalid
from ..text.claims import list_items
from ..text.credentials import credential_in

__all__ = ["MAX_NOTE_CHARS", "check_note", "credential_in"]

# One fact fits in a sentence or two; 500 characters is about 80 words. A longer note is a summary or a
# page, and belongs in the knowledge base (write_page), where people can read and correct it.
MAX_NOTE_CHARS = 500


def check_note(text: str) -> str:
    """The note as it is kept (surrounding whitespace removed), or Invalid naming why not."""
    if not isinstance(text, str):
        raise Invalid("a note is text — write the fact you want to keep", code="note_invalid")
    note = text.strip()
    if not note:
        raise Invalid("the note is empty — write the one fact you want to keep, e.g. "
                      "'Deploys to staging need the VPN'", code="note_empty")
    if len(note) > MAX_NOTE_CHARS:
        raise Invalid(f"the note is {len(note):,} characters, over the bound of {MAX_NOTE_CHARS} — a note is one "
                      "declarative fact in a sentence or two: keep one fact per note, and put longer knowledge in a "
                      "page of the knowledge base", code="note_too_long", chars=len(note), bound=MAX_NOTE_CHARS)
    controls = [c for c in note if unicodedata.category(c) in ("Cc", "Cf") and c not in "\n\t"]
    if controls:
        raise Invalid(f"the note holds {len(controls)} control or invisible character(s) (the first U+"
                      f"{ord(controls[0]):04X}) — write it as plain text", code="note_invalid")
    items = list_items(note)
    if items >= 2:
        raise Invalid(f"the note reads as a list of {items} items — a note is one fact: remember each item as "
                      "its own note", code="note_is_list", items=items)
    what = credential_in(note)
    if what is not None:
        raise Invalid(f"the note looks like it holds a credential ({what}) — a diary never keeps secrets: note "
                      "where the secret is kept instead (e.g. 'the deploy token is in Vault under ci/deploy'), "
                      "and rotate it if it was real", code="note_credential", kind=what)
    return note
