"""What answers spend, counted against the company's day, week and month.

The counter is the company's, not a node's: it is a ledger file beside the logs (`spend.jsonl` in the
home's log directory — the shared directory once the home joined one), so every node of a company
counts against the same windows. One JSON line per event, appended under an exclusive flock of
`spend.lock` (the lock `crewlet sync join` checks reaches every machine) and fsynced:

- `reserve`: before a call, the most it can spend (the prompt as counted here plus max_output_tokens),
  taken only when every window with a budget has room for it. Two asks at once cannot both take the
  last room; a reservation counts until it is settled, or until its call's deadline has long passed (a
  process killed mid-call).
- `spent`: after the call, exactly what the reply spent — the endpoint's own `usage` (a reply the model
  refused included: its prompt was billed), or, when the endpoint sent none or the reply never came
  whole (a timeout, a broken stream), the prompt counted here and the text that arrived, marked
  estimated. A call the endpoint answered with an error status, or that never connected, spent nothing.

Windows are calendar windows in UTC, the same on every node: the day from 00:00, the week from Monday
00:00, the month from the 1st. A window with no budget is counted and shown, never refused.
"""
from __future__ import annotations

import fcntl
import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, UTC
from pathlib import Path
from typing import Any

from ..clock import now_ms
from ..errors import Refused
from ..chat import WINDOWS, LlmSettings

LEDGER = "spend.jsonl"
LOCK = "spend.lock"
TAIL_BLOCK = 256 * 1024
RESERVATION_GRACE_MS = 120_000       # past its call's deadline, an unsettled reservation stops counting


def window_bounds(window: str, at_ms: int) -> tuple[int, int]:
    """(start, end) in ms of the UTC calendar window holding `at_ms`."""
    at = datetime.fromtimestamp(at_ms / 1000, tz=UTC)
    day = at.replace(hour=0, minute=0, second=0, microsecond=0)
    if window == "day":
        start, end = day, day + timedelta(days=1)
    elif window == "week":
        start = day - timedelta(days=day.weekday())
        end = start + timedelta(days=7)
    elif window == "month":
        start = day.replace(day=1)
        end = (start + timedelta(days=32)).replace(day=1)
    else:
        raise ValueError(window)
    return int(start.timestamp() * 1000), int(end.timestamp() * 1000)


