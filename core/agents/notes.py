"""What a diary note may be: one declarative fact, within a bound, holding no credential.

Each refusal names why and how to write the note instead, and never repeats what it refused (a
refused credential must not come back in an error a model reads, a log or a terminal).

Credentials are recognised by the shapes their issuers give them, plus a secret-looking value written
after a key-like name (`api_key=`, `token:`, `password=`…). We measured Yelp's detect-secrets (1.5.0)
for this first: its line scanner reports a "high entropy string" for nearly every word of ordinary
prose ("Deploys go through make deploy" gave eleven), misses fine-grained GitHub tokens and `sk-proj-`
keys, and costs 0.45 s to import — a file scanner, not a check of one sentence. These patterns are the
part of it that fits, kept narrow on purpose: a refused fact is a fact lost, so a commit hash or a
UUID in prose is not a credential.
"""
from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter

from ..errors import Invalid

# One fact fits in a sentence or two; 500 characters is about 80 words. A longer note is a summary or a
# page, and belongs in the knowledge base (write_page), where people can read and correct it.
MAX_NOTE_CHARS = 500

# shapes an issuer gives its credentials: (what it is, pattern)
_SHAPES: list[tuple[str, re.Pattern[str]]] = [
    ("a private key (PEM)", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")),
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b")),
    ("a GitHub token", re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}")),
    ("a GitHub fine-grained token", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}")),
    ("a Slack token", re.compile(r"\bxox[abposer]-[A-Za-z0-9-]{10,}")),
    ("an API secret key (sk-…)", re.compile(r"\bsk-[A-Za-z0-9_-]{20,}")),
    ("a Stripe key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("an Atlassian API token", re.compile(r"\bATATT[A-Za-z0-9_=-]{20,}")),
    ("a JSON Web Token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("a password in a URL", re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]+:[^/\s@]{3,}@")),
    ("a bearer token", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{20,}")),
]

# a value written after a key-like name; groups: the name, the separator, the value
_ASSIGNED = re.compile(
    r"(?i)\b(api[_-]?key|apikey|access[_-]?key(?:[_-]?id)?|secret(?:[_-]?key)?|client[_-]?secret|"
    r"(?:auth|access|refresh|bearer|api)?[_-]?token|password|passwd|pwd|passphrase)"
    r"[\"']?\s*([:=])\s*[\"'`]?([^\s\"'`,;)\]}]+)")
_PASSWORD_NAMES = ("password", "passwd", "pwd", "passphrase")
# what a value that only points at a secret looks like: a variable, a template, a redaction
_PLACEHOLDER = re.compile(r"^(?:[$<{%*]|\.\.\.|x+$|\*+$|redacted|changeme|example|your[_-]|none$|null$|"
                          r"env:|vault:|secret:|ref:)", re.IGNORECASE)
_HEX = re.compile(r"[0-9a-fA-F]{20,}")
_KEY_ALPHABET = re.compile(r"[A-Za-z0-9+/=_.-]{20,}")


def _entropy(value: str) -> float:
    """Shannon entropy in bits a character."""
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _secret_looking(name: str, separator: str, value: str) -> bool:
    if _PLACEHOLDER.match(value):
        return False
    if name.lower() in _PASSWORD_NAMES:
        # any real password after "password=" is one; after "password:" a plain lower-case word is prose
        # ("the password: stored in Vault")
        return len(value) >= 4 and (separator == "=" or not value.isalpha() or not value.islower())
    if _HEX.fullmatch(value):
        return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
    if _KEY_ALPHABET.fullmatch(value):
        return (any(c.isupper() for c in value) and any(c.islower() for c in value)
                and any(c.isdigit() for c in value) and _entropy(value) >= 3.5)
    return False


def credential_in(text: str) -> str | None:
    """What kind of credential the text seems to hold ("an AWS access key id"), or None."""
    for what, pattern in _SHAPES:
        if pattern.search(text):
            return what
    for m in _ASSIGNED.finditer(text):
        if _secret_looking(m.group(1), m.group(2), m.group(3)):
            return f"a secret value after '{m.group(1)}'"
    return None


_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+\S")


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
    items = sum(1 for line in note.splitlines() if _LIST_ITEM.match(line))
    if items >= 2:
        raise Invalid(f"the note reads as a list of {items} items — a note is one fact: remember each item as "
                      "its own note", code="note_is_list", items=items)
    what = credential_in(note)
    if what is not None:
        raise Invalid(f"the note looks like it holds a credential ({what}) — a diary never keeps secrets: note "
                      "where the secret is kept instead (e.g. 'the deploy token is in Vault under ci/deploy'), "
                      "and rotate it if it was real", code="note_credential", kind=what)
    return note
