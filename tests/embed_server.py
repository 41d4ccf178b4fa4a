"""A small, real OpenAI-compatible embeddings server on 127.0.0.1, for the provider and duty tests.

    with EmbedServer(dimensions=16) as server:          # POST {server.url}/embeddings
        provider = OpenAIHTTPProvider(settings(base_url=server.url, ...))
        server.mode = "shuffled"                         # every later request answers shuffled
        server.script = ["rate_limit", "ok"]             # or: the next requests' modes, one each
        assert server.requests == 1 and server.batches == [["a", "b"]]

Its vectors are a deterministic function of each input text (`vector_for(text, dimensions)`), so a
test can prove a stored vector belongs to its text. Inputs may carry markers that act per input in
every mode: REFUSE_MARK makes the whole request a 400 (as a real endpoint refuses a batch for one
bad input), NAN_MARK answers that input with a NaN vector and ZERO_MARK with an all-zero one.

Modes (what every request answers while it is set):
    ok              the right vectors, indexed, in input order
    shuffled        indexed, in a shuffled order (rotated by one: no result in its place)
    no_index        no result carries `index` (arrival order is input order)
    missing_index   one result lacks `index`
    duplicate_index two results carry the same index
    null_index      one index is null
    string_index    one index is a string ("0")
    too_many        one result more than inputs
    too_few         one result fewer than inputs
    wrong_width     every vector one component wider than asked
    rate_limit      429 with an error body
    slow            sleeps `delay` seconds, then answers ok (past a client's timeout)
    trickle         answers ok, but sends the body a few bytes every 0.1 s for `delay` seconds
    refuse_all      400 for every request (a configuration the endpoint does not take)
    status:NNN      that HTTP status with an OpenAI-style error body (e.g. status:500, status:413)
    not_json        200 with a body that is not JSON
    hostile_error   500 whose error message carries terminal escapes (ESC CSI, an OSC 52, BEL, a C1 CSI)
When `api_key` is set, a request without `Authorization: Bearer <api_key>` gets 401, whose message
echoes the key it was sent (as some gateways do), so a test can check it is redacted.
"""
from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

import numpy as np

from local_http import LocalHttpServer

REFUSE_MARK = "<<refuse>>"
NAN_MARK = "<<nan>>"
ZERO_MARK = "<<zero>>"
# an endpoint's error text that would act on a terminal: clear the screen, set the clipboard, ring, a C1 CSI
HOSTILE_ERROR = "upstream \x1b[2J\x1b]52;c;aGVsbG8=\x07 broke \x9b31m red"


