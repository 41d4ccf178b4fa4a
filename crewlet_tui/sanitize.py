"""Text from pages is untrusted: make it inert before it reaches Rich, Textual or the terminal.

A body may hold terminal escape sequences (an agent copied them from a log), and a title may hold
something that looks like Rich markup (``[bold]``, ``[/]``) — a Markdown viewer once crashed on a
title like that (frogmouth #88). So every page-derived string the app shows passes through here:

* C0 controls (except newline and tab), DEL and C1 controls become visible placeholders — the
  Unicode "control pictures" (ESC shows as ␛) for C0/DEL, ``<U+009B>`` for C1 — so the bytes
  never reach the terminal and a reader can still see that something was there;
* a CR LF pair is a line end (kept as LF); a lone CR is shown as ␍;
* titles, authors, snippets and notes are single lines (newlines and tabs become spaces), and in
  them the bidi embedding, override and isolate controls (U+202A–U+202E, U+2066–U+2069), which
  reorder what a terminal shows after them, are made visible too (a body keeps them: right-to-left
  writing needs them, and the editor must not rewrite them);
* `markup_safe` additionally escapes Rich markup for the rare place a string is put into markup;
* `json_text` is the JSON every `--json` prints: C0 controls are escaped by JSON itself, and DEL,
  C1, the bidi controls and U+2028/U+2029 are escaped too (as \\u00XX: the data is unchanged, the
  terminal a script's output lands on never sees them raw).

Every CLI output path goes through here: plain output, `--json`, and the one line on stderr.
Nothing here changes what is stored: this is the display side only.
"""
from __future__ import annotations

import json
import re
from typing import Any

from rich.markup import escape as _rich_escape

from core.pages.model import CONTROL_RE
from rich.text import Text

_C0_PICTURE_BASE = 0x2400
DEL_PICTURE = "\u2421"
ESC_PICTURE = "\u241b"

# every code point we refuse to send to a terminal: C0 except TAB and LF, DEL, C1 (core's one rule)
_CONTROL_RE = CONTROL_RE
# one-line texts also show the bidi controls that reorder the rest of a line
_LINE_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# what JSON leaves raw that a terminal (or a JavaScript reader) would act on
_JSON_RAW_RE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def _picture(match: re.Match[str]) -> str:
    cp = ord(match.group(0))
    if cp < 0x20:
        return chr(_C0_PICTURE_BASE + cp)
    if cp == 0x7F:
        return DEL_PICTURE
    return f"<U+{cp:04X}>"


def has_controls(text: str) -> bool:
    """Does this text hold a character `clean_text` would replace (CR LF pairs aside)?"""
    return bool(_CONTROL_RE.search(text.replace("\r\n", "\n")))


def count_controls(text: str) -> int:
    return len(_CONTROL_RE.findall(text.replace("\r\n", "\n")))


def clean_text(text: str | None) -> str:
    """A multi-line text (a body, a comment, a diff) with every control made visible and inert."""
    if not text:
        return ""
    return _CONTROL_RE.sub(_picture, text.replace("\r\n", "\n"))


def clean_line(text: str | None) -> str:
    """A one-line text (a title, an author, a snippet, a note): controls made visible, line breaks
    and tabs folded into spaces."""
    if not text:
        return ""
    text = text.replace("\r\n", " ").replace("\n", " ").replace("\t", " ")
    return _LINE_RE.sub(_picture, text)


def markup_safe(text: str | None) -> str:
    """A one-line text ready to be interpolated into Rich markup."""
    return _rich_escape(clean_line(text))


def plain(text: str | None, style: str = "") -> Text:
    """A Rich Text built from a one-line string without parsing it as markup."""
    return Text(clean_line(text), style=style)


def plain_block(text: str | None, style: str = "") -> Text:
    return Text(clean_text(text), style=style)


def body_for_display(body: str | None) -> str:
    """A Markdown body as the viewer should parse it: controls made visible. (Raw HTML is kept as
    text by the parser the viewer uses, see widgets.page_view.)"""
    return clean_text(body)


def body_for_editing(body: str | None) -> str:
    """The editor never holds control characters either: they are shown — and, if the person saves,
    kept — as the visible symbols they are displayed as (the editor says so when it happens)."""
    return clean_text(body)


def json_text(data: Any, *, indent: int | None = 2) -> str:
    """JSON for `--json` output: valid, lossless, and inert on a terminal (see the module notes)."""
    text = json.dumps(data, ensure_ascii=False, indent=indent, default=str)
    # these code points can only occur inside JSON strings, where \\uXXXX means the same character
    return _JSON_RAW_RE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)
