"""[log]: where the company's ordered logs live — the section's settings and its parser.

Absent, the file backend (a file per log in the home, or the shared directory it joined). `core.config`
composes this section (config.SECTIONS); the kit (core/settings.py) checks each value.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.settings import ENV_NAME_RE, ConfigError, expect, only_known, server_urls, table, whole

TABLE = "log"
BACKENDS = ("file", "jetstream")
STREAM_PREFIX_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
KEYS = ("backend", "url", "stream_prefix", "replicas", "creds", "token_env", "tls_ca", "monitor", "duplicate_window_s")


@dataclass(frozen=True)
class LogSettings:
    """[log]: where the company's ordered logs live. "file": a file per log in the home (or the shared
    directory it joined); "jetstream": a stream per log on NATS JetStream (core/log/jetstream.py)."""
    backend: str = "file"
    url: tuple[str, ...] = ()      # NATS servers, nats:// or tls:// (one, or a cluster's several)
    stream_prefix: str = "crewlet"  # streams PREFIX-pages and PREFIX-vectors, key-value bucket PREFIX-company
    replicas: int = 1             # 1 for a single server, 3 for a cluster
    creds: str = ""               # a NATS credentials file (JWT + seed, or an nkey seed), read on each node
    token_env: str = ""           # the NAME of the environment variable holding a token; never the token
    tls_ca: str = ""              # a CA file for tls:// servers signed by a private CA
    monitor: tuple[str, ...] = ()  # the servers' monitoring URLs (http://HOST:8222), where /varz says sync_interval
    duplicate_window_s: int = 600  # how long a record's op_id is remembered against a retried append


def parse(file: Path, raw: Any) -> LogSettings:
    """[log]; absent (None) means the file backend."""
    t = table(file, TABLE, raw, "make [log] a table")
    only_known(file, TABLE, t, KEYS)
    backend = t.get("backend", "file")
    if backend not in BACKENDS:
        raise ConfigError(file, "log.backend", f"{backend!r} is not a log backend", 'set it to "file" or "jetstream"')
    if backend == "file":
        extra = [k for k in t if k != "backend"]
        if extra:
            raise ConfigError(file, f"log.{extra[0]}", 'is a setting of backend = "jetstream"',
                              'remove it, or set backend = "jetstream"')
        return LogSettings()
    if "url" not in t:
        raise ConfigError(file, "log.url", 'backend = "jetstream" needs the NATS servers',
                          'add url = "nats://HOST:4222" (a list for a cluster)')
    url = server_urls(file, "log.url", t["url"], ("nats", "tls"), '"nats://HOST:4222"')
    prefix = expect(file, "log.stream_prefix", t.get("stream_prefix", "crewlet"), str, 'stream_prefix = "crewlet"')
    if not STREAM_PREFIX_RE.match(prefix):
        raise ConfigError(file, "log.stream_prefix", f"{prefix!r} cannot name a stream",
                          "use 1-32 letters, digits, '_' or '-'")
    replicas = whole(file, "log.replicas", t.get("replicas", 1), low=1, high=5, example="replicas = 3")
    window = whole(file, "log.duplicate_window_s", t.get("duplicate_window_s", 600), low=1, high=7 * 86400,
                   example="duplicate_window_s = 600")
    token_env = expect(file, "log.token_env", t.get("token_env", ""), str, 'token_env = "NATS_TOKEN"')
    if token_env and not ENV_NAME_RE.match(token_env):
        raise ConfigError(file, "log.token_env", "is not an environment variable name",
                          'put the token in an environment variable and name it here, e.g. token_env = "NATS_TOKEN"')
    creds = expect(file, "log.creds", t.get("creds", ""), str, 'creds = "~/.nats/crewlet.creds"')
    tls_ca = expect(file, "log.tls_ca", t.get("tls_ca", ""), str, 'tls_ca = "/etc/nats/ca.pem"')
    monitor = server_urls(file, "log.monitor", t["monitor"], ("http", "https"), '"http://HOST:8222"') if "monitor" in t else ()
    return LogSettings("jetstream", url, prefix, replicas, creds, token_env, tls_ca, monitor, window)
