"""The ordered log on NATS JetStream: one stream per log, one message per record.

A record's body (the same canonical JSON a file frame holds) is the message's payload, and the stream's
sequence is the record's seq: streams are created with `discard: new` and no age, size or count limit,
never purged, so sequence N is the N-th record for ever. A position is stored as for a file log with
seq N "ending at" N and "starting at" N - 1 (`Frame(seq, body, seq - 1, seq)`), and the same digest of
the body: an open checks the stream still holds, at N, the record the database applied.

Appending (`append_frames`) is the optimistic lock that replaces the file log's flock: every message
carries `Nats-Msg-Id` = the record's op_id (a retry after a lost ack is answered "duplicate" with the
first copy's seq, never stored twice) and `Nats-Expected-Last-Sequence` (stored only if the stream ends
where the writer thinks). The records of one append are pipelined; each after the first also carries
`Nats-Expected-Last-Msg-Id` = the previous record's op_id, so once one of them is refused none after it
can land behind another writer's record: a batch may be split by another node's records at a boundary,
never reordered. A refused append is retried from the stream's real end (the server names it).

Reading (`read_frames`) uses an ephemeral push consumer from the position + 1 (no acks, flow control),
and checks every sequence is the previous + 1: a consumer silently skips records that retention or a
delete removed, so a gap is damage, raised as on a file log.

nats-py is asyncio; `Connection` owns an event loop on a thread of its own (`nats_loop.LoopThread`).
"""
from __future__ import annotations

import asyncio
import logging
import os
import queue
import re
import ssl
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..clock import now_ms
from ..errors import CrewletError
from .filelog import LogCorrupt, LogDamage, LogFailed, LogGap, LogMismatch, RecordTooLarge
from .framing import MAX_BODY, Applied, Frame, FrameStatus, Stop, frame_digest
from .nats_loop import LoopThread
from .record import Record

if TYPE_CHECKING:
    from ..paths import Home

logger = logging.getLogger(__name__)

REQUEST_S = 5.0          # an API request (stream info, a message by seq)
CONNECT_S = 3.0          # the first connection of a process
ACK_S = 15.0             # a round of pipelined publishes, all acknowledged
READ_IDLE_S = 10.0       # a read that hears nothing for this long gives up (the server went away)
RETRY_CONNECT_S = 5.0    # an unreachable server is tried again at most this often
APPEND_ROUNDS = 200      # rounds of an append contending with other writers before it gives up
UNANSWERED_S = 30.0      # how long an append waits while nobody answers on the stream's subject (a new stream's
                         # leader being elected, or the server not yet knowing where it is) before it gives up
DIRECT_BATCH = 1000      # a read this far behind is one direct-get request; further, a consumer streams it
FLUSH_RECORDS = 256      # a streaming read hands records to the reading thread this many at a time
HEADER_ROOM = 512        # bytes of headers a message carries beside its payload (max_payload counts both)

MSG_ID = "Nats-Msg-Id"
EXPECTED_LAST_SEQ = "Nats-Expected-Last-Sequence"
EXPECTED_LAST_MSG_ID = "Nats-Expected-Last-Msg-Id"
WRONG_LAST_SEQ = 10071
WRONG_LAST_MSG_ID = 10070
STREAM_NOT_FOUND = 10059
DUPLICATE_IN_PROCESS = 10158
LOG_NAMES = ("pages", "vectors")


def stream_name(prefix: str, log: str) -> str:
    return f"{prefix}-{log}"


def subject_of(prefix: str, log: str) -> str:
    return f"{prefix}.{log}"


def company_bucket(prefix: str) -> str:
    return f"{prefix}-company"


class LogUnreachable(LogFailed):
    """The NATS servers cannot be reached (or did not answer), or answer without a quorum to serve the log:
    nothing was appended. Reads serve this node's own database meanwhile."""

    def __init__(self, servers: str, why: str, *, since_ms: int | None = None, quorum: bool = False) -> None:
        self.servers, self.why, self.since_ms = servers, why, since_ms
        self.quorum = quorum     # they answer, but too few of the cluster's servers are up to serve the log
        # records were published before the servers went away: some may be stored (acknowledged, or stored with
        # the acknowledgement lost), so "nothing was written" would invite a duplicate on retry
        self.published = 0
        self.acknowledged = 0
        super().__init__(f"the log's NATS servers ({servers}) {'have no quorum' if quorum else 'cannot be reached'}: "
                         f"{why}")


# what a cluster that lost its quorum answers (JetStream's 503, err_code 10008 "JetStream system temporarily
# unavailable"): a state of the servers, never damage of the log — reads serve the database, writes refuse
NO_QUORUM = ("they answer, but too few servers of the cluster are up to keep a quorum: JetStream is temporarily "
             "unavailable")
# how long an append waits while the servers say they have no quorum: longer than an election takes after one
# server of three is lost (nats-server's election timeout is 4-9 s), so only a quorum really lost is refused
QUORUM_WAIT_S = 12.0


class StreamRefused(CrewletError):
    """An existing stream whose settings are not the ones crewlet's durability needs (named)."""

    code = "stream_refused"


class PayloadTooLarge(RecordTooLarge):
    def __init__(self, record: Record, size: int, limit: int) -> None:
        CrewletError.__init__(  # not RecordTooLarge's: its words are the file log's limit
            self, f"a {record.type} record of {size / 1024:.0f} KiB exceeds the NATS server's {limit // 1024} KiB "
            "message limit (max_payload) — nothing was written; split the text, or raise max_payload on the servers")
        self.record, self.size = record, size


# -- the stream settings crewlet's durability needs ---------------------------------------------------------

@dataclass(frozen=True)
class StreamWant:
    name: str
    subject: str
    replicas: int
    duplicate_window_s: int

    def config(self) -> Any:
        from nats.js import api

        return api.StreamConfig(
            name=self.name, subjects=[self.subject], description="crewlet's ordered log: one record a message",
            retention=api.RetentionPolicy.LIMITS, storage=api.StorageType.FILE, num_replicas=self.replicas,
            discard=api.DiscardPolicy.NEW, max_msgs=-1, max_bytes=-1, max_age=0, max_msgs_per_subject=-1,
            duplicate_window=float(self.duplicate_window_s), deny_delete=True, deny_purge=True,
            allow_direct=True, allow_rollup_hdrs=False)

    def mismatches(self, have: dict[str, Any]) -> list[str]:
        """Each setting of an existing stream (its config as the server answers it) that is not what this
        log needs, said as `setting is X, needs Y`."""
        out = []

        def need(key: str, ok: bool, shown: Any, wanted: str) -> None:
            if not ok:
                out.append(f"{key} is {shown!r}, needs {wanted}")

        need("storage", have.get("storage") == "file", have.get("storage"), "file (memory storage loses the log "
             "with the server)")
        need("num_replicas", int(have.get("num_replicas") or 1) == self.replicas, have.get("num_replicas"),
             f"{self.replicas} ([log] replicas)")
        need("discard", have.get("discard") == "new", have.get("discard"), '"new" (old: the oldest records are '
             "dropped silently at a limit)")
        need("retention", have.get("retention") == "limits", have.get("retention"), '"limits"')
        for key in ("max_msgs", "max_bytes", "max_msgs_per_subject"):
            limit = have.get(key)
            need(key, int(limit if limit is not None else -1) == -1, limit,
                 "-1 (no limit: a limit would refuse or drop records)")
        need("max_age", not have.get("max_age"), have.get("max_age"), "0 (no age limit: old records would expire)")
        window_ns = int(have.get("duplicate_window") or 0)
        need("duplicate_window", window_ns >= 60 * 1_000_000_000, f"{window_ns / 1e9:g} s",
             "at least 60 s (a retried append must find its first copy)")
        need("subjects", list(have.get("subjects") or []) == [self.subject], have.get("subjects"), f"[{self.subject!r}]")
        need("persist_mode", have.get("persist_mode") in (None, "", "default"), have.get("persist_mode"),
             '"default" (async acknowledges before the write is stored)')
        need("sealed", not have.get("sealed"), have.get("sealed"), "false")
        need("deny_delete", bool(have.get("deny_delete")), have.get("deny_delete", False),
             "true (a deleted record is a hole every node would meet as damage)")
        need("deny_purge", bool(have.get("deny_purge")), have.get("deny_purge", False), "true (a purge empties the log)")
        return out


