"""What a title is: the displayed form (`clean_title`), the address it is claimed at (`normalise_title`), and
what no title may hold (`title_problem`). The page store claims titles by these rules and the Markdown
reader (`inline_to_plain`) cleans a heading's text by the same one.
"""
from __future__ import annotations

import re
import unicodedata

_WS = re.compile(r"\s+")
TITLE_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f]")
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
