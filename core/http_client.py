"""What every HTTP client of crewlet shares: one connection pool, opened at the first request and kept for
the client's life, never following a redirect, every answer read bounded in time and size, and closed once.

Three clients stand on it — the chat endpoint (core/chat/openai_http.py), the embeddings endpoint
(core/embed/openai_http.py) and the remote backends (core/remote/http.py) — and a fourth joins the same
way. Each keeps its own words for a failure (its error class, the setting a person should check), since
what a failure means differs between them; what they share is the transport:

- `Pool.client()`: the one `httpx.Client` (keep-alive: a request after the first costs no TCP or TLS
  handshake), made under a lock, so one provider or searcher object used from several threads holds one;
- `Pool.fetch()`: a request whose whole answer is read within `bound_s` and `max_bytes` — httpx bounds each
  connect and each read, not the answer, so the body is read in chunks and cut at the first one past the
  deadline (a server that trickles bytes costs the bound, no more) or past the size;
- `read_bounded()`: the same for a response a client streams itself (the chat endpoint's error body);
- `transport_failure()`: which of timeout (connecting or answering) and unreachable an httpx error is;
- the words a failure is told in: `redact()` (a key, and anything key-like, taken out), `one_line()`,
  `error_in_body()` (an endpoint's own message and code from its error body).

httpx is imported at the first request: `import httpx` loads its command line (click, rich) too, and core
stays importable without any UI framework (tests/test_core_isolation.py). This module imports nothing of
crewlet: it stands on the bottom floor.
"""
from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

# what a client says when the answer grows past its bound: an exception of its own kind
TooLarge = Callable[[int], Exception]
MAX_WORDS = 300          # a failure's line, at most


# Anything that looks like a credential: OpenAI-style keys, bearer tokens, key=value pairs and long
# unbroken runs of key alphabet (a gateway may echo a key of any shape).
_SECRET_PATTERNS = [
    re.compile(r"(?<=//)[^/@\s]+@"),                       # user:password@ in a URL
    re.compile(r"(?i)\bbearer\s+\S+"),
    re.compile(r"(?i)\b(api[_-]?key|token|secret|password|authorization)(\s*[:=]\s*)(\S+)"),
    re.compile(r"\bsk-[A-Za-z0-9_*.\-]{4,}"),
    re.compile(r"[A-Za-z0-9_\-]{32,}"),
]


def redact(text: str, *secrets: str) -> str:
    """The text with every given secret and anything key-like replaced by [redacted]."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    for pattern in _SECRET_PATTERNS:
        if pattern.groups == 3:
            text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}[redacted]", text)
        elif "@" in pattern.pattern:
            text = pattern.sub("[redacted]@", text)
        else:
            text = pattern.sub("[redacted]", text)
    return text


def one_line(text: str) -> str:
    """Collapsed to one line of at most 300 characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= MAX_WORDS else line[:MAX_WORDS - 1] + "…"


def error_in_body(body: bytes) -> tuple[str, str]:
    """(message, code) from an error body: OpenAI's {"error": {"message", "code"}}, a bare
    {"error": "..."}, FastAPI's {"detail": ...}, or the text itself."""
    text = body.decode("utf-8", "replace")
    try:
        payload = json.loads(text)
    except ValueError:
        return text.strip(), ""
    if isinstance(payload, dict):
        error = payload.get("error", payload.get("detail"))
        if isinstance(error, dict):
            code = error.get("code") or error.get("type") or ""
            return str(error.get("message", json.dumps(error))), str(code)
        if error is not None:
            return error if isinstance(error, str) else json.dumps(error), str(payload.get("code", ""))
    return json.dumps(payload), ""


def read_bounded(response: Any, deadline: float, max_bytes: int, too_large: TooLarge) -> bytes:
    """A response's body, cut at `max_bytes` (raising `too_large(max_bytes)`) and at `deadline` (a
    monotonic instant: raising httpx.ReadTimeout, which the caller reads as any other timeout)."""
    import httpx

    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise too_large(max_bytes)
        if time.monotonic() > deadline:
            raise httpx.ReadTimeout("the answer was still arriving at the bound")
        chunks.append(chunk)
    return b"".join(chunks)


def transport_failure(exc: BaseException) -> str | None:
    """"connect_timeout", "timeout", "connect" (refused, no route, DNS), "unreachable" (any other transport
    failure) for an httpx error; None for anything else."""
    import httpx

    if isinstance(exc, (httpx.ConnectTimeout, httpx.PoolTimeout)):
        return "connect_timeout"
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    if isinstance(exc, httpx.ConnectError):
        return "connect"
    if isinstance(exc, httpx.HTTPError):
        return "unreachable"
    return None


class Pool:
    """One client's connection pool. Thread-safe (httpx.Client is; making it is locked here).

    `timeout` (seconds, or a dict of httpx.Timeout's parts: connect, read, write, pool) and `max_connections`
    shape the pool; `headers` go on every request. A redirect is never followed: it would carry the
    credential wherever the server points."""

    def __init__(self, *, timeout: float | dict[str, float] | None = None, max_connections: int | None = None,
                 headers: dict[str, str] | None = None) -> None:
        self._timeout = timeout
        self._max_connections = max_connections
        self._headers = dict(headers or {})
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()
        self.requests = 0                # made over this pool's life (for a bench or a test to read)

    def client(self) -> httpx.Client:
        import httpx

        with self._lock:
            if self._client is None:
                kwargs: dict[str, Any] = {"follow_redirects": False, "headers": self._headers}
                if isinstance(self._timeout, dict):
                    kwargs["timeout"] = httpx.Timeout(**self._timeout)
                elif self._timeout is not None:
                    kwargs["timeout"] = httpx.Timeout(self._timeout)
                if self._max_connections is not None:
                    kwargs["limits"] = httpx.Limits(max_connections=self._max_connections,
                                                    max_keepalive_connections=max(1, self._max_connections // 2))
                self._client = httpx.Client(**kwargs)
            return self._client

    def fetch(self, method: str, url: str, *, bound_s: float, max_bytes: int, too_large: TooLarge,
              timeout: float | None = None, **request: Any) -> tuple[int, bytes]:
        """(status, body) of one request, the whole exchange within `bound_s` and the body within
        `max_bytes`. httpx's errors pass through: the caller says them in its own words
        (`transport_failure` sorts them)."""
        import httpx

        deadline = time.monotonic() + bound_s
        with self._lock:
            self.requests += 1
        if timeout is not None:
            request["timeout"] = httpx.Timeout(timeout)
        with self.client().stream(method, url, **request) as response:
            return response.status_code, read_bounded(response, deadline, max_bytes, too_large)

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
