"""`crewlet sync join nats://HOST:4222`: a company's logs onto NATS JetStream, and new nodes from there.

- **first** — an existing home on the file backend (its own logs, or a shared directory's): it becomes the
  company's first node on JetStream. Holding its logs' writers' lock, it creates the streams (pages, vectors)
  with crewlet's durability settings (`jetstream.StreamWant`), copies every record in order (each append
  carries its op_id as Nats-Msg-Id, so an interrupted copy run again duplicates nothing), then verifies the
  other side: a fresh database applied from the streams alone must hold the content digest of this node's own
  database. Only then is the company switched: the configuration (with its [log] table) goes to the company
  key-value bucket, company.toml says `backend = "jetstream"` (in the shared directory too, where the other
  nodes read it and follow at their next open), the database's positions become stream positions, and the
  file logs are kept aside (renamed: a writer that still held one refuses rather than append to it).
- **already** — a home on JetStream already, at these servers: it applies what is new (a re-run is a no-op).
- **new** — a home that does not exist yet: its company.toml comes from the bucket (with its activation
  instant), then a database — empty, or a snapshot checked against the streams (`--snapshot FILE`) — and the
  node applies the streams after the snapshot's position.
- **follow** — a node of a shared directory whose company moved: done by `follow` when it next opens.
"""
from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import config as config_mod
from ..log import joining
from ..clock import now_ms
from ..durable import write_atomic
from ..errors import CrewletError, Refused
from ..log import FileLog, Record
from ..log.jetstream import (Connection, JetStreamLog, LogUnreachable, StreamRefused, StreamWant, company_bucket,
                             stream_name, subject_of)
from ..pages import applier
from ..paths import Home
from ..repair import aside_stamp, home_logs
from ..store import connect
from ..store import replace as replace_db
from . import snapshot as snapshot_mod
from ..store.digest import content_digest
from .join_steps import logs_held, open_and_apply, running_here, whole_or_nothing
from .target import LogUrl
from ..log.jetstream_company import publish_company, read_company, set_activation

COPY_BATCH = 1000


@dataclass
class NatsJoinResult:
    kind: str                        # first | already | new
    servers: str
    node_id: str
    applied: int = 0
    copied: dict[str, int] = field(default_factory=dict)      # log -> records copied onto its stream
    digest: str | None = None                                  # the content digest both sides hold
    snapshot: snapshot_mod.SnapshotInfo | None = None
    kept_aside: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)          # streams this join created

    def to_json(self) -> dict[str, Any]:
        return {"joined": self.kind, "servers": self.servers, "node_id": self.node_id, "applied": self.applied,
                "copied": self.copied, "digest": self.digest, "created": self.created,
                "snapshot": self.snapshot.to_json() if self.snapshot else None, "kept_aside": self.kept_aside}


def settings_for(url: LogUrl, company: config_mod.Company | None, *, replicas: int | None,
                 prefix: str | None, creds: str | None = None, token_env: str | None = None,
                 tls_ca: str | None = None) -> config_mod.LogSettings:
    """The [log] table a join writes: the servers given, the rest from the company's own [log] when it has a
    JetStream one, else the defaults (one replica for one server, three for a cluster)."""
    base = company.log if company is not None and company.log.backend == "jetstream" else config_mod.LogSettings()
    n = replicas if replicas is not None else (base.replicas if base.backend == "jetstream"
                                               else (3 if len(url.servers) >= 3 else 1))
    out = replace(base, backend="jetstream", url=url.servers, replicas=n, stream_prefix=prefix or base.stream_prefix,
                  creds=creds if creds is not None else base.creds,
                  token_env=token_env if token_env is not None else base.token_env,
                  tls_ca=tls_ca if tls_ca is not None else base.tls_ca)
    table = {"log": log_table(out)}   # checked as company.toml will check it, before anything is written
    try:
        return config_mod.parse(table | config_mod.empty_config(), Path("--options")).log
    except config_mod.ConfigError as exc:
        raise Refused(f"{exc}", code="usage") from None


def log_table(s: config_mod.LogSettings) -> dict[str, Any]:
    """The [log] table as company.toml writes it (defaults left out)."""
    out: dict[str, Any] = {"backend": "jetstream", "url": list(s.url)}
    d = config_mod.LogSettings()
    for key in ("stream_prefix", "replicas", "creds", "token_env", "tls_ca", "duplicate_window_s"):
        if getattr(s, key) != getattr(d, key):
            out[key] = getattr(s, key)
    if s.monitor:
        out["monitor"] = list(s.monitor)
    return out


def wants(s: config_mod.LogSettings) -> list[StreamWant]:
    return [StreamWant(stream_name(s.stream_prefix, log), subject_of(s.stream_prefix, log), s.replicas,
                       s.duplicate_window_s) for log in ("pages", "vectors")]


