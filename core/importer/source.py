"""Reading one Markdown file: bytes to text, and the frontmatter block split off and parsed.

Frontmatter is YAML between a first line `---` and the next `---` (or `...`) line. It is parsed with
libyaml's CBaseLoader where available (several times faster than the pure-Python loader over tens of
thousands of files), which keeps every scalar the text it was written as: `title: 1.10` is '1.10', not
1.1, and `labels: [007, on]` is ['007', 'on'], not [7, True]. A block that does not parse is reported
with the file's own line number.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from ..pages.model import MAX_BODY_BYTES
from ..sections.pages import sizes_in_words
from .model import ImportProblem

MAX_FILE = MAX_BODY_BYTES
# the closing line, found from the newline before it: a literal "\n" is scanned for at memchr speed, where a
# multi-line `^` is tried at every character (all of a body whose `---` opens no block)
_CLOSE = re.compile(r"\n(?:---|\.\.\.)[ \t]*(?=\n|\Z)")
_LOADER = getattr(yaml, "CBaseLoader", yaml.BaseLoader)
_YAML_FIX = ("fix the YAML at that line (quote a value that holds ': ' or starts with a character YAML reserves, "
             "like ` @ % * & ! [ {)")


@dataclass(slots=True)
class Source:
    """A file as read: its frontmatter (a mapping), the raw frontmatter text, and the Markdown after it."""

    rel: str
    frontmatter: dict[str, Any] = field(default_factory=dict)
    fm_text: str | None = None
    body: str = ""
    body_line: int = 1          # the file line the body starts on


def decode(rel: str, data: bytes, limit: int = MAX_FILE) -> tuple[str | None, ImportProblem | None]:
    """UTF-8 text with line endings normalised and a byte-order mark dropped, or the problem. `limit`: the
    company's bound on a page body ([limits] page_body_bytes); a file within it holds a body within it."""
    limit = min(limit, MAX_FILE)
    if len(data) > limit:
        said, bound = sizes_in_words(len(data), limit)
        return None, ImportProblem("too_large", f"is {said}; a page holds at most {bound} (limits.page_body_bytes)",
                                   "split it into several files", [rel])
    if b"\x00" in data:
        return None, ImportProblem("not_text", "is not text (it holds NUL bytes)",
                                   "remove it from the tree, or rename it so it does not end in .md", [rel])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return None, ImportProblem("not_utf8", f"is not UTF-8 (byte {exc.start}, line {line})",
                                   "save it as UTF-8 in your editor", [rel], line)
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text, None


def split(rel: str, text: str) -> tuple[Source | None, ImportProblem | None]:
    """Split off and parse the frontmatter block (a file without one has an empty mapping)."""
    if not text.startswith("---"):
        return Source(rel, body=text), None
    first_end = text.find("\n")
    if first_end < 0 or text[3:first_end].strip():
        return Source(rel, body=text), None          # `---x` or a one-line file: not a block
    # the closing line: `---` or `...`, alone on its line
    m = _CLOSE.search(text, first_end)
    close = m.start() + 1 if m else -1
    after = min(m.end() + 1, len(text)) if m else len(text)
    if close < 0:
        # an opening `---` never closed is a thematic break at the top of a plain document
        return Source(rel, body=text), None
    fm_text = text[first_end + 1:close]
    body_line = text.count("\n", 0, after) + 1
    data: Any = fast_frontmatter(fm_text)
    if data is not None:
        return Source(rel, data, fm_text, text[after:], body_line), None
    try:
        data = yaml.load(fm_text, Loader=_LOADER) if fm_text.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = (mark.line + 2) if mark is not None else 1
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return None, ImportProblem("bad_yaml", f"frontmatter is not valid YAML at line {line}: {what}",
                                   _YAML_FIX, [rel], line)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return None, ImportProblem("bad_frontmatter",
                                   f"frontmatter is a {type(data).__name__}, not a mapping of fields",
                                   "write it as `key: value` lines (title:, space:, parent:, labels:)", [rel], 2)
    return Source(rel, {str(k): v for k, v in data.items()}, fm_text, text[after:], body_line), None


