"""Any OpenAI-compatible chat endpoint, over httpx, streamed.

POST {base_url}/chat/completions with {"model", "messages", "max_tokens", "temperature": 0, "stream": true,
"stream_options": {"include_usage": true}} and, when api_key_env names one, `Authorization: Bearer <key>`
— read from that environment variable at each call, never stored, logged or put in a message (anything
key-like in an endpoint's message is redacted, as for the embeddings endpoint).

The reply arrives as server-sent events (`data: {chunk}` lines, `data: [DONE]` last); each piece of
text is handed to `on_text` as it arrives. A server that ignores `stream` and answers one JSON object
is read as that. The endpoint's own `usage` (the last event, asked for by `include_usage`) is what the
reply spent; a server that sends none has its spend estimated with the shipped tokenizer, and says so.

`timeout_s` bounds the whole reply, from the request to its last token. Every failure is a `ChatFailed`
with a kind and one line — never a traceback:
- `timeout`: no complete reply within timeout_s;
- `unreachable`: the connection was refused or dropped;
- `http`: a status other than 2xx (401/403: the key; 404/405: the base_url; 429: rate limited);
- `garbage`: a 2xx whose body is not a chat completion (not JSON, no choices, no text);
- `key`: api_key_env names a variable that is not set (before anything is sent);
- `cancelled`: the caller stopped waiting (the person asked something else, or left).
A refusal (the reply's `refusal`, or finish_reason `content_filter`) is a reply, not a failure: the
caller shows it as one.
"""
from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.errors import CrewletError
from core.http_client import Pool, error_in_body, one_line, redact
from core.http_client import read_bounded as _read_body

if TYPE_CHECKING:
    from . import LlmSettings

MAX_RESPONSE_BYTES = 8 * 1024 * 1024        # a short answer is kilobytes; past this it is not one


@dataclass
class Usage:
    prompt_tokens: int
    completion_tokens: int
    reported: bool = True         # False: estimated here (the endpoint sent no usage, or no reply came)

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_json(self) -> dict[str, Any]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.total, "reported": self.reported}


@dataclass
class ChatReply:
    text: str
    refusal: str | None           # the model refused: its words (or "" when it gave none)
    finish_reason: str | None
    usage: Usage | None           # None: the endpoint sent none
    model: str = ""


class ChatFailed(CrewletError):
    """The chat endpoint gave no usable reply; `kind` says why (timeout, unreachable, http, garbage, key, …)."""

    code = "chat_failed"

    def __init__(self, kind: str, message: str, *, status: int | None = None, partial: str = "",
                 usage: Usage | None = None, sent: bool = True) -> None:
        super().__init__(message, kind=kind, status=status)
        self.kind, self.message, self.status, self.partial, self.usage = kind, message, status, partial, usage
        # False: the request never reached the endpoint (no key, no connection): nothing can have been billed
        self.sent = sent


class ChatProvider:
    """One endpoint. The HTTP client opens on the first call; `close()` ends it. Thread-safe."""

    def __init__(self, settings: LlmSettings) -> None:
        self.settings = settings
        self.url = f"{settings.base_url.rstrip('/')}/chat/completions"
        self._pool = Pool()

    def key(self) -> str:
        name = self.settings.api_key_env
        if not name:
            return ""
        key = os.environ.get(name, "").strip()
        if not key:
            raise ChatFailed("key", f"providers.llm.api_key_env names {name}, which is not set in this environment — "
                                    f"export {name} before running crewlet", sent=False)
        return key

    def _line(self, message: str, key: str) -> str:
        return one_line(redact(f"{redact(self.url)}: {message}", key))

    def body(self, messages: list[dict[str, str]], *, stream: bool = True) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.settings.model, "messages": messages,
                                "max_tokens": self.settings.max_output_tokens, "temperature": 0}
        if stream:
            body |= {"stream": True, "stream_options": {"include_usage": True}}
        return body

    def complete(self, messages: list[dict[str, str]], *, on_text: Callable[[str], None] | None = None,
                 cancel: threading.Event | None = None) -> ChatReply:
        import httpx

        key = self.key()
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream, application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        client = self._pool.client()
        timeout = self.settings.timeout_s
        deadline = time.monotonic() + timeout
        reader = _Reader(on_text)
        try:
            with client.stream("POST", self.url, json=self.body(messages), headers=headers,
                               timeout=httpx.Timeout(timeout)) as response:
                status = response.status_code
                if not 200 <= status < 300:
                    raise self._status_failure(status, _read_bounded(response, deadline), key)
                kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
                if kind == "text/event-stream":
                    for line in response.iter_lines():
                        if cancel is not None and cancel.is_set():
                            raise ChatFailed("cancelled", "stopped: the answer was no longer wanted",
                                             partial=reader.text, usage=reader.usage)
                        if time.monotonic() > deadline:
                            raise httpx.ReadTimeout("the reply was still arriving at the deadline")
                        if reader.event(line):
                            break
                    if not reader.done:
                        raise ChatFailed("garbage", self._line("the stream ended before the reply was complete "
                                                               "(no finish_reason and no [DONE])", key),
                                         partial=reader.text, usage=reader.usage)
                else:
                    reader.whole(_read_bounded(response, deadline))
        except ChatFailed as exc:
            if exc.kind == "garbage" and not exc.message.startswith(self.url):
                exc.message = self._line(exc.message, key)
            exc.partial = exc.partial or reader.text
            exc.usage = exc.usage or reader.usage
            raise
        except httpx.ConnectError as exc:
            raise ChatFailed("unreachable", self._line(f"cannot reach the endpoint: {exc or type(exc).__name__}", key),
                             sent=False) from None
        except httpx.ConnectTimeout:
            raise ChatFailed("timeout", self._line(f"could not connect within {timeout:g} s (providers.llm.timeout_s)",
                                                   key), sent=False) from None
        except httpx.TimeoutException:
            raise ChatFailed("timeout", self._line(f"no complete reply within {timeout:g} s (providers.llm.timeout_s)",
                                                   key), partial=reader.text, usage=reader.usage) from None
        except httpx.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
            raise ChatFailed("unreachable", self._line(f"cannot reach the endpoint: {reason}", key),
                             partial=reader.text, usage=reader.usage) from None
        if not reader.text.strip() and reader.refusal is None:
            raise ChatFailed("garbage", self._line("the reply holds no text", key), usage=reader.usage)
        return ChatReply(reader.text, reader.refusal, reader.finish_reason, reader.usage, reader.model)

    def _status_failure(self, status: int, raw: bytes, key: str) -> ChatFailed:
        message, code = error_in_body(raw)
        message, code = redact(message, key), redact(code, key)
        detail = message[:200] + (f" (code {code})" if code else "")
        if status in (401, 403):
            where = f"the key in ${self.settings.api_key_env}" if self.settings.api_key_env else \
                "providers.llm.api_key_env (no key is sent)"
            text = f"HTTP {status}: the credential was refused ({detail}) — check {where}"
        elif status == 429:
            text = f"HTTP 429: rate limited ({detail}) — ask again in a moment"
        elif status in (301, 302, 307, 308, 404, 405):
            text = f"HTTP {status}: {detail} — check providers.llm.base_url (POST {{base_url}}/chat/completions)"
        else:
            text = f"HTTP {status}: {detail}"
        return ChatFailed("http", self._line(text, key), status=status)

    def close(self) -> None:
        self._pool.close()


