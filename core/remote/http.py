"""One connection pool per remote backend, bounded requests, and every failure in words.

A searcher keeps one pool for its life (core/http_client.py: keep-alive, no redirect followed, the answer
read bounded). Each request is bounded by the integration's connect and read timeouts, and the whole
exchange by their sum.

Nothing here raises past `request()` but `RemoteFailure`, whose `words` say what a person can act on —
the status (401, 403, 404, 429, 5xx), a timeout with its bound, an unreachable host, an answer that is
not JSON — with every secret the request carried taken out.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from core.errors import CrewletError
from core.http_client import Pool, transport_failure

if TYPE_CHECKING:
    import httpx
# httpx is imported when the first request is made (core/http_client.py says why)

MAX_ANSWER_BYTES = 32 * 1024 * 1024
MAX_WORDS = 300


class RemoteFailure(CrewletError):
    """A request that did not produce an answer to read. `kind` is stable for scripts and tests."""

    code = "remote_failed"

    def __init__(self, kind: str, words: str, status: int | None = None) -> None:
        super().__init__(words, kind=kind, status=status)
        self.kind = kind            # unauthorized | forbidden | not_found | rate_limited | server | refused
        #                             timeout | unreachable | bad_json | bad_answer
        self.words = words
        self.status = status


def segment(value: str) -> str:
    """One segment of a request's path, made of a page id, a key or a slug: every reserved character quoted,
    so a value can never reach another path ("?", "#" and "/" quoted; "." and "..", which a client resolves
    as a step up, refused)."""
    if value in ("", ".", ".."):
        raise RemoteFailure("not_found", f"'{value}' is not an id")
    return quote(value, safe="")


@dataclass(frozen=True)
class Auth:
    """What a request carries to say who it is: headers, and the secrets in them (for redaction)."""

    headers: dict[str, str] = field(default_factory=dict)
    secrets: tuple[str, ...] = ()


def _redact(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    return text


def _one_line(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= MAX_WORDS else line[:MAX_WORDS - 1] + "…"


def _server_message(raw: bytes) -> str:
    """The server's own explanation, when its error body carries one (Confluence: message; Plane:
    error/detail), else the first words of the body."""
    text = raw[:2000].decode("utf-8", "replace")
    try:
        body = json.loads(text)
    except ValueError:
        return text.strip()[:160]
    if isinstance(body, dict):
        for key in ("message", "error", "detail"):
            value = body.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
            if isinstance(value, dict) and isinstance(value.get("message"), str):
                return value["message"]
    return ""


class RemoteHTTP:
    """A backend's base URL and its one connection pool (core/http_client.py). Thread-safe."""

    def __init__(self, name: str, base_url: str, *, connect_s: float, read_s: float) -> None:
        self.name = name                 # "Confluence" | "Plane": the words say who answered
        self.base_url = base_url.rstrip("/")
        self.connect_s, self.read_s = connect_s, read_s
        self._pool = Pool(timeout={"connect": connect_s, "read": read_s, "write": read_s, "pool": connect_s},
                          max_connections=8, headers={"Accept": "application/json", "User-Agent": "crewlet"})

    @property
    def requests(self) -> int:
        """Made over this pool's life (for a bench or a test to read)."""
        return self._pool.requests

    @property
    def bound_s(self) -> float:
        """The most one request may cost."""
        return self.connect_s + self.read_s

    def client(self) -> httpx.Client:
        return self._pool.client()

    def close(self) -> None:
        self._pool.close()

    def request(self, method: str, path: str, auth: Auth, *, params: Any = None, body: Any = None,
                missing_ok: bool = False) -> Any:
        """The parsed JSON answer (None for an empty 2xx body, or a 404 when `missing_ok`); every other
        outcome is a RemoteFailure."""
        headers = dict(auth.headers)
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            status, raw = self._pool.fetch(
                method, f"{self.base_url}{path}", bound_s=self.bound_s, max_bytes=MAX_ANSWER_BYTES,
                too_large=lambda bound: RemoteFailure("bad_answer", self._words(
                    f"the answer passed {bound >> 20} MiB", auth)),
                params=params, headers=headers,
                content=None if body is None else json.dumps(body).encode("utf-8"))
        except Exception as exc:
            kind = transport_failure(exc)
            if kind in ("connect_timeout", "timeout"):
                what = "no connection" if kind == "connect_timeout" else "no answer"
                raise RemoteFailure("timeout", self._words(
                    f"timed out: {what} within {self.bound_s:g} s (connect_timeout_s {self.connect_s:g} + "
                    f"read_timeout_s {self.read_s:g})", auth)) from None
            if kind is not None:
                raise RemoteFailure("unreachable", self._words(f"cannot be reached: {exc or type(exc).__name__}",
                                                               auth)) from None
            raise
        return self._read(status, raw, auth, missing_ok)

    def _words(self, what: str, auth: Auth) -> str:
        return _one_line(_redact(f"{self.name} at {self.base_url} {what}", auth.secrets))

    def _read(self, status: int, raw: bytes, auth: Auth, missing_ok: bool) -> Any:
        if status == 404 and missing_ok:
            return None
        if not 200 <= status < 300:
            said = _server_message(raw)
            said = f" ({said})" if said else ""
            if status == 401:
                raise RemoteFailure("unauthorized", self._words(
                    f"answered 401: the credential was refused{said}", auth), status)
            if status == 403:
                raise RemoteFailure("forbidden", self._words(
                    f"answered 403: the credential may not do this{said}", auth), status)
            if status == 404:
                raise RemoteFailure("not_found", self._words(f"answered 404: not found{said}", auth), status)
            if status == 429:
                raise RemoteFailure("rate_limited", self._words(f"answered 429: rate limited{said}", auth), status)
            if status >= 500:
                raise RemoteFailure("server", self._words(f"answered {status}: a server error{said}", auth), status)
            if status in (301, 302, 303, 307, 308):
                raise RemoteFailure("refused", self._words(
                    f"answered {status}: a redirect (not followed) — check the integration's url", auth), status)
            raise RemoteFailure("refused", self._words(f"answered {status}{said}", auth), status)
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise RemoteFailure("bad_json", self._words(
                f"answered {status} with a body that is not JSON (a proxy or a login page?)", auth), status) from None