@dataclass
class Window:
    name: str                     # day | week | month
    start: int                    # ms, UTC
    end: int                      # ms: when it opens again
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reserved: int = 0             # calls in flight, at their most
    answers: int = 0              # calls recorded in it
    budget: int | None = None

    @property
    def spent(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def room(self) -> int | None:
        return None if self.budget is None else max(0, self.budget - self.spent - self.reserved)

    def to_json(self) -> dict[str, Any]:
        return {"window": self.name, "start": self.start, "end": self.end, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "spent": self.spent, "reserved": self.reserved,
                "answers": self.answers, "budget": self.budget, "room": self.room}


class NoRoom(Refused):
    """A window with a budget cannot hold this call: refused before anything is sent."""

    code = "over_budget"

    def __init__(self, message: str, *, window: Window, needed: int) -> None:
        super().__init__(message, window=window.name, needed=needed, spent=window.spent, budget=window.budget,
                         opens_at=window.end)
        self.window, self.needed = window, needed


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


class Ledger:
    """The company's spend ledger, as seen from one node's home."""

    def __init__(self, log_dir: Path, node_id: str = "") -> None:
        self.file = log_dir / LEDGER
        self.lock_file = log_dir / LOCK
        self.node_id = node_id

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.lock_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)             # closing the descriptor releases the lock

    def _append(self, event: dict[str, Any]) -> None:
        line = (json.dumps(event, separators=(",", ":"), sort_keys=True) + "\n").encode("utf-8")
        fd = os.open(self.file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def events(self, since_ms: int) -> list[dict[str, Any]]:
        """Every event at or after `since_ms` (a day earlier, for clocks of other machines), read from the
        end of the ledger backwards so its length never matters. A torn or foreign line is skipped."""
        try:
            f = self.file.open("rb")
        except FileNotFoundError:
            return []
        out: list[dict[str, Any]] = []
        margin = since_ms - 86_400_000
        with f:
            end = f.seek(0, os.SEEK_END)
            carry = b""
            while end > 0:
                start = max(0, end - TAIL_BLOCK)
                f.seek(start)
                block = f.read(end - start) + carry
                lines = block.split(b"\n")
                carry = lines.pop(0) if start > 0 else b""
                older = False
                for raw in reversed(lines):
                    event = _parse(raw)
                    if event is None:
                        continue
                    if event["at"] < margin:
                        older = True
                        break
                    out.append(event)
                if older:
                    break
                end = start
        out.reverse()
        return out

    def windows(self, settings: LlmSettings | None, at_ms: int | None = None) -> list[Window]:
        at = now_ms() if at_ms is None else at_ms
        return self._windows(settings, at, self.events(min(window_bounds(w, at)[0] for w in WINDOWS)))

    def _windows(self, settings: LlmSettings | None, at: int, events: list[dict[str, Any]]) -> list[Window]:
        out = []
        settled = {e["id"] for e in events if e.get("kind") == "spent"}
        for name in WINDOWS:
            start, end = window_bounds(name, at)
            w = Window(name, start, end, budget=settings.budget(name) if settings is not None else None)
            for e in events:
                if not start <= e["at"] < end:
                    continue
                if e.get("kind") == "spent":
                    w.prompt_tokens += int(e.get("in", 0))
                    w.completion_tokens += int(e.get("out", 0))
                    w.answers += 1
                elif e.get("kind") == "reserve" and e["id"] not in settled and int(e.get("until", 0)) > at:
                    w.reserved += int(e.get("tokens", 0))
            out.append(w)
        return out

    def reserve(self, settings: LlmSettings, needed: int, *, actor: str | None, at_ms: int | None = None) -> str:
        """Take room for a call of at most `needed` tokens, or refuse (NoRoom) naming the first window
        without it. Returns the reservation's id, which `record` settles."""
        at = now_ms() if at_ms is None else at_ms
        with self._locked():
            for w in self.windows(settings, at):
                if w.budget is None or w.room is None or needed <= w.room:
                    continue
                if needed > w.budget:
                    message = (f"the company's {w.name} window allows {w.budget:,} tokens and one answer needs up "
                               f"to {needed:,} (its sources and question, and max_output_tokens) — raise "
                               f"[providers.llm] budget_tokens_{w.name}, or lower max_output_tokens or "
                               "max_source_tokens")
                else:
                    busy = f", {w.reserved:,} held by answers being written" if w.reserved else ""
                    message = (f"the company's {w.name} window has no room: {w.spent:,} of {w.budget:,} tokens spent"
                               f"{busy}, and this answer needs up to {needed:,} — it opens again at {_when(w.end)} "
                               f"(or raise [providers.llm] budget_tokens_{w.name})")
                raise NoRoom(message, window=w, needed=needed)
            rid = uuid.uuid4().hex
            until = at + int(settings.timeout_s * 1000) + RESERVATION_GRACE_MS
            self._append({"v": 1, "kind": "reserve", "id": rid, "at": at, "tokens": needed, "until": until,
                          "node": self.node_id, "actor": actor})
        return rid

    def record(self, reservation: str | None, prompt_tokens: int, completion_tokens: int, *, reported: bool,
               actor: str | None, outcome: str, model: str, at_ms: int | None = None) -> None:
        """What a call spent (settling its reservation)."""
        event = {"v": 1, "kind": "spent", "id": reservation or uuid.uuid4().hex,
                 "at": now_ms() if at_ms is None else at_ms, "in": max(0, int(prompt_tokens)),
                 "out": max(0, int(completion_tokens)), "reported": bool(reported), "outcome": outcome,
                 "model": model, "node": self.node_id, "actor": actor}
        with self._locked():
            self._append(event)


def _parse(raw: bytes) -> dict[str, Any] | None:
    raw = raw.strip()
    if not raw:
        return None
    try:
        event = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(event, dict) or not isinstance(event.get("at"), int) or not isinstance(event.get("id"), str):
        return None
    return event