def join(home: Home, url: LogUrl, *, snapshot: Path | None = None, operator: str | None = None,
         replicas: int | None = None, prefix: str | None = None, creds: str | None = None,
         token_env: str | None = None, tls_ca: str | None = None,
         progress: Callable[[int], None] | None = None) -> NatsJoinResult:

    if home.config_file.is_file() or home.shared is not None:
        company = config_mod.load(home.config_file)
        if snapshot is not None:
            raise Refused(f"--snapshot starts a new node, and {home.root} is an existing home — give a new --home "
                          f"(`crewlet --home NEW sync join {url} --snapshot {snapshot}`)", code="home_exists")
        if company.log.backend == "jetstream":
            if set(company.log.url) != set(url.servers):
                raise Refused(f"{home.root} is a node of the company on {','.join(company.log.url)} — a home's logs are "
                              f"in one place; join {url} with a new home (`crewlet --home NEW sync join {url}`)",
                              code="already_joined")
            settings = config_mod.load_node(home.node_file)
            return NatsJoinResult("already", url.shown(), settings.node_id, applied=open_and_apply(home, progress))
        busy = running_here(home)
        if busy:
            raise Refused(f"{busy} is running on {home.root} — stop it (quit the app, stop `crewlet worker`) and join "
                          "again", code="busy")
        return _first(home, url, company, settings_for(url, company, replicas=replicas, prefix=prefix, creds=creds,
                                                       token_env=token_env, tls_ca=tls_ca), progress)
    return _new_node(home, url, snapshot, operator, settings_for(url, None, replicas=replicas, prefix=prefix,
                                                                 creds=creds, token_env=token_env, tls_ca=tls_ca), progress)


def _connect(s: config_mod.LogSettings, name: str) -> Connection:
    conn = Connection(s, name=name)
    try:
        if not conn.connect():
            raise LogUnreachable(conn.servers, conn.down_why or "no answer")
    except LogUnreachable as exc:
        conn.close()
        raise CrewletError(f"{exc} — nothing was changed; start the server, or check the URL and [log] credentials",
                           code="unreachable") from None
    return conn.retain()   # the logs opened on it come and go; the caller releases it last


# -- the first node -------------------------------------------------------------------------------------------

def _first(home: Home, url: LogUrl, company: config_mod.Company, s: config_mod.LogSettings,
           progress: Callable[[int], None] | None) -> NatsJoinResult:

    node_settings = config_mod.load_node(home.node_file)
    result = NatsJoinResult("first", url.shown(), node_settings.node_id or config_mod.new_node_id())
    conn = _connect(s, f"crewlet join {result.node_id}")
    try:
        # this node's database holds everything its logs hold before anything is copied
        open_and_apply(home, None)
        with logs_held(home):
            for want in wants(s):
                try:
                    if conn.ensure_stream(want, create=True):
                        result.created.append(want.name)
                except StreamRefused as exc:
                    raise Refused(str(exc), code="stream_settings") from None
            logs = {spec.name: spec for spec in home_logs(home)}
            for _want, log in zip(wants(s), ("pages", "vectors")):
                with JetStreamLog(conn, s.stream_prefix, log) as stream:
                    result.copied[log] = _copy(logs[log].path, stream, progress)
            result.digest = _verify_other_side(home, conn, s)
            # the company's configuration travels through NATS: a new node needs only the URL (published before the
            # switch is written down: a join killed before the note leaves the home on its logs, and a second one
            # publishes the same text again)
            data = dict(company.raw)
            data["log"] = log_table(s)
            text = _toml(data, home.config_file)
            activated_at = company.activated_at or now_ms()
            publish_company(conn, s.stream_prefix, text, activated_at)
            stamp = aside_stamp()
            plan = {"kind": "nats-first", "text": text, "activated_at": company.activated_at,
                    "shared": str(home.shared) if home.shared is not None else None,
                    "had_node_id": bool(node_settings.node_id),
                    "node_toml": joining.node_toml(replace(node_settings, node_id=result.node_id, shared=None).to_toml()),
                    "logs": {str(spec.path): f"{spec.path.name}.before-jetstream-{stamp}" for spec in logs.values()}}
            with replace_db.held(home.db_file):
                joining.begin(home, plan)
                result.kept_aside = joining.nats_first_steps(home.root, plan)
    finally:
        conn.release()
    result.applied = open_and_apply(Home(home.root), progress)
    return result


