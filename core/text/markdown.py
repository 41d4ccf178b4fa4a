"""Markdown to plain text: the one place crewlet's Markdown rules live.

Two readers, one set of rules:

* `plain_text(body)` — a whole page body as the words a reader sees, on one line: what the keyword
  index reads for a body and what a snippet is cut from. A tuned pass of regular expressions, each
  run only when its marker occurs: markdown-it-py reads a body about 5× slower (over the 56 MB of
  windows-driver-docs, measured by bench/plain_text_bench.py), and the index reads every body.
* `inline_to_plain(text)` — one line of inline Markdown (an H1 that becomes a page title) as plain
  text, parsed by markdown-it-py (CommonMark, the parser Textual renders pages with), which is exact
  about code spans, emphasis flanking, links and entities; a line is short (about 20 µs a title with
  markup, as the regexes it replaced took; a title without markup is not parsed at all).
* `find_h1(body)` — the first ATX H1 outside code fences and HTML comments, a line scan (the importer
  runs it over every file it reads).

Both readers share the backslash-escape rule (an escaped character is text, never markup:
`WM\\_PALETTECHANGED` is the identifier WM_PALETTECHANGED) and the reading of a reference link whose
definition is elsewhere (`[text][ref]` reads as its text).
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from .titles import clean_title

# -- rules both readers share ------------------------------------------------------------------------

# CommonMark's escapable characters: ASCII punctuation after a backslash
ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
# a reference link (`[text][ref]`, `[text][]`) whose definition is elsewhere in the document
REF_LINK = re.compile(r"\[([^\]\n]+)\]\[[^\]\n]*\]")

# -- bodies: the regex pass ----------------------------------------------------------------------------

# YAML front matter: a `---` block whose first line is a key (`title:`); a page that merely opens with a
# horizontal rule (`---`, a blank line, text) keeps its text
_FRONT_MATTER = re.compile(r"\A(?:\ufeff)?---[ \t]*\r?\n(?=[A-Za-z_][\w.-]*[ \t]*:).*?\r?\n(?:---|\.\.\.)[ \t]*"
                           r"(?:\r?\n|\Z)", re.S)
# escaped characters are held as private-use characters of the Basic Multilingual Plane until the markup
# is gone (one outside it would make every later pass read a four-byte-a-character string)
_HOLD_BASE = 0xE000
_HELD = re.compile("[\ue021-\ue07e]")
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
_IMAGE = re.compile(r"!\[([^\]\n]*)\]\([^)\n]*\)")
_LINK = re.compile(r"\[([^\]\n]*)\]\([^)\n]*\)")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^>\s]+)>")
# An HTML tag is markup only when it names an HTML element: `--version <previous version>` or
# `List<String>` is what the page says, and a snippet must never change what a command says.
_HTML_ELEMENTS = frozenset("""
    a abbr address article aside audio b base basefont bdi bdo blockquote body br button canvas caption center
    cite code col colgroup dd del details dfn dialog dir div dl dt em embed fieldset figcaption figure font
    footer form frame frameset h1 h2 h3 h4 h5 h6 head header hr html i iframe img input ins kbd label legend
    li link main mark menu menuitem meta nav noframes noscript ol optgroup option p param picture pre q rp rt
    ruby s samp script search section select small source span strike strong style sub summary sup svg table
    tbody td template textarea tfoot th thead title tr track tt u ul var video wbr
