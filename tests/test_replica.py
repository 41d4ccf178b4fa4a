"""The apply engine (core/replica) against its seam: the file log is one LogBackend, and a second backend
that keeps its records elsewhere — here in memory, numbering them as a message stream does (offset seq-1,
end seq) — is applied by the same engine into the same rows, with the same refusals; a record the second
backend skipped is damage the engine itself names, after every good record before it is applied."""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import REPLAYED_TABLES, create_rec, move_rec, pid, rec, save_rec, table_rows, trash_rec

from core.log import FileLog, LogGap, LogMismatch, Record
from core.log.framing import Applied, Frame, frame_digest
from core.pages import applier
from core.replica import engine
from core.replica.backend import LogBackend
from core.store import connect


class MessageLog:
    """Records kept in memory as a numbered stream: no byte offsets, no flock, nothing of the file log."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.frames: list[tuple[Record, Frame]] = []
        self.skip: set[int] = set()          # seqs a retention removed: never yielded

    def append_frames(self, records: Sequence[Record], *, sync: bool = True, keep_through: int = 0,
                      guard: object = None) -> list[tuple[Record, Frame]]:
        if keep_through > len(self.frames):
            raise LogMismatch(self.path, len(self.frames), None, "the stream ends before the database's position")
        bodies = [r.body() for r in records]          # every refusal before anything is kept
        out = []
        for r, body in zip(records, bodies):
            seq = len(self.frames) + 1
            pair = (r.at_seq(seq), Frame(seq, body, seq - 1, seq))
            self.frames.append(pair)
            out.append(pair)
        return out

    def read_frames(self, after: int = 0, *, start_offset: int = 0, limit: int | None = None,
                    exact: bool = False) -> Iterator[tuple[Record, Frame]]:
        for rec_, frame in self.frames[after:]:
            if frame.seq not in self.skip:
                yield Record.from_body(frame.body, frame.seq), frame

    def locate(self, applied: Applied) -> Frame | None:
        if applied.nothing:
            return None
        frame = self.frames[applied.seq - 1][1]
        if frame.end != applied.end or (applied.digest and frame_digest(frame.body) != applied.digest):
            raise LogMismatch(self.path, applied.end, applied.seq, "another record at the database's position")
        return frame

    def last_seq(self) -> int:
        return len(self.frames)

    @contextmanager
    def locked(self) -> Iterator[None]:
        yield

    def close(self) -> None:
        pass


def _records() -> list[Record]:
    ids = [pid() for _ in range(4)]
    out = [create_rec("ENG", f"Page {i}", f"body {i}", page_id=p) for i, p in enumerate(ids)]
    out += [save_rec(ids[0], "again", 1), save_rec(ids[0], "stale", 1), move_rec(ids[1], ids[0]), trash_rec(ids[2]),
            rec("page.rename", page_id=ids[3], title="Page 1"),                       # title_taken
            rec("page.save", page_id=ids[1], body="no base revision"),                  # malformed
            rec("comment.add", comment_id=pid(), page_id=ids[3], body="a remark")]
    return out


def test_the_file_log_and_a_message_log_are_both_backends(tmp_path):
    with FileLog(tmp_path / "pages.log") as flog:
        assert isinstance(flog, LogBackend)
    assert isinstance(MessageLog("nats://stream/pages"), LogBackend)


def test_a_second_backend_is_applied_by_the_same_engine_into_the_same_rows(tmp_path):
    records = _records()
    mlog = MessageLog("nats://stream/pages")
    with FileLog(tmp_path / "pages.log") as flog:
        flog.append([replace(r, seq=0) for r in records], sync=False)
        mlog.append_frames([replace(r, seq=0) for r in records])
        by_file, by_message = connect(tmp_path / "file.db"), connect(tmp_path / "message.db")
        decided_file: dict = {}
        decided_message: dict = {}
        assert applier.catch_up(by_file, flog, batch=4, outcomes=decided_file) == len(records)
    assert engine.catch_up(by_message, mlog, applier.PAGES, batch=4, outcomes=decided_message) == len(records)
    for table in REPLAYED_TABLES:
        if table != "log_position":            # where each is on its own log: bytes there, messages here
            assert table_rows(by_file, table) == table_rows(by_message, table), table
    assert {k: (d.status, d.code) for k, d in decided_file.items()} == \
        {k: (d.status, d.code) for k, d in decided_message.items()}
    assert {d.code for d in decided_message.values()} >= {"stale_revision", "title_taken", "malformed"}
    # the position names the message: its seq, and end = seq
    assert engine.position(by_message, applier.APPLIER) == (len(records), len(records))
    stream = engine.Stream("pages", mlog, applier.PAGES)
    stream.verify(by_message, stamp=True)     # the stream still holds the very record applied last
    assert stream.catch_up(by_message) == 0


def test_a_skipped_record_is_damage_after_every_good_record_before_it(tmp_path):
    records = _records()
    mlog = MessageLog("nats://stream/pages")
    mlog.append_frames([replace(r, seq=0) for r in records])
    mlog.skip = {6}                                 # removed by retention: the consumer goes from 5 to 7
    conn = connect(tmp_path / "x.db")
    with pytest.raises(LogGap) as exc:
        engine.catch_up(conn, mlog, applier.PAGES)
    assert (exc.value.expected, exc.value.found) == (6, 7)
    assert engine.position(conn, applier.APPLIER)[0] == 5      # the good records are applied, none past the gap
    with pytest.raises(LogGap):
        engine.catch_up(conn, mlog, applier.PAGES)               # and it stays damage: nothing is applied past it
    assert engine.position(conn, applier.APPLIER)[0] == 5


def test_an_append_is_refused_before_anything_is_kept_when_the_database_is_past_the_log(tmp_path):
    mlog = MessageLog("nats://stream/pages")
    mlog.append_frames([create_rec("ENG", "One")])
    conn = connect(tmp_path / "x.db")
    stream = engine.Stream("pages", mlog, applier.PAGES)
    assert stream.catch_up(conn) == 1
    mlog.frames.clear()                            # the stream was replaced behind the node's back
    with pytest.raises(LogMismatch):
        stream.append(conn, [create_rec("ENG", "Two")])
    assert mlog.frames == []
