"""A small, real OpenAI-compatible chat server on 127.0.0.1, for the `crewlet ask` tests.

    with ChatServer() as server:                        # POST {server.url}/chat/completions
        server.script = [Reply("Roll back with `nimbus rollback` [1].")]   # the next requests' replies
        server.default = Reply("…")                     # every later request
        ...
        assert server.bodies[0]["messages"][0]["role"] == "system"

A request asking `stream: true` is answered as server-sent events (the text in `pieces`, a finish event,
the usage event when `stream_options.include_usage` asks for it, then `data: [DONE]`); otherwise as one
chat.completion object. Each reply's usage is `usage` when set, else prompt tokens = the characters of
every message // 4 and completion tokens = the reply's words — deterministic, so a test can check exactly
what the ledger recorded.

A Reply can also be: an HTTP status with an OpenAI-style error body (`status`), a refusal (`refusal`),
a body that is no chat completion (`garbage`), a reply that waits at a gate before sending anything
(`hold`: an Event, or the server's stop), or a stream that waits at a gate after its first piece
(`pause_after_first`), so a test can see the first piece arrive before the rest.
When `api_key` is set, a request without `Authorization: Bearer <api_key>` gets 401 whose message echoes
the key it was sent, so a test can check it is redacted.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from local_http import LocalHttpServer


@dataclass
class Reply:
    text: str = ""
    pieces: list[str] | None = None        # how a stream cuts the text (default: word by word)
    refusal: str | None = None
    finish_reason: str = "stop"
    status: int = 200
    garbage: bytes | None = None           # a 200 whose body is this
    usage: tuple[int, int] | None = None   # (prompt, completion); default computed
    send_usage: bool = True
    hold: threading.Event | None = None    # wait for this (or the server's stop) before answering
    pause_after_first: threading.Event | None = None
    stream: bool | None = None             # None: as the request asks
    events: list[str] | None = None        # raw SSE data payloads, sent as they are
    extra: dict[str, Any] = field(default_factory=dict)


class ChatServer(LocalHttpServer):
    name = "chat"
    path = "/v1"

    def __init__(self, *, api_key: str = "", model: str = "test-model") -> None:
        super().__init__()
        self.api_key = api_key
        self.model = model
        self.default = Reply("The sources say so [1].")
        self.script: list[Reply] = []
        self.requests = 0
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.answered = threading.Event()        # set after each reply is fully sent
        self.first_sent = threading.Event()      # set when a paused stream sent its first piece
        self._lock = threading.Lock()

    # -- one request -------------------------------------------------------------------------------
    def _wait(self, gate: threading.Event) -> bool:
        """Wait for the gate or the server's stop; True when the gate opened."""
        while not gate.is_set():
            if self._stopping.wait(0.02):
                return False
        return True

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        raw = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        with self._lock:
            self.requests += 1
            reply = self.script.pop(0) if self.script else self.default
            self.headers.append({k.lower(): v for k, v in h.headers.items()})
        if h.path.rstrip("/") != "/v1/chat/completions":
            return self._send(h, 404, {"error": {"message": f"no route {h.path}", "code": "not_found"}})
        if self.api_key and h.headers.get("Authorization") != f"Bearer {self.api_key}":
            sent = (h.headers.get("Authorization") or "").removeprefix("Bearer ")
            return self._send(h, 401, {"error": {"message": f"Incorrect API key provided: {sent}",
                                                 "code": "invalid_api_key"}})
        try:
            body = json.loads(raw)
            assert isinstance(body["messages"], list) and body["model"]
        except (ValueError, KeyError, AssertionError, TypeError):
            return self._send(h, 400, {"error": {"message": "expected {model, messages}", "code": "invalid_request"}})
        with self._lock:
            self.bodies.append(body)
        try:
            if reply.hold is not None and not self._wait(reply.hold):
                return
            if reply.status != 200:
                return self._send(h, reply.status, {"error": {"message": f"the server answered {reply.status}",
                                                              "code": f"status_{reply.status}"}})
            if reply.garbage is not None:
                return self._send_raw(h, 200, reply.garbage, "text/html")
            prompt = sum(len(str(m.get("content", ""))) for m in body["messages"]) // 4
            words = len((reply.text or reply.refusal or "").split())
            usage = reply.usage or (prompt, words)
            usage_json = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
            stream = body.get("stream") is True if reply.stream is None else reply.stream
            if stream:
                include = bool((body.get("stream_options") or {}).get("include_usage")) and reply.send_usage
                return self._stream(h, reply, usage_json if include else None)
            message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
            if reply.refusal is not None:
                message["refusal"] = reply.refusal
            payload = {"id": "chatcmpl-test", "object": "chat.completion", "model": self.model,
                       "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}]}
            if reply.send_usage:
                payload["usage"] = usage_json
            self._send(h, 200, payload)
        finally:
            self.answered.set()

    def _stream(self, h: BaseHTTPRequestHandler, reply: Reply, usage: dict[str, Any] | None) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream; charset=utf-8")
        h.send_header("Cache-Control", "no-cache")
        h.end_headers()

        def event(payload: Any) -> None:
            data = payload if isinstance(payload, str) else json.dumps(payload)
            h.wfile.write(f"data: {data}\n\n".encode("utf-8"))
            h.wfile.flush()

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {"id": "chatcmpl-test", "object": "chat.completion.chunk", "model": self.model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        if reply.events is not None:
            for data in reply.events:
                event(data)
            return
        h.wfile.write(b": keep-alive\n\n")
        event(chunk({"role": "assistant", "content": ""}))
        if reply.refusal is not None:
            event(chunk({"refusal": reply.refusal}))
        pieces = reply.pieces if reply.pieces is not None else [w + " " for w in reply.text.split(" ")] \
            if reply.text else []
        if pieces and reply.pieces is None:
            pieces[-1] = pieces[-1][:-1]
        for i, piece in enumerate(pieces):
            event(chunk({"content": piece}))
            if i == 0 and reply.pause_after_first is not None:
                self.first_sent.set()
                if not self._wait(reply.pause_after_first):
                    return
        event(chunk({}, reply.finish_reason))
        if usage is not None:
            event({"id": "chatcmpl-test", "object": "chat.completion.chunk", "model": self.model, "choices": [],
                   "usage": usage})
        event("[DONE]")

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, payload: dict[str, Any]) -> None:
        ChatServer._send_raw(h, status, json.dumps(payload).encode("utf-8"), "application/json")

    @staticmethod
    def _send_raw(h: BaseHTTPRequestHandler, status: int, data: bytes, content_type: str) -> None:
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