def vector_for(text: str, dimensions: int) -> list[float]:
    """The unit vector this server answers `text` with: seeded by sha256 of the text."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
    v = np.random.default_rng(seed).standard_normal(dimensions)
    return [float(x) for x in v / np.linalg.norm(v)]


class EmbedServer(LocalHttpServer):
    name = "embed"
    path = "/v1"

    def __init__(self, dimensions: int = 16, *, api_key: str = "", delay: float = 3.0) -> None:
        super().__init__()
        self.dimensions = dimensions
        self.api_key = api_key
        self.delay = delay
        self.mode = "ok"
        self.script: list[str] = []           # modes for the next requests, one each, before `mode`
        self.requests = 0
        self.batches: list[list[str]] = []    # the inputs of every request, in arrival order
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()

    # -- one request ---------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        raw = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        with self._lock:
            self.requests += 1
            mode = self.script.pop(0) if self.script else self.mode
            self.headers.append({k.lower(): v for k, v in h.headers.items()})
        if h.path.rstrip("/") != "/v1/embeddings":
            return self._send(h, 404, {"error": {"message": f"no route {h.path}", "code": "not_found"}})
        if self.api_key and h.headers.get("Authorization") != f"Bearer {self.api_key}":
            sent = (h.headers.get("Authorization") or "").removeprefix("Bearer ")
            return self._send(h, 401, {"error": {"message": f"Incorrect API key provided: {sent}",
                                                 "code": "invalid_api_key"}})
        try:
            body = json.loads(raw)
            inputs = body["input"]
            assert isinstance(inputs, list) and all(isinstance(t, str) for t in inputs) and body["model"]
        except (ValueError, KeyError, AssertionError, TypeError):
            return self._send(h, 400, {"error": {"message": "expected {model, input: [strings]}",
                                                 "code": "invalid_request"}})
        with self._lock:
            self.batches.append(list(inputs))
            self.bodies.append(body)
        width = int(body.get("dimensions") or self.dimensions)

        if mode == "rate_limit":
            return self._send(h, 429, {"error": {"message": "Rate limit reached for requests",
                                                 "code": "rate_limit_exceeded"}})
        if mode.startswith("status:"):
            status = int(mode.split(":", 1)[1])
            return self._send(h, status, {"error": {"message": f"the server answered {status}",
                                                    "code": f"status_{status}"}})
        if mode == "hostile_error":
            return self._send(h, 500, {"error": {"message": HOSTILE_ERROR, "code": "server_error"}})
        if mode == "refuse_all":
            return self._send(h, 400, {"error": {"message": "dimensions is not supported by this model",
                                                 "type": "invalid_request_error", "code": "unsupported_parameter"}})
        if any(REFUSE_MARK in t for t in inputs):
            return self._send(h, 400, {"error": {
                "message": "This model's maximum context length is 8192 tokens, however you requested 9001 tokens",
                "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}})
        if mode == "slow":
            if self._stopping.wait(self.delay):
                return
        if mode == "trickle":
            return self._trickle(h)
        if mode == "not_json":
            return self._send_raw(h, 200, b"<html>gateway says hello</html>", "text/html")

        items: list[dict[str, Any]] = []
        for index, text in enumerate(inputs):
            if NAN_MARK in text:
                vector: list[Any] = [float("nan")] * width
            elif ZERO_MARK in text:
                vector = [0.0] * width
            else:
                vector = vector_for(text, width + 1 if mode == "wrong_width" else width)
            items.append({"object": "embedding", "index": index, "embedding": vector})
        n = len(items)
        if mode == "shuffled" and n > 1:
            items = items[1:] + items[:1]             # rotated by one: every result out of place
        elif mode == "no_index":
            for item in items:
                del item["index"]
        elif mode == "missing_index":
            del items[-1]["index"]
        elif mode == "duplicate_index" and n > 1:
            items[1]["index"] = items[0]["index"]
        elif mode == "null_index":
            items[0]["index"] = None
        elif mode == "string_index":
            items[0]["index"] = str(items[0]["index"])
        elif mode == "too_many":
            items.append({"object": "embedding", "index": n, "embedding": vector_for("extra", width)})
        elif mode == "too_few":
            items.pop()
        self._send(h, 200, {"object": "list", "data": items, "model": body["model"],
                            "usage": {"prompt_tokens": sum(len(t) for t in inputs), "total_tokens": 0}})

    def _trickle(self, h: BaseHTTPRequestHandler) -> None:
        """A body that keeps arriving: no single read waits long, the whole answer takes `delay`."""
        data = json.dumps({"object": "list", "data": []}).encode("utf-8")
        pad = b" " * int(self.delay / 0.1)
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(pad) + len(data)))
        h.end_headers()
        for byte in pad:
            h.wfile.write(bytes([byte]))
            h.wfile.flush()
            if self._stopping.wait(0.1):
                return
        h.wfile.write(data)

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, payload: dict[str, Any]) -> None:
        # json.dumps writes NaN as the bare literal NaN, which is what a careless server sends too
        EmbedServer._send_raw(h, status, json.dumps(payload).encode("utf-8"), "application/json")

    @staticmethod
    def _send_raw(h: BaseHTTPRequestHandler, status: int, data: bytes, content_type: str) -> None:
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
