"""Small display helpers shared by the screens: times (against the app's clock), counts, diffs."""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import datetime

from rich.text import Text

from core.pages.model import line_diff as core_line_diff

from .sanitize import clean_line

Clock = Callable[[], float]  # seconds since the epoch, like time.time


def system_clock() -> float:
    return time.time()


def when(ms: int | None) -> str:
    """An instant in local time (a screenshot run sets TZ so it is the same everywhere)."""
    if not ms:
        return "—"
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M")


def ago(ms: int | None, clock: Clock) -> str:
    if not ms:
        return ""
    seconds = max(0, int(clock() - ms / 1000))
    if seconds < 60:
        return "just now"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return ""  # pragma: no cover


def when_ago(ms: int | None, clock: Clock) -> str:
    if not ms:
        return "—"
    rel = ago(ms, clock)
    return f"{when(ms)} ({rel})" if rel else when(ms)


def plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else (words or word + 's')}"


def diff_style(line: str) -> str:
    if line.startswith("+++") or line.startswith("---"):
        return "bold"
    if line.startswith("+"):
        return "green"
    if line.startswith("-"):
        return "red"
    if line.startswith("@@"):
        return "cyan"
    if line.startswith("title:"):
        return "yellow"
    return ""


def diff_text(lines: Iterable[str], *, empty: str = "(no difference)") -> Text:
    """A coloured line diff: + green, - red, @@ cyan. Each line is made inert first."""
    out = Text()
    any_line = False
    for line in lines:
        any_line = True
        out.append(clean_line(line) + "\n", style=diff_style(line))
    if not any_line:
        out.append(empty, style="dim")
    return out


line_diff = core_line_diff
