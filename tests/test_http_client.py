"""The base the HTTP clients share (core/http_client.py), against a real server on 127.0.0.1: one pool kept
and closed, no redirect followed, an answer cut at its size and at its time bound, transport failures sorted.
The clients' own words are tested with each client (test_embed_http.py, test_ask*.py, test_remote_*.py)."""
from __future__ import annotations

import socket
from http.server import BaseHTTPRequestHandler

import pytest
from local_http import LocalHttpServer

from core.chat.openai_http import ChatProvider
from core.sections.chat import LlmSettings
from core.embed.openai_http import OpenAIHTTPProvider
from core.sections.embed import EmbeddingsSettings
from core.http_client import Pool, transport_failure
from core.remote.http import RemoteHTTP


class TooBig(Exception):
    pass


class Paths(LocalHttpServer):
    name = "paths"
    protocol = "HTTP/1.1"
    methods = ("GET",)

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        if h.path == "/redirect":
            h.send_response(302)
            h.send_header("Location", "/ok")
            h.send_header("Content-Length", "0")
            h.end_headers()
        elif h.path == "/ok":
            body = b'{"ok": true}'
            h.send_response(200)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
        elif h.path == "/big":
            h.send_response(200)
            h.send_header("Content-Length", str(3 * 4096))
            h.end_headers()
            for _ in range(3):
                h.wfile.write(b"x" * 4096)
                h.wfile.flush()
        elif h.path == "/trickle":
            # a byte at a time until the test ends: only the client's bound ends the answer
            h.send_response(200)
            h.send_header("Content-Length", str(10**9))
            h.end_headers()
            while not self._stopping.wait(0.02):
                h.wfile.write(b"x")
                h.wfile.flush()


@pytest.fixture
def server():
    with Paths() as s:
        yield s


def test_one_pool_is_kept_until_closed(server):
    pool = Pool(timeout=5)
    first = pool.client()
    assert pool.fetch("GET", f"{server.url}/ok", bound_s=5, max_bytes=1024, too_large=TooBig) == (200, b'{"ok": true}')
    assert pool.fetch("GET", f"{server.url}/ok", bound_s=5, max_bytes=1024, too_large=TooBig)[0] == 200
    assert pool.client() is first and pool.requests == 2
    pool.close()
    assert pool.client() is not first
    pool.close()


def test_a_redirect_is_answered_not_followed(server):
    pool = Pool(timeout=5)
    status, _ = pool.fetch("GET", f"{server.url}/redirect", bound_s=5, max_bytes=1024, too_large=TooBig)
    assert status == 302
    pool.close()


def test_an_answer_past_its_size_is_cut_in_the_clients_words(server):
    pool = Pool(timeout=5)
    with pytest.raises(TooBig) as exc:
        pool.fetch("GET", f"{server.url}/big", bound_s=5, max_bytes=6000, too_large=lambda n: TooBig(f"past {n}"))
    assert str(exc.value) == "past 6000"
    pool.close()


def test_an_answer_that_trickles_is_cut_at_the_bound(server):
    """httpx bounds each read, and every read here succeeds: only the whole-answer bound ends it."""
    pool = Pool(timeout=5)
    with pytest.raises(Exception) as exc:
        pool.fetch("GET", f"{server.url}/trickle", bound_s=0.2, max_bytes=10**9, too_large=TooBig)
    assert transport_failure(exc.value) == "timeout"
    pool.close()


def test_a_refused_connection_is_sorted_as_one():
    with socket.socket() as s:          # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pool = Pool(timeout=5)
    with pytest.raises(Exception) as exc:
        pool.fetch("GET", f"http://127.0.0.1:{port}/", bound_s=5, max_bytes=10, too_large=TooBig)
    assert transport_failure(exc.value) == "connect"
    assert transport_failure(ValueError("not http")) is None
    pool.close()


def test_the_three_clients_stand_on_the_base():
    """Chat, embeddings and the remote backends each keep one Pool (a fourth client joins the same way)."""
    chat = ChatProvider(LlmSettings(base_url="http://127.0.0.1:9/v1", model="m"))
    embed = OpenAIHTTPProvider(EmbeddingsSettings(provider="openai", base_url="http://127.0.0.1:9/v1", model="m",
                                                  dimensions=8))
    remote = RemoteHTTP("Plane", "http://127.0.0.1:9", connect_s=1, read_s=1)
    for client in (chat, embed, remote):
        assert isinstance(client._pool, Pool)
        client.close()