""".split())
_TAG = re.compile(r"</?(?:" + "|".join(sorted(_HTML_ELEMENTS, key=lambda n: (-len(n), n)))
                  + r")(?![A-Za-z0-9-])(?:\s[^<>]*)?/?>", re.I)
# code (a fence, a span) is literal: even `<div>` there is what a command or a listing says
# (read with a newline in front, as the line rules below are; a span is one backtick's, the common case)
_CODE_FENCE = re.compile(r"\n[ \t]*(`{3,}|~{3,})[^\n]*(?:\n(?![ \t]*\1)[^\n]*)*(?:\n[ \t]*\1[`~]*[ \t]*(?=\n|\Z))?")
_CODE_SPAN = re.compile(r"`[^`\n]+`")
_HELD_LT = chr(0xE000 + ord("<"))
_ADMONITION = re.compile(r"\[!(?:NOTE|TIP|IMPORTANT|WARNING|CAUTION)\]", re.I)
# an emphasis underscore: not inside a word (an identifier's underscores, IRP_MJ_READ, are kept)
# (the leading `_` first, so the engine scans for it; the look-behind then rules out a word before it)
_UNDERSCORE_EM = re.compile(r"_(?<!\w_)_{0,2}(?=[^\s_])([^_\n]*?[^\s_])?_{1,3}(?!\w)")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_ENTITY = re.compile(r"&(nbsp|amp|lt|gt|quot|#39|apos);")
_ENTITIES = {"nbsp": " ", "amp": "&", "lt": "<", "gt": ">", "quot": '"', "#39": "'", "apos": "'"}
# Rules for a whole line. The text is read with a newline in front, so a line's start is "\n" — a literal
# the regex engine scans for at memchr speed, where a multi-line `^` is tried at every character. Each
# replacement keeps the newline, so the next rule still sees the line.
_FENCE_LINE = re.compile(r"\n[ \t]*(?:`{3,}|~{3,})[^\n]*")
_REF_DEF = re.compile(r"\n[ \t]{0,3}\[[^\]\n]+\]:[ \t]*\S[^\n]*")
_HEADING = re.compile(r"\n[ \t]{0,3}#{1,6}[ \t]+")
_SETEXT = re.compile(r"\n[ \t]*(?:={2,}|-{3,}|\*{3,}|_{3,})[ \t]*(?=\n|\Z)")
_QUOTE = re.compile(r"\n[ \t]*(?:>[ \t]?)+")
_BULLET = re.compile(r"\n[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?")
_TABLE_RULE = re.compile(r"\n(?=[^\n]*\|)(?=[^\n]*-)[ \t|:-]+(?=\n|\Z)")


def _hold(m: re.Match[str]) -> str:
    return chr(_HOLD_BASE + ord(m.group(1)))


def _hold_lt(m: re.Match[str]) -> str:
    code = m.group(0)
    return code.replace("<", _HELD_LT) if "<" in code else code


def plain_text(markdown: str, *, one_line: bool = True) -> str:
    """The words of a Markdown body, on one line: markup, URLs and front matter removed, the text of
    links, emphasis, code and tables kept. Each rule runs only when its marker occurs at all.
    `one_line=False` leaves the whitespace as the rules left it (the same words: what the index reads,
    which never looks at whitespace, without the cost of collapsing it)."""
    if not markdown:
        return ""
    text = markdown
    if text.startswith(("---", "\ufeff---")):
        text = _FRONT_MATTER.sub("", text, count=1)
    code_lt = "<" in text and ("`" in text or "~~~" in text)
    held = "\\" in text
    if held or code_lt:  # an escaped character is text, never markup: held out of every rule below, released at the end
        if _HELD.search(text):  # the page's own private-use characters in the hold range: a space each
            text = _HELD.sub(" ", text)
        if held:
            text = ESCAPE.sub(_hold, text)
    text = "\n" + text
    if code_lt:  # a `<` in code is text too: held as an escaped character is
        if "```" in text or "~~~" in text:
            text = _CODE_FENCE.sub(_hold_lt, text)
        if "`" in text:
            text = _CODE_SPAN.sub(_hold_lt, text)
        code_lt = _HELD_LT in text
    if "<" in text:
        if "<!--" in text:
            text = _COMMENT.sub(" ", text)
        text = _AUTOLINK.sub(r"\1", text)
        text = _TAG.sub(" ", text)
    if "```" in text or "~~~" in text:
        text = _FENCE_LINE.sub("\n ", text)
    if "](" in text:
        text = _IMAGE.sub(r"\1", text)
        text = _LINK.sub(r"\1", text)
    if "][" in text:
        text = REF_LINK.sub(r"\1", text)
    if "]:" in text:
        text = _REF_DEF.sub("\n ", text)
    if "#" in text:
        text = _HEADING.sub("\n ", text)
    if "==" in text or "---" in text or "***" in text or "___" in text:
        text = _SETEXT.sub("\n ", text)
    if ">" in text:
        text = _QUOTE.sub("\n ", text)
    if "[!" in text:
        text = _ADMONITION.sub(" ", text)
    if "|" in text:
        if "--" in text:
            text = _TABLE_RULE.sub("\n ", text)
        text = text.replace("|", " ")
    text = _BULLET.sub("\n ", text)
    if "~~" in text:
        text = _STRIKE.sub(r"\1", text)
    if "*" in text:
        text = text.replace("*", "")  # emphasis markers; a bullet's star went with _BULLET
    if "_" in text:
        text = _UNDERSCORE_EM.sub(r"\1", text)
    if "`" in text:
        text = text.replace("`", "")
    if "&" in text:
        text = _ENTITY.sub(lambda m: _ENTITIES[m.group(1)], text)
    if code_lt and not held:
        text = text.replace(_HELD_LT, "<")
    if held:
        text = text.replace("\\", " ")  # a lone backslash (one that escapes nothing)
        for ch in set(_HELD.findall(text)):  # a page escapes a handful of distinct characters
            text = text.replace(ch, chr(ord(ch) - _HOLD_BASE))
    return " ".join(text.split()) if one_line else text


# -- one line of inline Markdown: markdown-it ------------------------------------------------------------

_ATTRS = re.compile(r"\s*\{#[^}]*\}\s*$")                    # `# Title {#custom-id}` (not CommonMark: ours)
_SPECIAL = re.compile(r"[\\`*_\[\]<>&{!~]")                 # a line without these is plain already


@lru_cache(maxsize=1)
def _inline_parser() -> Any:
    # imported on first use: a title with markup is rare, and the CLI should not pay for the import
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable("strikethrough")


def _words(tokens: list[Any], out: list[str]) -> None:
    for tok in tokens:
        if tok.type in ("text", "code_inline"):
            out.append(REF_LINK.sub(r"\1", tok.content) if tok.type == "text" and "][" in tok.content
                       else tok.content)
        elif tok.type == "image":        # its alt text, itself inline Markdown
            _words(tok.children or [], out)
        elif tok.type in ("softbreak", "hardbreak"):
            out.append(" ")
        # html_inline is dropped; link, emphasis and strikethrough open/close tokens carry no text


# what only the parser reads right: code, emphasis, links, HTML, entities, attributes, strikethrough, images
_PARSED = re.compile(r"[`*\[\]<>&{]|~~|!\[")
_LOOSE_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")   # an `_` without a letter or digit each side
_HELD_OUT = "\x00"


def _plain_inline(text: str) -> str | None:
    """The line as the parser would read it, when its only markup is backslash escapes, underscores
    inside words (IRP_MJ_READ, which CommonMark never reads as emphasis), a `!` that starts no image or a
    single `~`: the escapes resolved. None for anything else (the parser reads it). Most titles with
    markup are these (4,700 of 4,800 on windows-driver-docs), and the parser takes ~100 µs a line."""
    probe = ESCAPE.sub(_HELD_OUT, text)   # an escaped character is text; as a neighbour, not a letter
    if _PARSED.search(probe) or ("_" in probe and _LOOSE_UNDERSCORE.search(probe)):
        return None
    return ESCAPE.sub(r"\1", text)


def inline_to_plain(text: str) -> str:
    """A heading's inline Markdown reduced to the text a reader sees (a title: cleaned, one line)."""
    if not _SPECIAL.search(text):
        return clean_title(text)
    simple = _plain_inline(text)
    if simple is not None:
        return clean_title(simple)
    text = _ATTRS.sub("", text)
    out: list[str] = []
    for block in _inline_parser().parseInline(text):
        _words(block.children or [], out)
    return clean_title("".join(out))


