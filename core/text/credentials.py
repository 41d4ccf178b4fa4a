"""Whether a text holds a credential (`credential_in`): shared by the diary's notes and the knowledge
bank's entries, so both refuse the same secrets the same way.

Credentials are recognised by the shapes their issuers give them, plus a secret-looking value written
after a key-like name (`api_key=`, `token:`, `password=`…). We measured Yelp's detect-secrets (1.5.0)
for this first: its line scanner reports a "high entropy string" for nearly every word of ordinary
prose ("Deploys go through make deploy" gave eleven), misses fine-grained GitHub tokens and `sk-proj-`
keys, and costs 0.45 s to import — a file scanner, not a check of one sentence. These patterns are the
part of it that fits, kept narrow on purpose: a refused fact is a fact lost, so a commit hash or a
UUID in prose is not a credential.

What is returned names the kind of credential only ("a GitHub token"), never the value: a caller puts it
in a refusal a model reads, a log or a terminal.
"""
from __future__ import annotations

import math
import re
from collections import Counter

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
