"""The log on NATS JetStream (core/log/jetstream.py) against a real nats-server (tests/nats_server.py):
order and exactly-once through Nats-Msg-Id and Nats-Expected-Last-Sequence, gaps as damage, stream
settings checked, refusals before anything is published."""
from __future__ import annotations

import threading
import time

import pytest

from core.config import LogSettings
from core.log import LogGap, Record
from core.log.jetstream import (Connection, JetStreamLog, LogUnreachable, PayloadTooLarge, StreamRefused, StreamWant,
                                stream_name, subject_of)


def settings(url: str, **kw) -> LogSettings:
    return LogSettings(backend="jetstream", url=tuple(url.split(",")), **kw)


def open_log(url: str, *, log: str = "pages", create: bool = True, want: StreamWant | None = None) -> JetStreamLog:
    conn = Connection(settings(url))
    conn.connect()
    conn.ensure_stream(want or StreamWant(stream_name("crewlet", log), subject_of("crewlet", log), 1, 600), create=create)
    return JetStreamLog(conn, "crewlet", log)


def recs(n: int, tag: str = "w") -> list[Record]:
    return [Record.new("comment.add", "alex", {"body": f"{tag} {i}"}) for i in range(n)]


def test_records_land_in_order_as_one_message_each_and_read_back(nats_server):
    with open_log(nats_server.url) as flog:
        written = flog.append_frames(recs(5))
        assert [r.seq for r, _ in written] == [1, 2, 3, 4, 5]
        assert [(f.seq, f.offset, f.end) for _, f in written] == [(s, s - 1, s) for s in range(1, 6)]
        more = flog.append_frames(recs(3, "x"))
        assert [r.seq for r, _ in more] == [6, 7, 8]
        got = list(flog.read_frames(after=2, start_offset=2, exact=True))
        assert [r.seq for r, _ in got] == [3, 4, 5, 6, 7, 8]
        assert [r.payload["body"] for r, _ in got] == ["w 2", "w 3", "w 4", "x 0", "x 1", "x 2"]
        assert [f.body for _, f in got] == [r.body() for r, _ in written[2:] + more]
        assert list(flog.read_frames(after=8, start_offset=8, exact=True)) == []
        assert flog.last_seq() == 8 and flog.frame_at(4).seq == 5


def test_a_retried_append_stores_nothing_twice(nats_server):
    with open_log(nats_server.url) as flog:
        batch = recs(4)
        first = [r.seq for r, _ in flog.append_frames(batch)]
        flog.append_frames(recs(2, "other"))
        flog._last = 1          # the retry believes the stream is shorter than it is (as after a lost ack)
        again = [r.seq for r, _ in flog.append_frames(batch)]
        assert again == first
        assert flog.last_seq() == 6


def test_a_retry_of_a_large_append_whose_acks_were_lost_finds_every_stored_record_in_one_round(nats_server):
    """The server checks the expected end before the msg-id, and a duplicate does not move the end: a retry
    that pipelined its records expecting end + 1, end + 2 … had each stored record refused but the first, one
    record a round (a 1,000-record submit to a slow server gave up at 198 of 1,000 after 200 rounds)."""
    with open_log(nats_server.url) as flog:
        batch = recs(450)
        first = [r.seq for r, _ in flog.append_frames(batch)]
        flog.append_frames(recs(2, "other"))
        flog._last = 1                      # as after acks lost: the stream is longer than this writer knows
        again = [r.seq for r, _ in flog.append_frames(batch + recs(3, "new"))]
        assert again[:450] == first and again[450:] == [453, 454, 455]
        assert flog.last_seq() == 455
        assert [r.op_id for r, _ in flog.read_frames(exact=True)][:450] == [r.op_id for r in batch]