# -- the first H1 of a body --------------------------------------------------------------------------------

_ATX_H1 = re.compile(r"^ {0,3}#(?:[ \t]+(.*?))?[ \t]*$")
_CLOSING = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_H1_SEARCH = re.compile(r"^ {0,3}#[ \t]+\S", re.MULTILINE)


def find_h1(body: str) -> tuple[str, int, int] | None:
    """The first ATX H1 outside code fences and HTML comments: (plain title, start, end) offsets of
    its line in `body` (end includes the newline). None when the body has none."""
    m = _H1_SEARCH.search(body)
    if m is None:
        return None
    prefix = body[:m.start()]
    if "```" not in prefix and "~~~" not in prefix and "<!--" not in prefix:
        start = m.start()
        nl = body.find("\n", start)
        end = len(body) if nl < 0 else nl + 1
        found = _h1_title(body[start:end].rstrip("\n"))
        if found:
            return found, start, end
    return _scan_h1(body)


def _h1_title(line: str) -> str | None:
    m = _ATX_H1.match(line)
    if not m or not m.group(1):
        return None
    text = m.group(1)
    return inline_to_plain(_CLOSING.sub("", text) if "#" in text else text) or None


def _scan_h1(body: str) -> tuple[str, int, int] | None:
    fence: str | None = None
    in_comment = False
    pos = 0
    n = len(body)
    while pos < n:
        nl = body.find("\n", pos)
        end = n if nl < 0 else nl + 1
        line = body[pos:end].rstrip("\n")
        if fence is not None:
            stripped = line.strip()
            if stripped.startswith(fence) and stripped.strip(fence[0]) == "":
                fence = None
        elif in_comment:
            if "-->" in line:
                in_comment = False
        else:
            f = _FENCE.match(line)
            if f:
                fence = f.group(1)
            elif line.lstrip().startswith("<!--") and "-->" not in line:
                in_comment = True
            elif line.lstrip(" ").startswith("#"):
                title = _h1_title(line)
                if title:
                    return title, pos, end
        pos = end
    return None
