"""The seam between the apply engine and where a log's records are kept: what a log backend implements.

The engine (`engine.py`) applies any ordered log into the database; a backend keeps the records and
orders them. `core.log.FileLog` (one append-only file, appends serialised by flock) is the backend every
home has today; a second backend — NATS JetStream — implements exactly this Protocol and the engine does
not change. docs/architecture.md, "What a second log backend implements", says the same with its reasons.

Positions. Each record of a log has a `seq` (1, 2, 3 … with no gap) and a `Frame`: its `body` (the
canonical JSON bytes every reader decodes, `Record.from_body`), and `offset`/`end`, two integers that
place it in the backend — a frame starts where the one before it ends (`frame.offset == previous.end`),
and the first starts at 0. For the file log they are byte offsets; a backend that numbers messages may
use `offset = seq - 1, end = seq`. The database stores, for each log, the seq, `end`, `offset` and
`frame_digest(body)` of the last record it applied (`core.log.framing.Applied`), in the same transaction
as what that record changed.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..log import Record
from ..log.framing import Applied, Frame

# Who else applied the log furthest (the byte offset, and that node's name): asked by a backend that cuts
# an interrupted append before it cuts (the file log of a shared directory); others never call it.
Guard = Callable[[], tuple[int, str]]


@runtime_checkable
class LogBackend(Protocol):
    path: Path
    """What damage and refusals name (the file; for a remote backend, its stream's address)."""

    def append_frames(self, records: Sequence[Record], *, sync: bool = True, keep_through: int = 0,
                      guard: Guard | None = None) -> list[tuple[Record, Frame]]:
        """Append records in order, each given the next seq (`Record.at_seq`), and return each with its
        frame. Every refusal comes BEFORE a byte is written: a record over the size limit
        (`RecordTooLarge`), a log that disagrees with the database (`LogDamage`: it ends before
        `keep_through`, the `end` the database applied through), a log this process cannot write
        (`OSError`, `LogFailed`). An append either lands whole or raises saying how many of its records
        landed. With `sync` the records are durable before this returns."""
        ...

    def read_frames(self, after: int = 0, *, start_offset: int = 0, limit: int | None = None,
                    exact: bool = False) -> Iterator[tuple[Record, Frame]]:
        """Every record with seq > `after`, in order, from `start_offset` (the `end` of record `after`).
        With `exact`, the first record yielded must be `after + 1`. Damage is raised where it is met
        (`LogDamage`), after every good record before it was yielded; an interrupted append at the end
        ends the reading silently."""
        ...

    def locate(self, applied: Applied) -> Frame | None:
        """The frame of the last record the database applied, checked against the position it stored
        (seq, end, offset, digest); None when nothing was applied. Raises LogMismatch when the log no
        longer holds that very record there."""
        ...

    def last_seq(self) -> int:
        """The last seq the log holds now, other writers' appends included."""
        ...

    def locked(self) -> AbstractContextManager[Any]:
        """Hold off every writer of the log (every process) while the block runs: a join that moves the
        log, a repair that writes it anew. What it yields is the backend's own (the file log: its descriptor)."""
        ...

    def close(self) -> None:
        ...
