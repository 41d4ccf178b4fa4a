"""Every line a client writes to `crewlet mcp` is answered: one that is not JSON-RPC gets the protocol's
error (-32700 parse error, -32600 invalid request; the request's id when it can be read, else null) instead
of silence that leaves the client waiting until its own timeout. Through a raw pipe to a real process, as
a client that wrote such a line would see it; the server serves on afterwards."""
from __future__ import annotations

import json
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from mcp_client import CREWLET, ENV, ROOT, crewlet

import mcp_types

HANG_GUARD_S = 300   # only so a silent server fails instead of hanging: no timing is asserted


class RawServer:
    """`crewlet mcp` on pipes: lines written to its stdin, lines read from its stdout."""

    def __init__(self, home: Path) -> None:
        self.proc = subprocess.Popen([*CREWLET, "--home", str(home), "--as", "eng-bot", "mcp"], cwd=ROOT, env=ENV,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def write(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line if line.endswith(b"\n") else line + b"\n")
        self.proc.stdin.flush()

    def reply(self) -> dict[str, Any]:
        line = self.lines.get(timeout=HANG_GUARD_S)
        assert line, "the server closed its stdout"
        return json.loads(line)

    def request(self, rid: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, **({"params": params} if params else {})}).encode())
        return self.reply()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(HANG_GUARD_S)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad-lines") / "home"
    assert crewlet(root, "init", "--example").returncode == 0
    raw = RawServer(root)
    hello = raw.request(1, "initialize", {"protocolVersion": mcp_types.LATEST_PROTOCOL_VERSION, "capabilities": {},
                                          "clientInfo": {"name": "raw-pipe", "version": "0"}})
    assert hello["id"] == 1 and "result" in hello, hello
    raw.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    yield raw
    raw.close()


DEEP = b'{"jsonrpc":"2.0","id":8,"method":"ping","params":{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}}"

CASES = [
    ("not JSON", b"this is not json", -32700, None),
    ("a lone surrogate", b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search_knowledge",'
                         b'"arguments":{"query":"\\ud800"}}}', -32700, 7),
    ("100,000-deep nesting", DEEP, -32700, None),
    ("a 5,000-digit id", b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}', -32700, None),
    ("JSON without jsonrpc", b'{"id":3,"method":"ping"}', -32600, 3),
    ("a JSON array", b"[1, 2]", -32600, None),
    ("a JSON string", b'"ping"', -32600, None),
]


@pytest.mark.parametrize("what, line, code, rid", CASES, ids=[c[0] for c in CASES])
def test_a_line_that_is_not_json_rpc_is_answered_with_the_protocols_error(server, what, line, code, rid):
    server.write(line)
    answer = server.reply()
    assert answer["jsonrpc"] == "2.0" and answer["id"] == rid, answer
    assert answer["error"]["code"] == code, answer
    assert "\n" not in answer["error"]["message"]
    # and the server serves on: the next request is answered as ever
    assert server.request(100, "ping") == {"jsonrpc": "2.0", "id": 100, "result": {}}


def test_a_blank_line_is_no_request_and_is_not_answered(server):
    server.write(b"   ")
    assert server.request(101, "ping")["id"] == 101        # the very next line on stdout is the ping's answer