# -- the common case without a YAML parser ---------------------------------------------------------
# Most frontmatter is `key: plain text` lines, the odd `[a, b]` or `- item` list, and comments. Those are
# read here, exactly as the BaseLoader reads them (every scalar a string, an empty value ''), in a quarter of
# the time libyaml takes to build the same dict (or less: 17,600 blocks of the shared trees, 0.23 s against
# 0.87 s); anything else (quotes with escapes, block scalars, nesting, anchors, tags, continuation lines)
# returns None and goes to the real parser, which also finds and words every error.
USED_KEYS = frozenset({"title", "space", "parent", "labels", "trigger"})
_FM_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_./-]*(?: [A-Za-z0-9_./-]+)*")
_INDICATOR = frozenset("-?:,[]{}#&*!|>'\"%@`")
_NONPRINT = re.compile("[^\x0a\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _scalar(raw: str) -> tuple[bool, str]:
    """(ok, value) for one scalar as the BaseLoader reads it; ok False when unsure."""
    if not raw:
        return False, ""
    first = raw[0]
    if first == "'":
        inner = raw[1:-1]
        if len(raw) < 2 or raw[-1] != "'" or "'" in inner.replace("''", ""):
            return False, ""
        return True, inner.replace("''", "'")
    if first == '"':
        inner = raw[1:-1]
        if len(raw) < 2 or raw[-1] != '"' or '"' in inner or "\\" in inner:
            return False, ""
        return True, inner
    if first in _INDICATOR or ": " in raw or " #" in raw or raw.endswith(":"):
        return False, ""
    return True, raw


# a quoted item of a flow list, which may hold commas (`keywords: ["Debugger Engine, symbols"]`)
_FLOW_QUOTED = re.compile(r"""[ ]*("[^"\\]*"|'[^']*(?:''[^']*)*')[ ]*(?=,|\Z)""")


def _flow_parts(inner: str) -> list[str]:
    """The items of `[inner]`: split at commas, but a quoted item taken whole."""
    if '"' not in inner and "'" not in inner:
        return inner.split(",")
    parts: list[str] = []
    pos, n = 0, len(inner)
    while True:
        m = _FLOW_QUOTED.match(inner, pos)
        if m is not None:
            parts.append(m.group(1))
            end = m.end()
        else:
            end = inner.find(",", pos)
            end = n if end < 0 else end
            parts.append(inner[pos:end])
        if end >= n:
            return parts
        pos = end + 1


def _flow_list(raw: str) -> list[str] | None:
    inner = raw[1:-1].strip()
    if not inner:
        return []
    if any(ch in inner for ch in "[]{}"):
        return None
    out = []
    for part in _flow_parts(inner):
        part = part.strip()
        quoted = part[:1] in ("'", '"')
        if not quoted and any(ch in part for ch in "?:#"):
            return None                                # PyYAML is strict about these inside [ ]
        ok, value = _scalar(part)
        if not ok or ("," in value and not quoted):
            return None
        out.append(value)
    return out


_KNOWN_KEYS: dict[str, bool] = {}                    # key -> is it plain (a tree repeats a handful of keys)


def _key_ok(key: str) -> bool:
    ok = _KNOWN_KEYS.get(key)
    if ok is None:
        ok = _FM_KEY.fullmatch(key) is not None
        if len(_KNOWN_KEYS) < 4096:
            _KNOWN_KEYS[key] = ok
    return ok


def fast_frontmatter(fm_text: str) -> dict[str, Any] | None:
    """The frontmatter mapping when it is plain enough to read without YAML, else None.

    Lines are taken apart with str methods rather than a pattern per line: a key line is
    `key: value` (the key is what comes before the first ':', which no key holds; the value follows a
    run of spaces, trailing spaces dropped), an item line `- value` after some spaces; blank lines and
    comments are skipped. A plain value is checked here, anything else by `_scalar`."""
    if "\t" in fm_text or _NONPRINT.search(fm_text):
        return None
    out: dict[str, Any] = {}
    key: str | None = None                             # a key whose value is a block list being read
    items: list[str] | None = None
    indent = -1                                        # the indentation of that list's items
    known = _KNOWN_KEYS
    indicator = _INDICATOR
    for line in fm_text.split("\n"):
        if not line:
            continue
        first = line[0]
        if first == " " or first == "-":
            item = line.lstrip(" ") if first == " " else line
            if item[:1] != "-":
                stripped = item.strip()
                if not stripped or stripped[0] == "#":
                    continue                           # a blank line or a comment
                return None
            if key is None or item[1:2] != " ":
                return None
            raw = item[1:].strip(" ")
            if not raw:
                return None
            if raw[0] in indicator or ": " in raw or " #" in raw or raw[-1] == ":":
                ok, raw = _scalar(raw)
                if not ok:
                    return None
            if items is None:
                items, indent = [], len(line) - len(item)
                out[key] = items
            elif len(line) - len(item) != indent:
                return None                            # YAML reads a deeper `- x` as part of the item above
            items.append(raw)
            continue
        if first == "#" or first.isspace():
            stripped = line.strip()
            if not stripped or stripped[0] == "#":
                continue                               # a blank line or a comment
            return None
        k, colon, rest = line.partition(":")
        if not colon or (rest and rest[0] != " "):
            return None
        key_ok = known.get(k)
        if key_ok is None:
            key_ok = _key_ok(k)
        if not key_ok:
            return None
        raw = rest.strip(" ")
        key, items = None, None
        if not raw:
            out[k] = ""                                # the BaseLoader's empty scalar
            key = k
        elif raw[0] == "[" and raw[-1] == "]":
            lst = _flow_list(raw)
            if lst is None:
                return None
            out[k] = lst
        else:
            if raw[0] in indicator or ": " in raw or " #" in raw or raw[-1] == ":":
                ok, raw = _scalar(raw)
                if not ok:
                    return None
            out[k] = raw
    return out