def test_writers_racing_on_two_connections_lose_nothing_and_keep_their_own_order(nats_server):
    logs = [open_log(nats_server.url) for _ in range(3)]
    errors: list[BaseException] = []

    def write(i: int) -> None:
        try:
            for k in range(15):
                logs[i].append_frames([Record.new("comment.add", "alex", {"w": i, "k": k, "j": j}) for j in range(4)])
        except BaseException as exc:  # pragma: no cover - the assertion below says it
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    got = [r for r, _ in logs[0].read_frames(exact=True)]
    assert [r.seq for r in got] == list(range(1, 181))
    assert len({r.op_id for r in got}) == 180
    for i in range(3):
        mine = [(r.payload["k"], r.payload["j"]) for r in got if r.payload["w"] == i]
        assert mine == sorted(mine) and len(mine) == 60
    for flog in logs:
        flog.close()


def test_a_gap_in_the_stream_is_damage(nats_server):
    # a stream that allows deletes (crewlet's own refuses them), to make the hole a consumer skips silently
    want = StreamWant("crewlet-pages", "crewlet.pages", 1, 600)
    loose = Connection(settings(nats_server.url))
    loose.connect()
    cfg = want.config()
    cfg.deny_delete = False
    cfg.deny_purge = False

    async def add():
        await loose.js.add_stream(cfg)
        return True

    loose.run(add())
    with JetStreamLog(loose, "crewlet", "pages") as flog:
        flog.append_frames(recs(6))

        async def delete():
            await loose.js.delete_msg("crewlet-pages", 4)

        loose.run(delete())
        with pytest.raises(LogGap) as err:
            list(flog.read_frames(after=2, start_offset=2, exact=True))
        assert "expected seq 4, found 5" in str(err.value)

        async def purge():
            await loose.js.purge_stream("crewlet-pages", seq=3)   # removes 1 and 2

        loose.run(purge())
        with pytest.raises(LogGap):
            list(flog.read_frames(after=0, start_offset=0, exact=True))


def test_an_existing_stream_with_other_settings_is_refused_naming_the_setting(nats_server):
    conn = Connection(settings(nats_server.url))
    conn.connect()
    want = StreamWant("crewlet-pages", "crewlet.pages", 1, 600)
    cfg = want.config()
    cfg.discard = "old"
    cfg.max_age = 3600.0

    async def add():
        await conn.js.add_stream(cfg)

    conn.run(add())
    with pytest.raises(StreamRefused) as err:
        conn.ensure_stream(want, create=True)
    assert "discard is 'old'" in str(err.value) and "max_age" in str(err.value)
    conn.close()


def test_a_record_over_the_servers_message_limit_is_refused_before_anything_is_published(nats_server):
    with open_log(nats_server.url) as flog:
        big = Record.new("page.create", "alex", {"body": "x" * (flog.conn.max_payload + 10)})
        with pytest.raises(PayloadTooLarge) as err:
            flog.append_frames(recs(2) + [big])
        assert "max_payload" in str(err.value)
        assert flog.last_seq() == 0


def test_servers_that_cannot_be_reached_refuse_at_once():
    from nats_server import free_port

    conn = Connection(settings(f"nats://127.0.0.1:{free_port()}"))
    assert conn.connect() is False
    flog = JetStreamLog(conn, "crewlet", "pages")
    with pytest.raises(LogUnreachable) as err:
        flog.append_frames(recs(1))
    assert "cannot be reached" in str(err.value)
    flog.close()


class RefusingServer:
    """A server on 127.0.0.1 that does what nats-server does to a client without credentials, the socket
    torn down the hard way: INFO, the client's CONNECT and PING read, `-ERR 'Authorization Violation'`, then
    a reset (SO_LINGER 0) — as the kernel does when nats-server closes with bytes of the client unread. nats-py
    reports the refusal and, closing the socket, a "Connection reset by peer" after it."""

    def __init__(self) -> None:
        import socket

        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"nats://127.0.0.1:{self.sock.getsockname()[1]}"
        self.refused = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        import socket
        import struct

        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:     # closed: the test is over
                return
            with client:
                client.sendall(b'INFO {"server_id":"refuser","version":"2.10.0","proto":1,"max_payload":1048576,'
                               b'"auth_required":true}\r\n')
                seen = b""
                while b"PING\r\n" not in seen:
                    chunk = client.recv(4096)
                    if not chunk:
                        break
                    seen += chunk
                client.sendall(b"-ERR 'Authorization Violation'\r\n")
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.refused += 1

    def close(self) -> None:
        import socket

        self.sock.shutdown(socket.SHUT_RDWR)     # wakes the accept() (a close alone does not, on Linux)
        self.sock.close()
        self._thread.join(timeout=5)
        assert not self._thread.is_alive()