# -- the connection -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Ack:
    """A publish's answer: the seq it is stored at (`duplicate`: stored before, by an earlier try), or the
    server's refusal (its err_code and description)."""
    seq: int | None
    duplicate: bool = False
    code: int | None = None
    error: str | None = None
    unanswered: bool = False    # no responders (status 503): nobody took the subject, which is not a lost race


class _Patience:
    """An append's wait while nobody answers on its stream's subject: pauses growing to a second, for at most
    UNANSWERED_S in all."""

    def __init__(self, log: JetStreamLog) -> None:
        self.log = log
        self.since: float | None = None
        self.pause = 0.05

    async def wait(self) -> None:
        now = time.monotonic()
        if self.since is None:
            self.since = now
        if now - self.since >= QUORUM_WAIT_S and await self.log.conn.no_quorum():
            raise LogUnreachable(self.log.conn.servers, NO_QUORUM, since_ms=self.log.conn.down_since_ms, quorum=True)
        if now - self.since >= UNANSWERED_S:
            raise LogFailed(f"{self.log.path}: no server answered on the subject {self.log.subject} in "
                            f"{UNANSWERED_S:g} s (the stream {self.log.stream} has no leader, or takes other "
                            "subjects) — nothing more was appended; see `crewlet sync status`, then run the command again")
        await asyncio.sleep(min(self.pause, UNANSWERED_S - (now - self.since)))
        self.pause = min(self.pause * 2, 1.0)