def _read_bounded(response: Any, deadline: float) -> bytes:
    """A reply's whole body (an error's, or a server's that ignored `stream`), bounded in time and size."""
    return _read_body(response, deadline, MAX_RESPONSE_BYTES,
                      lambda bound: ChatFailed("garbage", f"the reply passed {bound >> 20} MiB"))


def _usage(payload: Any) -> Usage | None:
    if not isinstance(payload, dict):
        return None
    prompt, completion = payload.get("prompt_tokens"), payload.get("completion_tokens")
    if isinstance(prompt, bool) or isinstance(completion, bool):
        return None
    if isinstance(prompt, int) and isinstance(completion, int) and prompt >= 0 and completion >= 0:
        return Usage(prompt, completion)
    return None


class _Reader:
    """A chat completion, read from server-sent events or from one JSON object."""

    def __init__(self, on_text: Callable[[str], None] | None) -> None:
        self.on_text = on_text
        self.parts: list[str] = []
        self.refusal: str | None = None
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.model = ""
        self.done = False
        self.size = 0

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def _add(self, piece: str) -> None:
        self.parts.append(piece)
        if self.on_text is not None:
            self.on_text(piece)

    def event(self, line: str) -> bool:
        """One line of the stream; True at its end (`data: [DONE]`)."""
        self.size += len(line)
        if self.size > MAX_RESPONSE_BYTES:
            raise ChatFailed("garbage", f"the reply passed {MAX_RESPONSE_BYTES >> 20} MiB")
        if not line.startswith("data:"):
            return False                           # comments (keep-alives), event names, blank separators
        data = line[5:].strip()
        if data == "[DONE]":
            self.done = True
            return True
        try:
            chunk = json.loads(data)
        except ValueError:
            raise ChatFailed("garbage", f"an event of the stream is not JSON: {one_line(data)[:80]}") from None
        if not isinstance(chunk, dict):
            raise ChatFailed("garbage", "an event of the stream is not a chat completion chunk")
        if "error" in chunk:                       # some servers report a failure inside the stream
            error = chunk["error"]
            message = error.get("message", json.dumps(error)) if isinstance(error, dict) else str(error)
            raise ChatFailed("http", f"the endpoint failed mid-reply: {one_line(str(message))[:200]}")
        self.model = str(chunk.get("model") or self.model)
        self.usage = _usage(chunk.get("usage")) or self.usage
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            raise ChatFailed("garbage", "an event of the stream has no `choices` list")
        for choice in choices[:1]:
            if not isinstance(choice, dict):
                raise ChatFailed("garbage", "a choice of the stream is not an object")
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                raise ChatFailed("garbage", "a delta of the stream is not an object")
            content = delta.get("content")
            if isinstance(content, str) and content:
                self._add(content)
            refusal = delta.get("refusal")
            if isinstance(refusal, str) and refusal:
                self.refusal = (self.refusal or "") + refusal
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self.finish_reason = reason
                self.done = True                   # [DONE] may follow, after the usage event
                if reason == "content_filter" and self.refusal is None:
                    self.refusal = ""
        return False

    def whole(self, raw: bytes) -> None:
        """A reply that came as one JSON object (a server that ignored `stream`)."""
        try:
            payload = json.loads(raw)
        except ValueError:
            raise ChatFailed("garbage", "the reply is not JSON (nor a stream of events)") from None
        choices = payload.get("choices") if isinstance(payload, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ChatFailed("garbage", "the reply has no `choices`")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise ChatFailed("garbage", "the reply's first choice has no `message`")
        self.model = str(payload.get("model") or "")
        self.usage = _usage(payload.get("usage"))
        content = message.get("content")
        if isinstance(content, str) and content:
            self._add(content)
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal:
            self.refusal = refusal
        reason = choices[0].get("finish_reason")
        self.finish_reason = reason if isinstance(reason, str) else None
        if self.finish_reason == "content_filter" and self.refusal is None:
            self.refusal = ""
        self.done = True