def test_a_refusal_by_the_servers_is_the_reason_said_not_the_reset_of_the_socket_after_it():
    server = RefusingServer()
    try:
        conn = Connection(settings(server.url))
        assert conn.connect() is False
        assert server.refused >= 1
        assert "Authorization Violation" in conn.down_why, conn.down_why
        with pytest.raises(LogUnreachable) as err:
            JetStreamLog(conn, "crewlet", "pages").append_frames(recs(1))
        assert "Authorization Violation" in str(err.value)
        conn.close()
    finally:
        server.close()


def test_a_read_far_behind_streams_through_a_consumer_in_order(nats_server):
    from core.log import jetstream

    with open_log(nats_server.url) as flog:
        n = jetstream.DIRECT_BATCH * 2 + 500        # past one direct-get batch: the rest through a consumer
        for i in range(0, n, 500):
            flog.append_frames(recs(500, f"b{i}"))
        got = [r.seq for r, _ in flog.read_frames(after=0, start_offset=0, exact=True)]
        assert got == list(range(1, n + 1))
        assert [r.seq for r, _ in flog.read_frames(after=10, start_offset=10, exact=True, limit=1500)] == \
            list(range(11, 1511))


def test_a_reader_that_stops_early_carries_on_with_the_same_consumer(nats_server):
    from core.log import jetstream

    with open_log(nats_server.url) as flog:
        n = jetstream.DIRECT_BATCH + 3000
        for i in range(0, n, 1000):
            flog.append_frames(recs(1000, f"c{i}"))
        seen, after = [], 0
        while after < n:                      # as the applier reads: a transaction's worth, then a commit
            taken = 0
            for rec, frame in flog.read_frames(after=after, start_offset=after, exact=True):
                seen.append(rec.seq)
                taken += 1
                if taken == 700:
                    break
            after = seen[-1]
        assert seen == list(range(1, n + 1))
        assert flog._ahead is None             # the last read reached its end: nothing left running


def test_the_jetstream_log_is_a_backend_the_same_engine_applies_into_the_same_rows_as_the_file_log(nats_server, tmp_path):
    from dataclasses import replace

    from conftest import REPLAYED_TABLES, table_rows
    from test_replica import _records

    from core.log import FileLog, LogMismatch
    from core.pages import applier
    from core.replica import engine
    from core.replica.backend import LogBackend
    from core.store import connect

    records = _records()
    with open_log(nats_server.url) as jlog, FileLog(tmp_path / "pages.log") as flog:
        assert isinstance(jlog, LogBackend)
        flog.append([replace(r, seq=0) for r in records], sync=False)
        jlog.append_frames([replace(r, seq=0) for r in records])
        by_file, by_stream = connect(tmp_path / "file.db"), connect(tmp_path / "stream.db")
        decided_file: dict = {}
        decided_stream: dict = {}
        assert applier.catch_up(by_file, flog, batch=4, outcomes=decided_file) == len(records)
        assert engine.catch_up(by_stream, jlog, applier.PAGES, batch=4, outcomes=decided_stream) == len(records)
        for table in REPLAYED_TABLES:
            if table != "log_position":
                assert table_rows(by_file, table) == table_rows(by_stream, table), table
        assert {k: (d.status, d.code) for k, d in decided_file.items()} == \
            {k: (d.status, d.code) for k, d in decided_stream.items()}
        assert engine.position(by_stream, applier.APPLIER) == (len(records), len(records))
        stream = engine.Stream("pages", jlog, applier.PAGES)
        stream.verify(by_stream, stamp=True)
        assert stream.catch_up(by_stream) == 0
        # a database past the stream's end: the append is refused before anything is published
        ahead = engine.Stream("pages", jlog, applier.PAGES)
        by_stream.execute("UPDATE log_position SET seq = seq + 5, byte_offset = byte_offset + 5")
        with pytest.raises(LogMismatch):
            ahead.append(by_stream, recs(1))
        assert jlog.last_seq() == len(records)


