"""How the app says an entry (spec 003): its kind, status and tier coloured, its age on the bank's calendar, each
citation where it points and what its last check found. Shared by the page screen's list of entries and the entry
screen, so both say an entry alike. Everything an agent or a person wrote is made inert first (sanitize.py).

Ages are on the bank's calendar (`core.clock.calendar_now_ms`: CREWLET_NOW for drills, tests and screenshots), as
the CLI and the MCP tools say them, so "3 h ago" reads the same on every surface.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text

from core.bank.trust import GROUNDED, HUMAN_VERIFIED, ago
from core.clock import calendar_now_ms
from core.pages.entry_model import (ARCHIVED, CHANGED, CONSOLIDATED, DISPUTED, GONE, HOLDING, PROPOSED, STANDING,
                                    SUPERSEDED)

from .error_words import error_text
from .sanitize import clean_line

if TYPE_CHECKING:
    from core.bank.entries import Entry
    from core.bank.trust import CitationState

TIER_STYLE = {HUMAN_VERIFIED: "bold green", GROUNDED: "green"}          # UNGROUNDED: yellow
STATUS_STYLE = {PROPOSED: "cyan", STANDING: "", CONSOLIDATED: "", DISPUTED: "bold red", SUPERSEDED: "dim",
                ARCHIVED: "dim"}
TIER_WORDS = {HUMAN_VERIFIED: "verified", GROUNDED: "grounded"}       # UNGROUNDED: "ungrounded"


def now_ms() -> int:
    """Now on the bank's calendar."""
    return calendar_now_ms()


def age(at_ms: int | None, now: int) -> str:
    return ago(now - at_ms) if at_ms else "—"


def tier_text(tier: str) -> Text:
    return Text(tier, style=TIER_STYLE.get(tier, "yellow"))


def status_text(status: str) -> Text:
    return Text(status, style=STATUS_STYLE.get(status, ""))


def first_line(body: str) -> str:
    """The body's first line, made inert (an entry is one fact, most often one line)."""
    line = next((x for x in body.splitlines() if x.strip()), "")
    return clean_line(line.strip())


def list_row(entry: Entry, now: int, *, with_status: bool = False) -> Text:
    """Two lines for the page's list: kind, (status,) tier and age, then the body's first line, cut to the width
    it gets (an ellipsis where it is cut)."""
    head = Text(no_wrap=True, overflow="ellipsis")
    head.append(entry.kind, style="bold")
    if with_status:
        head.append("  ")
        head.append_text(status_text(entry.status))
    head.append("  ")
    head.append_text(tier_text(entry.tier))
    head.append(f"  {age(entry.created_at, now)}", style="dim")
    if entry.corroborations:
        head.append(f"  +{entry.corroborations}", style="dim")
    body = Text("  " + first_line(entry.body), no_wrap=True, overflow="ellipsis")
    return Text("\n", no_wrap=True, overflow="ellipsis").join([head, body])


def citation_where(citation: dict[str, Any]) -> str:
    """Where a citation points, in one line: `server:src/cache.py lines 1–3 at 1a2b3c4` or `issue acme/api#12`."""
    if "path" in citation:
        lines = citation.get("lines") or []
        span = ""
        if len(lines) == 2:
            span = f" line {lines[0]}" if lines[0] == lines[1] else f" lines {lines[0]}–{lines[1]}"
        commit = str(citation.get("commit") or "")
        at = f" at {commit[:7]}" if commit else ""
        return clean_line(f"{citation.get('repository')}:{citation.get('path')}{span}{at}")
    if "link" in citation:
        kind = str(citation.get("kind") or "link").replace("_", " ")
        outside = " (from outside the company)" if citation.get("external") else ""
        return clean_line(f"{kind} {citation.get('link')}{outside}")
    return "a citation of no shape crewlet knows"


def check_style(state: CitationState) -> str:
    if state.changed_since or state.result in (CHANGED, GONE):
        return "bold red" if state.result == GONE else "yellow"
    if state.result in HOLDING:
        return "green"
    return "yellow"                                                    # not read yet


def citation_lines(state: CitationState, now: int) -> Text:
    """One citation: where it points, its quote, what its last check found and how long ago ("held, checked 3 h ago
    at 1a2b3c4"), where a recheck carried it, and how many checks it had."""
    out = Text()
    out.append(f"{state.index}. ", style="bold")
    out.append(citation_where(state.citation) + "\n")
    quote = state.citation.get("quote")
    if quote:
        out.append(f"   “{clean_line(' '.join(str(quote).split()))}”\n", style="italic dim")
    out.append("   ")
    out.append(state.said(now), style=check_style(state))
    if len(state.checks) > 1:
        out.append(f"  ({len(state.checks)} checks)", style="dim")
    out.append("\n")
    anchor = state.anchor or {}
    if anchor.get("path"):
        lines = anchor.get("lines") or []
        span = f" lines {lines[0]}–{lines[1]}" if len(lines) == 2 else ""
        out.append(f"   now at {clean_line(str(anchor['path']))}{span}\n", style="dim")
    if state.message and state.result not in HOLDING:
        out.append(f"   {clean_line(state.message)}\n", style="dim")
    return out


def refusal_words(error: BaseException, handle: str | None) -> str:
    """A refused write in one line, as the CLI says it: the engine's words and, where the app's actor may not do it
    (an agent refused a person's action), the step a person takes (the CLI says "leave out --as")."""
    words = f"refused: {error_text(error)}"
    if getattr(error, "code", None) == "forbidden" and handle:
        words += f" (this app acts as {clean_line(handle)}: open it --as a person to act as one)"
    return words
