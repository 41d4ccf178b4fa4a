"""What `crewlet sync join TARGET` joins: a shared directory, or NATS servers given as URLs.

A `scheme://` argument is always a URL, never a path: `nats://127.0.0.1:4222` once made a local
directory `nats:` and joined it. `nats://` and `tls://` name NATS servers (several, comma-separated, for
a cluster); any other scheme is refused, naming it and what works.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import Refused

SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")
NATS_SCHEMES = ("nats", "tls")
HOW = "give a shared directory, or NATS servers as nats://HOST:4222 (tls://HOST:4222 for TLS; several comma-separated)"


@dataclass(frozen=True)
class LogUrl:
    """NATS servers: each `nats://` or `tls://` (scheme lower-cased), in the order given."""

    servers: tuple[str, ...]

    @property
    def tls(self) -> bool:
        return any(s.startswith("tls://") for s in self.servers)

    def shown(self) -> str:
        """The servers as said to a person: a password in a URL is never printed."""
        return ",".join(redact(s) for s in self.servers)

    def __str__(self) -> str:
        return self.shown()


def redact(server: str) -> str:
    parts = urlsplit(server)
    if parts.password is None and parts.username is None:
        return server
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{user}:***@{host}{port}" if parts.password is not None else f"{parts.scheme}://***@{host}{port}"


def is_url(text: str) -> bool:
    return SCHEME_RE.match(text.strip()) is not None


def parse_target(text: str | Path) -> Path | LogUrl:
    """A Path for anything that is not `scheme://…`; a LogUrl for NATS servers; refused otherwise."""
    if isinstance(text, Path):
        return text
    raw = text.strip()
    if not is_url(raw):
        return Path(text)
    servers = []
    for part in (p.strip() for p in raw.split(",")):
        if not part:
            continue
        match = SCHEME_RE.match(part)
        if match is None:
            raise Refused(f"{part!r} in {raw!r} is not a URL — {HOW}", code="invalid_url")
        scheme = match.group(1).lower()
        if scheme not in NATS_SCHEMES:
            raise Refused(f"{redact(part)}: crewlet keeps no log at a {scheme}:// URL — {HOW}", code="unknown_scheme")
        rest = part[match.end():]
        parts = urlsplit(f"{scheme}://{rest}")
        try:
            port = parts.port
        except ValueError:
            raise Refused(f"{redact(part)}: the port is not a number — e.g. nats://HOST:4222", code="invalid_url") from None
        if not parts.hostname or parts.path not in ("", "/") or parts.query or parts.fragment:
            raise Refused(f"{redact(part)} names no NATS server — e.g. nats://HOST:4222 (no path)", code="invalid_url")
        del port  # parsed for its refusal only; nats-py takes the URL as written
        servers.append(f"{scheme}://{rest.rstrip('/')}")
    if not servers:
        raise Refused(f"{raw!r} names no server — {HOW}", code="invalid_url")
    return LogUrl(tuple(servers))