def test_a_streaming_read_answers_the_servers_flow_control_and_a_stalled_consumers_heartbeat(nats_server, monkeypatch):
    """The streaming read takes messages as bytes (Connection.subscribe_raw), so it answers the consumer's flow
    control itself: a read of many megabytes is paced by flow-control requests, and one left unanswered would
    stall the consumer until the read gave up. The heartbeat of a stalled consumer names where to answer."""
    from core.log import jetstream

    answered: list[bytes] = []
    control = jetstream._control

    def spy(nc, reply, headers):
        answered.append(headers or b"")
        control(nc, reply, headers)

    monkeypatch.setattr(jetstream, "_control", spy)
    big = "x" * 60_000
    with open_log(nats_server.url) as flog:
        n = 400                                           # 24 MB: well past a flow-control window
        for i in range(0, n, 50):
            flog.append_frames([Record.new("comment.add", "alex", {"body": f"{i + k} {big}"}) for k in range(50)])
        flog._direct_ok = False                           # every record through the consumer
        got = [r.seq for r, _ in flog.read_frames(after=0, start_offset=0, exact=True)]
        assert got == list(range(1, n + 1))
        assert any(h.startswith(b"NATS/1.0 100 FlowControl") for h in answered), answered[:3]

        conn = flog.conn
        heard: list[bytes] = []

        async def listen() -> None:
            async def on(msg):
                heard.append(msg.subject.encode())
            await conn.nc.subscribe("fc.stalled", cb=on)
            await conn.nc.subscribe("fc.asked", cb=on)
            jetstream._control(conn.nc, b"", b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 3\r\n"
                                             b"Nats-Consumer-Stalled: fc.stalled\r\n\r\n")
            jetstream._control(conn.nc, b"fc.asked", b"NATS/1.0 100 FlowControl Request\r\n\r\n")
            jetstream._control(conn.nc, b"", b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 3\r\n\r\n")
            await conn.nc.flush()

        conn.run(listen())
        deadline = time.monotonic() + 5
        while len(heard) < 2 and time.monotonic() < deadline:
            conn.run(conn.nc.flush())
        assert sorted(heard) == [b"fc.asked", b"fc.stalled"]


def _move_subject(flog: JetStreamLog, subject: str) -> None:
    """Point the log's stream at another subject: its own subject then has no responders (as on a cluster's
    server that has not yet learned where a new stream's leader is)."""
    async def move() -> None:
        info = await flog.conn.js.stream_info(flog.stream)
        info.config.subjects = [subject]
        await flog.conn.js.update_stream(info.config)

    flog.conn.run(move())


def test_an_append_waits_for_a_stream_that_does_not_answer_yet_instead_of_counting_it_a_lost_race(nats_server):
    """CI failed a join on a three-server cluster at once: 'the rest lost the race to other writers 200 times'.
    The new stream's subject had no responders on the server the writer was connected to yet, and each 503
    was taken for a lost race, 200 rounds in about a second."""
    with open_log(nats_server.url) as flog:
        flog.append_frames(recs(2))
        _move_subject(flog, "elsewhere.pages")
        back = threading.Timer(2.5, _move_subject, args=(flog, flog.subject))
        back.start()
        try:
            written = flog.append_frames(recs(5, "late"))
        finally:
            back.join()
        assert [r.seq for r, _ in written] == [3, 4, 5, 6, 7]
        assert flog.last_seq() == 7


def test_an_append_to_a_stream_that_never_answers_says_so_after_its_patience(nats_server, monkeypatch):
    import core.log.jetstream as js_mod

    monkeypatch.setattr(js_mod, "UNANSWERED_S", 1.0)
    with open_log(nats_server.url) as flog:
        flog.append_frames(recs(1))
        _move_subject(flog, "elsewhere.pages")
        with pytest.raises(js_mod.LogFailed, match=r"no server answered .* in 1 s .* sync status") as err:
            flog.append_frames(recs(3))
        assert "lost the race" not in str(err.value)
        _move_subject(flog, flog.subject)
        assert flog.last_seq() == 1