class Connection:
    """One NATS connection (and the event loop thread it lives on) for a process's use of one company's
    servers: the pages log and the vector log share it."""

    def __init__(self, settings: Any, *, name: str = "crewlet") -> None:
        self.settings = settings
        self.servers = ",".join(settings.url)
        self.name = name
        self.loop = LoopThread()
        self.nc: Any = None
        self.js: Any = None
        self.max_payload = 1 << 20
        self.last_contact_ms: int | None = None
        self.down_since_ms: int | None = None
        self.down_why: str | None = None
        self._tried_at = 0.0
        self._users = 0
        self._last_error: str | None = None     # what last went wrong connecting (auth, TLS, a refused socket…)
        self._server_said = False               # …and whether the servers said it (then it is the reason)
        self._acks: dict[str, asyncio.Future] = {}
        self._ack_prefix = ""
        self._ack_count = 0
        self._raw: dict[int, Any] = {}      # subscription id -> handler(reply, data, headers) of raw deliveries

    # -- connecting ------------------------------------------------------------------------------------
    def _options(self) -> dict[str, Any]:
        s = self.settings
        opts: dict[str, Any] = dict(
            servers=list(s.url), name=self.name, connect_timeout=CONNECT_S, allow_reconnect=True,
            # the first connection tries each server twice and gives up (an unreachable company opens offline at
            # once); once connected it reconnects for ever (set below)
            max_reconnect_attempts=1, reconnect_time_wait=0.5, ping_interval=10, max_outstanding_pings=3,
            error_cb=self._on_error, disconnected_cb=self._on_disconnected, reconnected_cb=self._on_reconnected,
            closed_cb=self._on_closed)
        if s.creds:
            path = Path(s.creds).expanduser()
            if not path.is_file():
                raise LogUnreachable(self.servers, f"the credentials file {path} ([log] creds) does not exist — put "
                                     "the NATS credentials there, or fix the path")
            if b"NATS USER JWT" in path.read_bytes():
                opts["user_credentials"] = str(path)
            else:
                opts["nkeys_seed"] = str(path)
        if s.token_env:
            token = os.environ.get(s.token_env)
            if not token:
                raise LogUnreachable(self.servers, f"the environment variable {s.token_env} ([log] token_env) is not "
                                     "set — export the NATS token in it")
            opts["token"] = token
        if any(u.lower().startswith("tls://") for u in s.url):
            ctx = ssl.create_default_context(cafile=str(Path(s.tls_ca).expanduser()) if s.tls_ca else None)
            opts["tls"] = ctx
        return opts

    async def _on_error(self, exc: Exception) -> None:
        logger.info("NATS: %s", exc)
        # nats-py reports the server's refusal (-ERR 'Authorization Violation') and then, as it closes the socket
        # the server has already reset, a "Connection reset by peer": the refusal stays the reason
        said = _said_by_server(exc)
        if said or not self._server_said:
            self._last_error, self._server_said = _why(exc), said

    async def _on_disconnected(self) -> None:
        self._mark_down("the connection was lost")

    async def _on_reconnected(self) -> None:
        self._mark_up()

    async def _on_closed(self) -> None:
        pass

    def _mark_up(self) -> None:
        self.last_contact_ms = now_ms()
        self.down_since_ms = None
        self.down_why = None

    def _mark_down(self, why: str) -> None:
        if self.down_since_ms is None:
            self.down_since_ms = now_ms()
        self.down_why = why

    async def _connect(self) -> None:
        import nats

        self._last_error, self._server_said = None, False    # this attempt's reasons, not an earlier one's
        nc = await nats.connect(**self._options())
        nc.options["max_reconnect_attempts"] = -1
        self._deliver_raw(nc)
        self.nc, self.js = nc, nc.jetstream(timeout=REQUEST_S)
        self.max_payload = int(nc.max_payload or self.max_payload)
        # acknowledgements of pipelined publishes, on an inbox of our own: nats-py's publish_async never
        # settles a publish the server refused (its reply handler raises the APIError instead of setting it)
        self._ack_prefix = nc.new_inbox()
        await nc.subscribe(f"{self._ack_prefix}.*", cb=self._on_ack, pending_msgs_limit=-1, pending_bytes_limit=-1)

    def _deliver_raw(self, nc: Any) -> None:
        """Messages of the subscriptions made by `subscribe_raw` go straight to their handler as bytes. nats-py
        makes of every message a `Msg` with its headers parsed into a dict, queues it and wakes a task per
        subscription to run its callback: for a reader streaming a log that was most of the loop thread's work,
        and that thread shares the GIL with the applier (bench/sync.py). Other subscriptions are untouched.
        `_process_msg` is the one call nats-py's protocol parser makes per message (nats/protocol/parser.py)."""
        raw = self._raw
        process = nc._process_msg

        async def dispatch(sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
            handler = raw.get(sid)
            if handler is None:
                await process(sid, subject, reply, data, headers)
            else:
                handler(subject, reply, data, headers)

        nc._process_msg = dispatch

    async def subscribe_raw(self, subject: str, handler: Any) -> Any:
        """Subscribe `handler(subject, reply, data, headers)` (bytes; headers None when there are none), called on
        the loop thread for each message as the server sent it (no `Msg`, no parsed headers); `unsubscribe_raw`
        ends it."""
        sub = await self.nc.subscribe(subject, pending_msgs_limit=-1, pending_bytes_limit=-1)
        self._raw[sub._id] = handler
        return sub

    async def unsubscribe_raw(self, sub: Any) -> None:
        self._raw.pop(sub._id, None)
        await sub.unsubscribe()

    async def _on_ack(self, msg: Any) -> None:
        import json

        fut = self._acks.pop(msg.subject[len(self._ack_prefix) + 1:], None)
        if fut is None or fut.done():
            return
        try:
            data = json.loads(msg.data) if msg.data else {}
        except ValueError:
            data = {}
        if "seq" in data and "error" not in data:
            fut.set_result(Ack(int(data["seq"]), bool(data.get("duplicate"))))
            return
        err = data.get("error") or {}
        status = (msg.headers or {}).get("Status")
        # "duplicate message id is in process": an earlier try of this very record is still being agreed on (a
        # leader elected meanwhile) — not a refusal: waited for like a stream that does not answer yet, then asked again
        busy = err.get("err_code") == DUPLICATE_IN_PROCESS or "in process" in str(err.get("description") or "")
        fut.set_result(Ack(None, False, None if busy else err.get("err_code"), err.get("description") or
                           ("no stream takes the subject" if status == "503" else f"no acknowledgement ({msg.data[:80]!r})"),
                           unanswered=(status == "503" and not err) or busy))

    async def publish_acked(self, subject: str, payload: bytes, headers: dict[str, str]) -> asyncio.Future:
        """Publish and return a future of its Ack (pipelined: the caller awaits many at once)."""
        self._ack_count += 1
        token = str(self._ack_count)
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._acks[token] = fut
        fut.add_done_callback(lambda _f: self._acks.pop(token, None))
        await self.nc.publish(subject, payload, reply=f"{self._ack_prefix}.{token}", headers=headers)
        return fut

    def connect(self, *, timeout: float = CONNECT_S + 1) -> bool:
        """Connect if not connected (an unreachable server is tried again at most every RETRY_CONNECT_S);
        True when connected."""
        if self.nc is not None and not self.nc.is_closed:
            return self.up
        now = time.monotonic()
        if self._tried_at and now - self._tried_at < RETRY_CONNECT_S:
            return False
        self._tried_at = now
        try:
            self.loop.run(self._connect(), timeout)
        except LogUnreachable as exc:
            self._mark_down(exc.why)
            raise
        except Exception as exc:  # nats-py raises its own errors, OSError and TimeoutError alike
            why = _why(exc)
            if self._last_error and self._last_error not in why:
                why = f"{self._last_error} ({why})"   # "no servers available" hides the reason they gave
            self._mark_down(why)
            return False
        self._mark_up()
        return True

    @property
    def up(self) -> bool:
        return self.nc is not None and self.nc.is_connected

    def require(self) -> None:
        """Raise LogUnreachable unless connected now."""
        if not self.up:
            self.connect()
        if not self.up:
            raise LogUnreachable(self.servers, self.down_why or "not connected", since_ms=self.down_since_ms)

    def run(self, coro: Any, timeout: float = REQUEST_S) -> Any:
        """Run a coroutine against the servers: LogUnreachable when they cannot be reached or do not answer."""
        try:
            self.require()
        except LogUnreachable:
            coro.close()
            raise
        try:
            out = self.loop.run(coro, timeout)
        except TimeoutError as exc:
            self._mark_down("no answer in time")
            raise LogUnreachable(self.servers, f"no answer in {timeout:g} s", since_ms=self.down_since_ms) from exc
        except Exception as exc:
            if _is_unavailable(exc):
                self._mark_down(NO_QUORUM)
                raise LogUnreachable(self.servers, NO_QUORUM, since_ms=self.down_since_ms, quorum=True) from None
            if _is_connection_error(exc):
                self._mark_down(_why(exc))
                raise LogUnreachable(self.servers, _why(exc), since_ms=self.down_since_ms) from exc
            raise
        self.last_contact_ms = now_ms()
        return out

    async def no_quorum(self) -> bool:
        """Do the servers say JetStream is unavailable (a cluster without its quorum)? One API request, answered
        by the meta leader when there is one."""
        import json

        try:
            msg = await self.nc.request("$JS.API.INFO", b"", timeout=REQUEST_S)
            return (json.loads(msg.data).get("error") or {}).get("code") == 503
        except Exception:  # noqa: BLE001 - no answer at all is not this question's to judge
            return False

    def retain(self) -> Connection:
        self._users += 1
        return self

    def release(self) -> None:
        self._users -= 1
        if self._users <= 0:
            self.close()

    def close(self) -> None:
        nc, self.nc = self.nc, None
        if nc is not None and self.loop.alive:
            try:
                self.loop.run(nc.close(), 5)
            except Exception:  # closing a connection that already broke
                pass
        self.loop.close()

    # -- a live watch ----------------------------------------------------------------------------------
    WATCH_HEARTBEAT_S = 1.0
    WATCH_SILENT_S = 4.0

    def watch(self, streams: list[str], wake: Any, stop: Any) -> None:
        """Call `wake()` whenever a record lands on one of `streams` (or the connection comes back), until
        `stop` (a threading.Event) is set: a push consumer per stream, headers only, from the next message
        on — no polling loop. A consumer that falls silent (no message and no heartbeat: a server restarted
        and forgot it) is made again, with a wake in case a record landed meanwhile."""
        if not self.loop.alive:
            return
        import threading

        async def one(stream: str) -> None:
            from nats.js import api

            while not stop.is_set():
                if not self.up:
                    if self.nc is None:
                        try:
                            await self._connect()
                            self._mark_up()
                        except Exception as exc:  # unreachable: try again shortly
                            self._mark_down(_why(exc))
                            await asyncio.sleep(RETRY_CONNECT_S)
                            continue
                    else:
                        await asyncio.sleep(0.2)
                        continue
                    wake()
                heard = [time.monotonic()]
                nc = self.nc

                async def on_msg(msg: Any, heard: list[float] = heard, nc: Any = nc) -> None:
                    heard[0] = time.monotonic()
                    headers = msg.headers or {}
                    if not msg.data and headers.get("Status") == "100":
                        if msg.reply:
                            await nc.publish(msg.reply, b"")
                        return
                    wake()

                sub = None
                try:
                    inbox = nc.new_inbox()
                    sub = await nc.subscribe(inbox, cb=on_msg)
                    await self.js._jsm.add_consumer(stream, config=api.ConsumerConfig(
                        deliver_subject=inbox, deliver_policy=api.DeliverPolicy.NEW, ack_policy=api.AckPolicy.NONE,
                        headers_only=True, flow_control=True, idle_heartbeat=self.WATCH_HEARTBEAT_S,
                        mem_storage=True, inactive_threshold=30.0, num_replicas=1))
                    wake()   # anything that landed before the consumer existed
                    while not stop.is_set() and self.nc is nc and time.monotonic() - heard[0] < self.WATCH_SILENT_S:
                        await asyncio.sleep(0.25)
                except Exception as exc:  # the stream or the server went away: made again below
                    logger.info("watching %s: %s", stream, exc)
                    await asyncio.sleep(0.5)
                finally:
                    if sub is not None:
                        try:
                            await sub.unsubscribe()
                        except Exception:
                            pass

        async def all_of() -> None:
            await asyncio.gather(*(one(s) for s in streams))

        fut = asyncio.run_coroutine_threadsafe(all_of(), self.loop.loop)

        def stopper() -> None:
            stop.wait()
            fut.cancel()

        threading.Thread(target=stopper, name="crewlet-nats-watch-stop", daemon=True).start()

    # -- streams ---------------------------------------------------------------------------------------
    def stream_config(self, name: str) -> dict[str, Any] | None:
        """The stream's configuration as the server answers it (None when there is no such stream)."""
        import json

        async def ask() -> dict[str, Any] | None:
            msg = await self.nc.request(f"$JS.API.STREAM.INFO.{name}", b"", timeout=REQUEST_S)
            data = json.loads(msg.data)
            if "error" in data:
                if data["error"].get("err_code") == STREAM_NOT_FOUND:
                    return None
                _raise_unavailable(data["error"])
                raise LogFailed(f"stream {name}: {data['error'].get('description')}")
            return data

        return self.run(ask())

    def ensure_stream(self, want: StreamWant, *, create: bool) -> bool:
        """The stream exists with the settings crewlet needs; created when `create` and absent (True then).
        An existing stream with other settings is refused, naming them."""
        info = self.stream_config(want.name)
        if info is None:
            if not create:
                raise StreamRefused(f"there is no stream {want.name} on {self.servers} — join it from the company's "
                                    f"first node (`crewlet sync join {self.servers}` on its home)")

            async def add() -> None:
                await self.js.add_stream(want.config())

            self.run(add())
            return True
        bad = want.mismatches(info.get("config") or {})
        if bad:
            raise StreamRefused(f"the stream {want.name} on {self.servers} exists with other settings: {'; '.join(bad)} "
                                "— fix it with `nats stream edit`, or use another [log] stream_prefix")
        return False

    def stream_state(self, name: str) -> tuple[int, int]:
        """(first seq, last seq) of the stream now ((0, 0) when empty)."""
        info = self.stream_config(name)
        if info is None:
            raise LogMismatch(Path(f"jetstream:{name}"), 0, None, f"the stream {name} is gone from {self.servers}",
                              kind="cut")
        state = info.get("state") or {}
        return int(state.get("first_seq") or 0), int(state.get("last_seq") or 0)

    def message(self, name: str, seq: int) -> bytes | None:
        """The payload stored at `seq` (None when the stream holds nothing there)."""
        import json

        async def get() -> bytes | None:
            msg = await self.nc.request(f"$JS.API.STREAM.MSG.GET.{name}", json.dumps({"seq": seq}).encode(),
                                        timeout=REQUEST_S)
            data = json.loads(msg.data)
            if "error" in data:
                # no record there (a 404) is an answer; a cluster without its quorum gave none (never "missing")
                _raise_unavailable(data["error"])
                return None
            import base64

            return base64.b64decode(data["message"].get("data") or "")

        return self.run(get())

    # -- key-value -------------------------------------------------------------------------------------
    def kv_get(self, bucket: str, key: str) -> tuple[bytes, int] | None:
        """(value, revision) of a key (None when the bucket or the key is absent)."""
        from nats.js.errors import BucketNotFoundError, KeyNotFoundError, NotFoundError

        async def get() -> tuple[bytes, int] | None:
            try:
                kv = await self.js.key_value(bucket)
                entry = await kv.get(key)
            except (BucketNotFoundError, KeyNotFoundError, NotFoundError):
                return None
            return bytes(entry.value or b""), int(entry.revision or 0)

        return self.run(get())

    def kv_put(self, bucket: str, key: str, value: bytes, *, last: int | None) -> int:
        """Put `value` at `key` (bucket created when absent), only if the key's revision is still `last`
        (None: only if the key does not exist yet). Returns the new revision; raises KeyWrongLastSequence
        (nats.js.errors) when someone else wrote first."""
        async def put() -> int:
            kv = await self._bucket(bucket)
            if last is None:
                return int(await kv.create(key, value))
            return int(await kv.update(key, value, last=last))

        return self.run(put())

    def kv_set(self, bucket: str, key: str, value: bytes, *, history: int = 1) -> int:
        """Put `value` at `key` whoever wrote it before (bucket created when absent, keeping `history` values a
        key): for a key only one writer writes, such as a node's own word in the nodes' bucket."""
        async def put() -> int:
            return int(await (await self._bucket(bucket, history=history)).put(key, value))

        return self.run(put())

    def kv_values(self, bucket: str) -> list[bytes]:
        """Every key's current value (none when the bucket or its keys are absent)."""
        from nats.js.errors import BucketNotFoundError, KeyNotFoundError, NoKeysError, NotFoundError

        async def values() -> list[bytes]:
            try:
                kv = await self.js.key_value(bucket)
                keys = await kv.keys()
            except (BucketNotFoundError, NoKeysError, NotFoundError):
                return []
            out = []
            for key in sorted(keys):
                try:
                    out.append(bytes((await kv.get(key)).value or b""))
                except (KeyNotFoundError, NotFoundError):
                    continue        # deleted since it was listed
            return out

        return self.run(values())

    async def _bucket(self, bucket: str, *, history: int = 8) -> Any:
        from nats.js.errors import BucketNotFoundError, NotFoundError

        try:
            return await self.js.key_value(bucket)
        except (BucketNotFoundError, NotFoundError):
            from nats.js import api

            return await self.js.create_key_value(api.KeyValueConfig(
                bucket=bucket, history=history, storage=api.StorageType.FILE, replicas=self.settings.replicas))


def _why(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.removeprefix("nats: ")


def _said_by_server(exc: BaseException) -> bool:
    """The servers' own refusal of a connection: an -ERR line (nats-py raises it as a bare `Error`, or
    `AuthorizationError`), or a TLS handshake that failed — not the socket and timeout errors around it."""
    from nats import errors

    return type(exc) in (errors.Error, errors.AuthorizationError) or isinstance(exc, ssl.SSLError)


def _is_unavailable(exc: BaseException) -> bool:
    """JetStream's own "temporarily unavailable" (503): the servers answer, without a quorum to serve it."""
    from nats.js import errors

    # a publish (a key of a bucket) nobody took: the stream has no leader to store it
    return isinstance(exc, (errors.ServiceUnavailableError, errors.NoStreamResponseError)) or (
        isinstance(exc, errors.APIError) and getattr(exc, "code", None) == 503)


def _raise_unavailable(error: dict[str, Any]) -> None:
    """An API answer's error, raised as nats-py raises it when it is JetStream's 503 (handled by `run`)."""
    if error.get("code") == 503:
        from nats.js import errors

        raise errors.ServiceUnavailableError(code=503, err_code=error.get("err_code"),
                                             description=error.get("description"))


def _is_connection_error(exc: BaseException) -> bool:
    from nats import errors

    return isinstance(exc, (errors.ConnectionClosedError, errors.NoServersError, errors.StaleConnectionError,
                            errors.OutboundBufferLimitError, errors.TimeoutError, errors.NoRespondersError,
                            OSError, ConnectionError))


# -- a log on a stream ---------------------------------------------------------------------------------------

_WRONG_LAST = re.compile(r"wrong last sequence: (\d+)")


class JetStreamLog:
    """One stream as an ordered log of records, with the calls the applier makes of a log: append
    (`append_frames`), read past a position (`read_frames`), the record at a position (`frame_at`),
    where the log ends (`last_seq`, `size`, `tail`)."""

    writable = True

    def __init__(self, conn: Connection, prefix: str, log: str) -> None:
        self.conn = conn.retain()
        self.stream = stream_name(prefix, log)
        self.subject = subject_of(prefix, log)
        # how damage and refusals name this log (LogDamage keeps a Path)
        self.path = Path(f"jetstream:{self.stream}")
        self._last: int | None = None    # the stream's last seq as this process last knew it
        self._direct_ok = True
        self._ahead: _Ahead | None = None   # a consumer a reader stopped taking from, still running
        self._closed = False

    def __repr__(self) -> str:
        return f"JetStreamLog({self.stream!r} on {self.conn.servers!r})"

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            ahead, self._ahead = self._ahead, None
            if ahead is not None and self.conn.up:
                self._stop_consumer(ahead)
            self.conn.release()

    def __enter__(self) -> JetStreamLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- where it ends ---------------------------------------------------------------------------------
    def state(self) -> tuple[int, int]:
        first, last = self.conn.stream_state(self.stream)
        self._last = last
        return first, last

    def last_seq(self) -> int:
        return self.state()[1]

    def size(self) -> int:
        """The "end offset" of the last record: its seq (a position ends at its seq on a stream)."""
        return self.last_seq()

    def tail(self, after: int = 0, start_offset: int = 0) -> tuple[int, int]:
        last = self.last_seq()
        return last, last

    def locate(self, applied: Applied) -> Frame | None:
        """The record the database applied last, checked against its position (seq, end = seq, offset =
        seq - 1, digest): None when nothing was applied; LogMismatch when the stream no longer holds that
        very record at that seq (it ends before it, or another record is there)."""
        if applied.nothing:
            return None
        if applied.end != applied.seq or (applied.start is not None and applied.start != applied.seq - 1):
            raise LogMismatch(self.path, applied.end, applied.seq,
                              f"the database's position (seq {applied.seq}, byte offset {applied.end}) is a file log's, "
                              f"not a position on {self.stream}: the node moved to JetStream without converting it",
                              kind="mismatch")
        body = self.conn.message(self.stream, applied.seq)
        if body is None:
            first, last = self.state()
            why = (f"the stream ends at seq {last}" if last < applied.seq
                   else f"the stream no longer holds seq {applied.seq} (it starts at {first})")
            raise LogMismatch(self.path, last, applied.seq,
                              f"the database applied {self.stream} through seq {applied.seq}, but {why}: records it "
                              "applied are missing from the stream", kind="cut")
        if applied.digest is not None and frame_digest(body) != applied.digest:
            raise LogMismatch(self.path, applied.seq - 1, applied.seq,
                              f"the stream {self.stream} holds another record at seq {applied.seq} than the one the "
                              "database applied there: the stream was replaced, or is another company's")
        return Frame(applied.seq, body, applied.seq - 1, applied.seq)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """A stream has no lock to hold its writers off: each append is ordered by the server against the end
        its writer expects (Nats-Expected-Last-Sequence). Nothing that takes this lock (moving a file log,
        cutting one in a repair) is done to a stream, so taking it is refused rather than pretended."""
        raise LogFailed(f"{self.path}: a stream's writers are ordered by its servers, not held off by a lock — "
                        "a stream is neither moved nor cut from a node")
        yield  # pragma: no cover - a generator for contextmanager

    def frame_at(self, offset: int) -> Frame | Stop:
        """The record whose frame "starts" at `offset` (seq offset + 1)."""
        seq = offset + 1
        body = self.conn.message(self.stream, seq)
        if body is None:
            return Stop(FrameStatus.END, offset, offset, reason=f"the stream holds no record at seq {seq}")
        return Frame(seq, body, offset, seq)

    # -- appending -------------------------------------------------------------------------------------
    def append(self, records: Sequence[Record], **kw: Any) -> list[Record]:
        return [rec for rec, _ in self.append_frames(records, **kw)]

    def append_frames(self, records: Sequence[Record], *, sync: bool = True, keep_through: int = 0,
                      guard: Any = None) -> list[tuple[Record, Frame]]:
        """Append records in order, each its own message; returns each with its seq and frame. Refused
        before anything is published: a record over the servers' message limit, servers that cannot be
        reached. `sync`, `keep_through` and `guard` are the file log's (no torn tail exists here; what an
        acknowledgement promises is the servers' `sync_interval`, which `crewlet sync status` shows)."""
        records = list(records)
        if not records:
            return []
        bodies = [r.body() for r in records]
        limit = min(self.conn.max_payload, MAX_BODY) - HEADER_ROOM
        for rec, body in zip(records, bodies):
            if len(body) > limit:
                raise PayloadTooLarge(rec, len(body), self.conn.max_payload)
        self.conn.require()
        if keep_through and (self._last or 0) < keep_through and self.last_seq() < keep_through:
            # the database applied records the stream no longer holds: appending would give their seqs to others
            raise LogMismatch(self.path, self._last or 0, keep_through,
                              f"the stream {self.stream} ends at seq {self._last}, but the database applied it through "
                              f"seq {keep_through}: records it applied are missing — nothing was appended", kind="cut")
        seqs = self.conn.run(self._append(bodies, [r.op_id for r in records]), timeout=ACK_S * 4 + 30)
        out = []
        for rec, body, seq in zip(records, bodies, seqs):
            out.append((rec.at_seq(seq), Frame(seq, body, seq - 1, seq)))
        self._last = max(self._last or 0, seqs[-1])
        return out

    async def _append(self, bodies: list[bytes], op_ids: list[str]) -> list[int]:
        seqs: list[int | None] = [None] * len(bodies)
        published = [False]     # a record sent whose answer never came
        try:
            return await self._append_rounds(bodies, op_ids, seqs, published)
        except LogUnreachable as exc:
            if published[0] or any(s is not None for s in seqs):
                exc.published = len(bodies)
                exc.acknowledged = sum(s is not None for s in seqs)
            raise

    async def _append_rounds(self, bodies: list[bytes], op_ids: list[str], seqs: list[int | None],
                             published: list[bool]) -> list[int]:
        n = len(bodies)
        expected = self._last
        if expected is None:
            expected = await self._stream_last()
        patience = _Patience(self)
        lost = 0        # rounds lost to other writers (or to acks lost); a round nobody answered is not one
        first = True
        while lost < APPEND_ROUNDS:
            start = next((i for i, s in enumerate(seqs) if s is None), None)
            if start is None:
                break
            if not first:
                # A retry: records of an earlier round may have been stored although their acks were refused
                # behind a lost one, or came too late. The server checks the expected end before the msg-id,
                # so a stored record answers "duplicate" only when expected at the stream's true end, and a
                # duplicate does not move that end: one record at a time until one is stored anew.
                start, expected, stored, unanswered = await self._resume(bodies, op_ids, seqs, start, expected)
                if unanswered:
                    await patience.wait()
                    continue
                if not stored:
                    lost += 1
                    continue
                start = next((i for i, s in enumerate(seqs) if s is None), None)
                if start is None:
                    break
            first = False
            futs: list[asyncio.Future[Ack]] = []
            idx: list[int] = []
            for j in range(start, n):
                if seqs[j] is not None:
                    continue
                headers = {MSG_ID: op_ids[j], EXPECTED_LAST_SEQ: str(expected + len(idx))}
                if idx:
                    headers[EXPECTED_LAST_MSG_ID] = op_ids[idx[-1]]
                futs.append(await self.conn.publish_acked(self.subject, bodies[j], headers))
                idx.append(j)
            # a slow server (one fsync a record) answers late but answers: wait while acks keep coming
            pending = set(futs)
            while pending:
                done, pending = await asyncio.wait(pending, timeout=ACK_S)
                if not done:
                    break       # nothing in ACK_S: what is left is lost (the next round finds out)
            refused: Ack | None = None
            refused_last = -1
            for j, fut in zip(idx, futs):
                ack = fut.result() if fut.done() else Ack(None, False, None, "no acknowledgement in time")
                if not fut.done():
                    published[0] = True     # sent, and no answer: it may be stored (a 503 is a sure "not stored")
                if ack.seq is not None:
                    seqs[j] = ack.seq
                    expected = max(expected, ack.seq)
                elif refused is None:
                    if ack.code not in (WRONG_LAST_SEQ, WRONG_LAST_MSG_ID, None):
                        raise LogFailed(f"{self.path}: appending record {op_ids[j]} was refused: {ack.error}")
                    refused = ack
                    m = _WRONG_LAST.search(ack.error or "")
                    refused_last = int(m.group(1)) if m else -1
            for fut in futs:
                if not fut.done():
                    fut.cancel()
            if refused is None:
                break
            if refused.unanswered:
                await patience.wait()
            else:
                lost += 1
            # someone else appended first (or an ack was lost): go on from where the stream really ends
            expected = refused_last if refused_last >= 0 else await self._stream_last()
        if any(s is None for s in seqs):
            appended = sum(s is not None for s in seqs)
            raise LogFailed(f"{self.path}: {appended} of {n} records were appended; the rest lost the race to other "
                            f"writers {APPEND_ROUNDS} times — run the command again")
        got = [int(s) for s in seqs if s is not None]
        if any(b <= a for a, b in zip(got, got[1:])):
            # cannot happen with the chained expectations; said loudly rather than applied out of order
            raise LogFailed(f"{self.path}: the records of one append landed out of order ({got[:8]}…)")
        return got

    async def _resume(self, bodies: list[bytes], op_ids: list[str], seqs: list[int | None], start: int,
                      expected: int) -> tuple[int, int, bool, bool]:
        """Publish from `start` one record at a time, each expected at the stream's end: a duplicate is a record
        an earlier round stored (its seq taken, the end unmoved), a wrong end is taken from the refusal and the
        record sent again. Returns (where it stopped, the stream's end, whether a record was stored anew: then
        the rest are pipelined from there, whether nobody answered on the subject)."""
        j = start
        while j < len(bodies):
            fut = await self.conn.publish_acked(self.subject, bodies[j],
                                                {MSG_ID: op_ids[j], EXPECTED_LAST_SEQ: str(expected)})
            try:
                ack = await asyncio.wait_for(fut, ACK_S)
            except TimeoutError:
                return j, await self._stream_last(), False, False
            if ack.seq is not None:
                seqs[j] = ack.seq
                if not ack.duplicate:
                    return j + 1, ack.seq, True, False
                j += 1
                continue
            if ack.code not in (WRONG_LAST_SEQ, WRONG_LAST_MSG_ID, None):
                raise LogFailed(f"{self.path}: appending record {op_ids[j]} was refused: {ack.error}")
            if ack.unanswered:
                return j, expected, False, True
            m = _WRONG_LAST.search(ack.error or "")
            return j, int(m.group(1)) if m else await self._stream_last(), False, False
        return j, expected, True, False

    async def _stream_last(self) -> int:
        info = await self.conn.js.stream_info(self.stream)
        return int(info.state.last_seq)

    # -- reading ---------------------------------------------------------------------------------------
    def read(self, after: int = 0, *, start_offset: int = 0, limit: int | None = None,
             exact: bool = False) -> Iterator[tuple[Record, int]]:
        for record, frame in self.read_frames(after, start_offset=start_offset, limit=limit, exact=exact):
            yield record, frame.end

    def read_frames(self, after: int = 0, *, start_offset: int = 0, limit: int | None = None,
                    exact: bool = False) -> Iterator[tuple[Record, Frame]]:
        """Yield (record, frame) for every record with seq > after, in order, through the stream's end as
        it is when the read starts. A position on a stream ends at its seq: with `exact`, `start_offset`
        must be `after` (a file log's byte offset is not a position here). A seq that is not the previous
        + 1, or a stream that no longer starts at after + 1, is damage."""
        if limit is not None and limit <= 0:
            return
        if exact and start_offset != after:
            raise LogMismatch(self.path, start_offset, after,
                              f"the database's position (seq {after}, byte offset {start_offset}) is a file log's, not "
                              f"a position on {self.stream}: the node moved to JetStream without converting it — "
                              "`crewlet sync join` converts it", kind="mismatch")
        start = after + 1
        if self._ahead is not None and self._ahead.next == start and limit is None:
            yield from self._consume(start, self._ahead.target)   # carry on where the last read stopped
            return
        want = DIRECT_BATCH if limit is None else min(limit, DIRECT_BATCH)
        got = self.conn.run(self._direct(start, want)) if self._direct_ok else None
        if got is None:
            self._direct_ok = False   # a stream made without allow_direct: a consumer reads it all
            yield from self._read_by_consumer(after, limit, exact)
            return
        messages, pending = got
        known = self._last or 0   # the stream holds at least this much (this process's acks and questions)
        if not messages:
            if known > after:
                # a follower answered the direct get before it stored what the leader acknowledged: the leader's
                # consumer reads it (a writer must read its own appends back)
                yield from self._read_by_consumer(after, limit, exact)
            elif exact and after > known:
                first, last = self.state()
                if after > last:
                    raise self._cut(after, last)
                if last > after:
                    yield from self._read_by_consumer(after, limit, exact)
            return
        n = 0
        from_body = Record.from_body
        expect = start
        for seq, body in messages:
            if seq != expect:
                raise _gap(self, expect, seq, "the stream no longer holds them (removed by a limit, a purge or a "
                           "delete)")
            try:
                record = from_body(body, seq)
            except ValueError as exc:
                raise LogCorrupt(self.path, seq - 1, seq, f"undecodable record body: {exc}") from exc
            yield record, Frame(seq, body, seq - 1, seq)
            expect += 1
            n += 1
        behind = known > expect - 1      # a follower that had not stored all the leader acknowledged
        self._last = max(self._last or 0, expect - 1)
        if (pending or behind) and (limit is None or n < limit):
            # a long way behind: the rest through a consumer, which streams faster than batches of requests
            yield from self._read_by_consumer(expect - 1, None if limit is None else limit - n, True)

    def _cut(self, after: int, last: int) -> LogMismatch:
        return LogMismatch(self.path, last, after,
                           f"the stream {self.stream} ends at seq {last}, but the database applied it through seq "
                           f"{after}: records it applied are missing from the stream", kind="cut")

    def _read_by_consumer(self, after: int, limit: int | None, exact: bool) -> Iterator[tuple[Record, Frame]]:
        first, last = self.state()
        if exact and after > last:
            raise self._cut(after, last)
        if last <= after:
            return
        if first > after + 1:
            raise _gap(self, after + 1, first, "the stream no longer holds them (removed by a limit, a purge or a delete)")
        target = last if limit is None else min(last, after + limit)
        yield from self._consume(after + 1, target)

    async def _direct(self, start: int, batch: int) -> tuple[list[tuple[int, bytes]], int] | None:
        """Up to `batch` messages from seq `start` in one direct-get request (the records a node a little
        behind needs, without making a consumer), and how many more the stream holds past them. None when
        the stream does not answer direct gets."""
        import json

        nc = self.conn.nc
        inbox = nc.new_inbox()
        out: list[tuple[int, bytes]] = []
        done: asyncio.Future = asyncio.get_running_loop().create_future()

        async def on_msg(msg: Any) -> None:
            headers = msg.headers or {}
            status = headers.get("Status")
            if status is not None and not msg.data:
                if not done.done():
                    done.set_result((status, int(headers.get("Nats-Num-Pending") or 0)))
                return
            out.append((int(headers["Nats-Sequence"]), msg.data))

        sub = await nc.subscribe(inbox, cb=on_msg, pending_msgs_limit=-1, pending_bytes_limit=-1)
        try:
            await nc.publish(f"$JS.API.DIRECT.GET.{self.stream}", json.dumps({"seq": start, "batch": batch}).encode(),
                             reply=inbox)
            status, pending = await asyncio.wait_for(done, REQUEST_S)
        finally:
            await sub.unsubscribe()
        if status == "503":
            return None   # no responders: the stream does not allow direct gets
        if status not in ("204", "404"):
            # a request timed out inside the cluster (408), a leader gone: the servers' state, not the log's
            raise LogUnreachable(self.conn.servers, f"reading {self.stream} from seq {start} was answered {status}",
                                 since_ms=self.conn.down_since_ms)
        return out, pending

    def _consume(self, start: int, target: int) -> Iterator[tuple[Record, Frame]]:
        """Stream seqs start..target through a push consumer. A reader that stops taking records early (the
        applier ends a transaction every 20,000 records or second) leaves the consumer running: the next read
        from where it stopped carries on with it, and what the loop thread received during the commit is
        already waiting (`_ahead`)."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead.next != start:
            self._stop_consumer(ahead)
            ahead = None
        if ahead is None:
            q: queue.SimpleQueue = queue.SimpleQueue()
            ahead = _Ahead(start, target, q, self.conn.run(self._subscribe(start, target, q)))
        kept = False
        try:
            while ahead.next <= ahead.target:
                if ahead.at >= len(ahead.items):
                    try:
                        ahead.items, ahead.at = ahead.q.get(timeout=READ_IDLE_S), 0
                    except queue.Empty:
                        self.conn._mark_down("a read heard nothing")
                        raise LogUnreachable(self.conn.servers, f"reading {self.stream} from seq {ahead.next} heard "
                                             f"nothing for {READ_IDLE_S:g} s") from None
                    continue
                seq, body, record = ahead.items[ahead.at]
                expect = ahead.next
                if seq < expect:
                    ahead.at += 1
                    continue  # a redelivery after a reconnect: already yielded
                if seq > expect:
                    if self.conn.message(self.stream, expect) is None:
                        raise _gap(self, expect, seq, "the stream no longer holds them")
                    raise LogFailed(f"{self.path}: the consumer skipped from seq {expect - 1} to {seq} although the "
                                    "stream holds them — run the command again")
                if isinstance(record, ValueError):
                    raise LogCorrupt(self.path, seq - 1, seq, f"undecodable record body: {record}") from record
                # moved past before yielding: a reader that stops here has taken this record
                ahead.at += 1
                ahead.next = expect + 1
                yield record, Frame(seq, body, seq - 1, seq)
        except GeneratorExit:
            if ahead.next <= ahead.target and not self._closed:
                self._ahead, kept = ahead, True
            raise
        finally:
            if not kept:
                self._stop_consumer(ahead)

    def _stop_consumer(self, ahead: _Ahead) -> None:
        try:
            self.conn.run(self._unsubscribe(ahead.sub), timeout=REQUEST_S)
        except Exception:  # the consumer is ephemeral: the server drops it after its inactive threshold
            pass

    async def _subscribe(self, start: int, target: int, q: queue.SimpleQueue) -> Any:
        from nats.js import api

        nc = self.conn.nc
        inbox = nc.new_inbox()
        put = q.put
        from_body = Record.from_body
        buf: list[tuple[int, bytes, Any]] = []
        loop = asyncio.get_running_loop()
        flush_soon: list[Any] = [None]

        def flush() -> None:
            flush_soon[0] = None
            if buf:
                put(buf[:])
                buf.clear()

        def on_raw(_subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
            # handed to the reading thread a few hundred at a time (a hand-off per record cost more than the
            # record), and at once at the target or when the server pauses
            if not data:
                _control(nc, reply, headers)   # flow control and heartbeats
                flush()
                return
            seq = _stream_seq(reply)
            # decoded here, on the loop's thread: it runs while the applier's thread is inside SQLite (which
            # lets go of the GIL), so on two cores the decoding overlaps the applying
            try:
                record: Any = from_body(data, seq)
            except ValueError as exc:
                record = exc
            buf.append((seq, data, record))
            if len(buf) >= FLUSH_RECORDS or seq >= target:
                flush()
            elif flush_soon[0] is None:
                flush_soon[0] = loop.call_later(0.005, flush)

        sub = await self.conn.subscribe_raw(inbox, on_raw)
        cfg = api.ConsumerConfig(
            deliver_subject=inbox, deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start,
            ack_policy=api.AckPolicy.NONE, flow_control=True, idle_heartbeat=5.0, mem_storage=True,
            inactive_threshold=30.0, num_replicas=1, max_deliver=1)
        try:
            info = await self.conn.js._jsm.add_consumer(self.stream, config=cfg)
        except BaseException:
            await self.conn.unsubscribe_raw(sub)
            raise
        return sub, info.name

    async def _unsubscribe(self, handle: Any) -> None:
        sub, name = handle
        await self.conn.unsubscribe_raw(sub)
        try:
            await self.conn.js._jsm.delete_consumer(self.stream, name)
        except Exception:
            pass


@dataclass
class _Ahead:
    """A consumer streaming seqs `next`..`target` into `q` (lists of (seq, body, record or the ValueError its
    body raised)); `items[at:]` taken off it and not yielded yet."""
    next: int
    target: int
    q: queue.SimpleQueue
    sub: Any
    items: list = field(default_factory=list)
    at: int = 0


def _stream_seq(reply: bytes) -> int:
    """The stream sequence in a JetStream delivery's reply subject ($JS.ACK.<stream>.<consumer>.<delivered>.
    <stream seq>.<consumer seq>.<ts>.<pending>, or the v2 form with a domain and an account hash)."""
    tokens = reply.split(b".")
    return int(tokens[5] if len(tokens) == 9 else tokens[7])


_STALLED = b"Nats-Consumer-Stalled:"


def _control(nc: Any, reply: bytes, headers: bytes | None) -> None:
    """A push consumer's control message (status 100): a flow-control request is answered on its reply subject;
    a heartbeat that says the consumer stalled names where to answer (the Nats-Consumer-Stalled header)."""
    if not headers or not headers.startswith(b"NATS/1.0 100"):
        return
    to = reply
    if not to:
        at = headers.find(_STALLED)
        if at < 0:
            return
        to = headers[at + len(_STALLED):].split(b"\r\n", 1)[0].strip()
    if to:
        asyncio.ensure_future(nc.publish(to.decode(), b""))


def _gap(log: JetStreamLog, expected: int, found: int, why: str) -> LogDamage:
    missing = f"seq {expected}" if found == expected + 1 else f"seqs {expected}-{found - 1}"
    exc = LogGap(log.path, expected - 1, expected, found)
    exc.args = (f"{log.stream} on {log.conn.servers}: sequence gap: expected seq {expected}, found {found} — {missing} "
                f"missing: {why}",)
    exc.reason = f"{missing} missing: {why}"
    exc.fix = ("the stream lost records nodes need: start this node from a snapshot of a node that applied them "
               "(`crewlet sync snapshot FILE` there, `crewlet sync adopt FILE` here)")
    return exc


# -- a node's two logs ---------------------------------------------------------------------------------------

def open_logs(settings: Any, *, name: str = "crewlet") -> tuple[JetStreamLog, JetStreamLog]:
    """The pages log and the vector log of a company on JetStream, sharing one connection. Servers that
    cannot be reached leave both logs offline (every call raises LogUnreachable until they answer), so
    a node opens for reading whatever the network does; bad credentials are refused here."""
    conn = Connection(settings, name=name)
    try:
        conn.connect()
    except LogUnreachable:
        conn.close()
        raise
    return JetStreamLog(conn, settings.stream_prefix, "pages"), JetStreamLog(conn, settings.stream_prefix, "vectors")


CONTACT_FILE = "log-contact.json"
CONTACT_EVERY_MS = 10_000
_noted: dict[Path, int] = {}


def note_contact(home: Home) -> None:
    """This node applied from the servers just now: kept (at most every 10 s) in its home, so a node that
    later cannot reach them says how long it has been behind."""
    import json

    from ..durable import write_atomic

    now = now_ms()
    path = home.root / CONTACT_FILE
    if now - _noted.get(path, 0) < CONTACT_EVERY_MS:
        return
    try:
        write_atomic(path, json.dumps({"last_contact_ms": now}).encode(), durable=False)
    except OSError:
        return
    _noted[path] = now


def last_contact(home: Home) -> int | None:
    import json

    try:
        return int(json.loads((home.root / CONTACT_FILE).read_text(encoding="utf-8"))["last_contact_ms"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


# -- what the servers promise ----------------------------------------------------------------------------------

LAZY_DEFAULT_S = 120.0
MONITOR_PORT = 8222


@dataclass
class ServerDurability:
    """What one server says of its fsync: `always` (every write synced before it is acknowledged) or an
    interval (acknowledged writes wait up to that long in the page cache: the lazy default is 2 min)."""

    where: str                      # the monitor URL it was read from
    server: str = ""
    version: str = ""
    sync_always: bool = False
    sync_interval_s: float | None = None
    error: str | None = None        # why it could not be read

    @property
    def lazy(self) -> bool:
        return self.error is None and not self.sync_always

    def line(self) -> str:
        if self.error is not None:
            return (f"{self.where}: sync_interval unknown ({self.error}) — set [log] monitor to the servers' "
                    "monitoring URLs; a server left at its default fsyncs every 2 min")
        who = f"{self.server} ({self.version})" if self.server else self.where
        if self.sync_always:
            return f"{who}: sync_interval always — every acknowledged write is on disk"
        lazy = ("the lazy default: acknowledged writes can be lost by a power loss or a crash of the machine "
                "(Jepsen, NATS 2.12.1, Dec 2025)" if self.sync_interval_s == LAZY_DEFAULT_S else
                "acknowledged writes can be lost by a power loss or a crash of the machine within that window")
        return f"{who}: sync_interval {self.sync_interval_s:g} s — {lazy}; set `sync_interval: always` in its jetstream block"

    def to_json(self) -> dict[str, Any]:
        return {"monitor": self.where, "server": self.server, "version": self.version, "sync_always": self.sync_always,
                "sync_interval_s": self.sync_interval_s, "lazy": self.lazy, "error": self.error}


def monitor_urls(settings: Any) -> list[str]:
    """Where the servers' /varz is: [log] monitor, else the NATS default monitoring port on each server's host."""
    if settings.monitor:
        return list(settings.monitor)
    from urllib.parse import urlsplit

    hosts = []
    for url in settings.url:
        host = urlsplit(url).hostname or ""
        if host and host not in hosts:
            hosts.append(host)
    return [f"http://{h}:{MONITOR_PORT}" for h in hosts]


def durability(settings: Any, *, timeout: float = 1.0) -> list[ServerDurability]:
    import json
    import urllib.request

    out = []
    for where in monitor_urls(settings):
        d = ServerDurability(where)
        try:
            with urllib.request.urlopen(f"{where.rstrip('/')}/varz", timeout=timeout) as resp:
                varz = json.loads(resp.read())
            cfg = (varz.get("jetstream") or {}).get("config") or {}
            d.server, d.version = str(varz.get("server_name") or ""), str(varz.get("version") or "")
            d.sync_always = bool(cfg.get("sync_always"))
            interval = cfg.get("sync_interval")
            d.sync_interval_s = interval / 1e9 if isinstance(interval, (int, float)) else LAZY_DEFAULT_S
        except (OSError, ValueError) as exc:
            d.error = f"no /varz at {where}: {getattr(exc, 'reason', exc)}"
        out.append(d)
    return out