def _copy(path: Path, stream: JetStreamLog, progress: Callable[[int], None] | None) -> int:
    """Copy a file log's records onto its stream, in order, after what the stream already holds of them (an
    earlier, interrupted copy); a stream holding anything else is refused. Returns the records copied."""
    if not path.exists():
        return 0
    have = stream.last_seq()
    copied = 0
    with FileLog(path, readonly=True) as flog:
        if have:
            # what the stream holds must be this log's first records, byte for byte
            for (_rec, frame), (_srec, sframe) in zip(flog.read_frames(limit=have),
                                                      stream.read_frames(after=0, start_offset=0, limit=have)):
                if frame.body != sframe.body or frame.seq != sframe.seq:
                    raise Refused(f"the stream {stream.stream} on {stream.conn.servers} holds another log (seq "
                                  f"{sframe.seq} differs from {path}) — use another [log] stream_prefix "
                                  "(`--prefix`), or other servers", code="another_log")
            total = flog.scan().last_seq
            if total < have:
                raise Refused(f"the stream {stream.stream} holds {have:,} records and {path} only {total:,}: it is "
                              "another company's — use another stream prefix (`--prefix`)", code="another_log")
        batch: list[Record] = []
        for rec, _frame in flog.read_frames(after=have):
            batch.append(rec)
            if len(batch) >= COPY_BATCH:
                copied += _append_exact(stream, batch)
                batch = []
                if progress:
                    progress(COPY_BATCH)
        if batch:
            copied += _append_exact(stream, batch)
            if progress:
                progress(len(batch))
    return copied


def _append_exact(stream: JetStreamLog, batch: list[Record]) -> int:
    """Append copies whose seqs must come out as they were in the file (nobody else writes the new streams:
    the first node holds its logs' lock and no other node knows them yet)."""
    written = stream.append_frames(batch)
    for rec, (out, _frame) in zip(batch, written):
        if out.seq != rec.seq:
            raise CrewletError(f"{stream.stream}: record {rec.seq} of the file log landed as seq {out.seq} — another "
                               "writer is using the stream; nothing was switched", code="another_writer")
    return len(written)


def _verify_other_side(home: Home, conn: Connection, s: config_mod.LogSettings) -> str:
    """A fresh database applied from the streams alone must hold this node's own content digest."""
    with tempfile.TemporaryDirectory(prefix="crewlet-verify-", dir=home.root) as tmp:
        fresh = connect(Path(tmp) / "crewlet.db")
        try:
            with JetStreamLog(conn, s.stream_prefix, "pages") as pages, \
                    JetStreamLog(conn, s.stream_prefix, "vectors") as vectors:
                from ..vectors import applier as vectors_mod

                applier.catch_up(fresh, pages)
                vectors_mod.catch_up(fresh, vectors)
            theirs = content_digest(fresh).content
        finally:
            fresh.close()
    own = connect(home.db_file)
    try:
        mine = content_digest(own).content
    finally:
        own.close()
    if theirs != mine:
        raise CrewletError(f"the streams on {conn.servers} do not give back this node's content (digest {theirs} there, "
                           f"{mine} here) — nothing was switched; `crewlet log check`, then join again",
                           code="digest_mismatch")
    return mine


def _toml(data: dict[str, Any], file: Path) -> str:
    import tomli_w

    text = tomli_w.dumps(data)
    config_mod.parse(__import__("tomllib").loads(text), file)   # never publish a configuration that would not load
    return text


# -- a new node -------------------------------------------------------------------------------------------------

def _new_node(home: Home, url: LogUrl, snapshot: Path | None, operator: str | None, s: config_mod.LogSettings,
              progress: Callable[[int], None] | None) -> NatsJoinResult:
    if home.root.exists() and any(home.root.iterdir()):
        raise Refused(f"{home.root} is not a crewlet home and not empty — give a new (or empty) directory as --home",
                      code="invalid_home")
    conn = _connect(s, "crewlet join")
    try:
        got = read_company(conn, s.stream_prefix)
        if got is None:
            raise Refused(f"there is no company on {url} (no {company_bucket(s.stream_prefix)} bucket): join it from the "
                          f"company's first node first (`crewlet --home HOME sync join {url}`)", code="no_company")
        text, activated_at = got
        for want in wants(config_mod.parse(__import__("tomllib").loads(text), home.config_file).log):
            try:
                conn.ensure_stream(want, create=False)
            except StreamRefused as exc:
                raise Refused(str(exc), code="stream_settings") from None
    finally:
        conn.release()
    company = config_mod.parse(__import__("tomllib").loads(text), home.config_file)
    if operator is not None and operator not in company.actors:
        raise Refused(f"--operator {operator} is not an actor of the company on {url} — name one of: "
                      f"{', '.join(sorted(company.actors)) or 'none'}", code="unknown_actor")
    result = NatsJoinResult("new", url.shown(), config_mod.new_node_id())

    created = not home.root.exists()
    with whole_or_nothing(home.root), replace_db.held(home.db_file):
        # a new node killed before it is whole is undone by the next open (it holds nothing of its own yet)
        joining.begin(home, {"kind": "new", "shared": None, "created": created})
        write_atomic(home.config_file, text.encode("utf-8"))
        set_activation(home.config_file, activated_at)
        config_mod.write_node(home.node_file, config_mod.NodeSettings(result.node_id, operator, None))
        if snapshot is not None:
            result.snapshot = snapshot_mod.check(Home(home.root), snapshot)
            snapshot_mod.install(Home(home.root), result.snapshot)
        joining.done(home)
    result.applied = open_and_apply(Home(home.root), progress)
    return result
