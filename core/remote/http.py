"""One connection pool per remote backend, bounded requests, and every failure in words.

A searcher keeps one `httpx.Client` for its life (keep-alive: a search after the first one costs no TCP
or TLS handshake). Each request is bounded by the integration's connect and read timeouts, and the whole
exchange by their sum: httpx bounds each connect and each read, not the answer, so the body is read in
chunks and cut at the first one past the deadline (a server that trickles bytes costs the bound, no more).
Redirects are never followed: they would carry the credential wherever the server points.

Nothing here raises past `request()` but `RemoteFailure`, whose `words` say what a person can act on —
the status (401, 403, 404, 429, 5xx), a timeout with its bound, an unreachable host, an answer that is
not JSON — with every secret the request carried taken out.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    import httpx
# httpx is imported when the first request is made: `import httpx` loads its command line (click, rich)
# too, and core stays importable without any UI framework (tests/test_core_isolation.py)

MAX_ANSWER_BYTES = 32 * 1024 * 1024
MAX_WORDS = 300


class RemoteFailure(Exception):
    """A request that did not produce an answer to read. `kind` is stable for scripts and tests."""

    def __init__(self, kind: str, words: str, status: int | None = None) -> None:
        super().__init__(words)
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
    """A backend's base URL and its one connection pool. Thread-safe (httpx.Client is)."""

    def __init__(self, name: str, base_url: str, *, connect_s: float, read_s: float) -> None:
        self.name = name                 # "Confluence" | "Plane": the words say who answered
        self.base_url = base_url.rstrip("/")
        self.connect_s, self.read_s = connect_s, read_s
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()
        self.requests = 0                # made over this pool's life (for a bench or a test to read)

    @property
    def bound_s(self) -> float:
        """The most one request may cost."""
        return self.connect_s + self.read_s

    def client(self) -> httpx.Client:
        import httpx

        with self._lock:
            if self._client is None:
                self._client = httpx.Client(
                    follow_redirects=False,
                    timeout=httpx.Timeout(connect=self.connect_s, read=self.read_s, write=self.read_s,
                                          pool=self.connect_s),
                    limits=httpx.Limits(max_connections=8, max_keepalive_connections=4),
                    headers={"Accept": "application/json", "User-Agent": "crewlet"})
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def request(self, method: str, path: str, auth: Auth, *, params: Any = None, body: Any = None,
                missing_ok: bool = False) -> Any:
        """The parsed JSON answer (None for an empty 2xx body, or a 404 when `missing_ok`); every other
        outcome is a RemoteFailure."""
        import httpx

        url = f"{self.base_url}{path}"
        headers = dict(auth.headers)
        if body is not None:
            headers["Content-Type"] = "application/json"
        deadline = time.monotonic() + self.bound_s
        with self._lock:
            self.requests += 1
        try:
            with self.client().stream(method, url, params=params, headers=headers,
                                      content=None if body is None else json.dumps(body).encode("utf-8")) as response:
                status = response.status_code
                chunks: list[bytes] = []
                size = 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > MAX_ANSWER_BYTES:
                        raise RemoteFailure("bad_answer", self._words(
                            f"the answer passed {MAX_ANSWER_BYTES >> 20} MiB", auth))
                    if time.monotonic() > deadline:
                        raise httpx.ReadTimeout("the answer was still arriving at the bound")
                    chunks.append(chunk)
                raw = b"".join(chunks)
        except httpx.TimeoutException as exc:
            what = "no connection" if isinstance(exc, (httpx.ConnectTimeout, httpx.PoolTimeout)) else "no answer"
            raise RemoteFailure("timeout", self._words(
                f"timed out: {what} within {self.bound_s:g} s (connect_timeout_s {self.connect_s:g} + "
                f"read_timeout_s {self.read_s:g})", auth)) from None
        except httpx.HTTPError as exc:
            raise RemoteFailure("unreachable", self._words(f"cannot be reached: {exc or type(exc).__name__}", auth)) from None
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
