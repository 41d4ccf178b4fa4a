"""The OpenAI-compatible provider against a real HTTP server on 127.0.0.1 (tests/embed_server.py):
the spec's index rules, the status classes, timeouts, the key from the environment, redaction."""
from __future__ import annotations

import math
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from embed_server import NAN_MARK, REFUSE_MARK, ZERO_MARK, EmbedServer, vector_for

from core import config as config_mod
from core.embed.openai_http import OpenAIHTTPProvider
from core.embed.provider import (
    InputRefused,
    ProviderError,
    ProviderUnavailable,
    ResponseRefused,
)
from core.embed.registry import make_provider

DIMS = 16
TEXTS = ["how to roll back a deploy", "the on-call rota", "ünïcödé ✓ text", "fourth input"]
SECRET = "sk-test-THISISASECRETKEY0123456789abcdef"


@pytest.fixture
def server() -> Iterator[EmbedServer]:
    with EmbedServer(dimensions=DIMS, delay=3.0) as s:
        yield s


def provider_for(url: str, **settings: object) -> OpenAIHTTPProvider:
    table = {"provider": "openai", "base_url": url, "model": "test-embed", "dimensions": DIMS, **settings}
    company = config_mod.parse(dict(config_mod.example_config(), providers={"embeddings": table}), Path("company.toml"))
    provider = make_provider(company)
    assert isinstance(provider, OpenAIHTTPProvider)
    return provider


@pytest.fixture
def provider(server: EmbedServer) -> Iterator[OpenAIHTTPProvider]:
    p = provider_for(server.url)
    yield p
    p.close()


def assert_belong(vectors: list[np.ndarray], texts: list[str], dims: int = DIMS) -> None:
    assert len(vectors) == len(texts)
    for vector, text in zip(vectors, texts):
        assert vector.dtype == np.float32 and vector.shape == (dims,)
        np.testing.assert_allclose(vector, np.asarray(vector_for(text, dims), dtype=np.float32), rtol=0, atol=1e-7)


def test_a_batch_comes_back_in_input_order_and_the_request_is_the_documented_one(server, provider):
    vectors = provider.embed(TEXTS, timeout=10)
    assert_belong(vectors, TEXTS)
    assert server.requests == 1 and server.batches == [TEXTS]
    assert server.bodies[0] == {"model": "test-embed", "input": TEXTS, "dimensions": DIMS}
    assert "authorization" not in server.headers[0]          # no api_key_env: nothing is sent
    assert provider.embed([], timeout=1) == [] and server.requests == 1


def test_results_are_filed_by_their_index_not_their_arrival(server, provider):
    server.mode = "shuffled"
    assert_belong(provider.embed(TEXTS, timeout=10), TEXTS)


def test_no_index_on_every_result_reads_arrival_order(server, provider):
    server.mode = "no_index"
    assert_belong(provider.embed(TEXTS, timeout=10), TEXTS)


@pytest.mark.parametrize("mode, words", [
    ("missing_index", "3 of 4 results carry an index"),
    ("duplicate_index", "index 0 answers twice"),
    ("null_index", "index null"),
    ("string_index", 'index "0"'),
    ("too_many", "5 results for 4 inputs"),
    ("too_few", "3 results for 4 inputs"),
    ("wrong_width", f"{DIMS + 1} wide; dimensions = {DIMS}"),
    ("not_json", "not JSON"),
])
def test_an_answer_that_does_not_map_onto_the_batch_exactly_once_is_refused(server, provider, mode, words):
    server.mode = mode
    with pytest.raises(ResponseRefused) as exc:
        provider.embed(TEXTS, timeout=10)
    assert words in exc.value.message and "\n" not in exc.value.message
    assert exc.value.message.startswith(f"{server.url}/embeddings: ")


def test_an_index_outside_the_batch_is_refused():
    from core.embed.openai_http import map_response
    data = [{"index": i, "embedding": [0.1] * 3} for i in (0, 2)]
    with pytest.raises(ResponseRefused, match="index 2, outside a batch of 2"):
        map_response({"data": data}, 2, 3)
    with pytest.raises(ResponseRefused, match="index true"):
        map_response({"data": [{"index": True, "embedding": [0.1] * 3}]}, 1, 3)
    with pytest.raises(ResponseRefused, match="not a list of numbers"):
        map_response({"data": [{"index": 0, "embedding": [0.1, None, 0.2]}]}, 1, 3)


def test_nan_and_zero_vectors_are_returned_as_they_came_for_the_duty_to_refuse(server, provider):
    texts = ["fine", f"bad {NAN_MARK}", f"empty {ZERO_MARK}"]
    vectors = provider.embed(texts, timeout=10)
    assert_belong(vectors[:1], texts[:1])
    assert all(math.isnan(x) for x in vectors[1]) and vectors[1].shape == (DIMS,)
    assert not vectors[2].any() and vectors[2].shape == (DIMS,)


def test_a_refused_batch_is_input_refused_with_the_endpoints_message_and_code(server, provider):
    with pytest.raises(InputRefused) as exc:
        provider.embed(["fine", f"too long {REFUSE_MARK}"], timeout=10)
    err = exc.value
    assert err.status == 400 and err.endpoint_code == "context_length_exceeded"
    assert "maximum context length is 8192 tokens" in err.endpoint_message
    assert "HTTP 400" in err.message and "(2 inputs)" in err.message and "context_length_exceeded" in err.message
    # halves without the marked input are accepted: the duty's bisection has something to stand on
    assert_belong(provider.embed(["fine"], timeout=10), ["fine"])


@pytest.mark.parametrize("status", [413, 422])
def test_413_and_422_are_input_refusals_too(server, provider, status):
    server.mode = f"status:{status}"
    with pytest.raises(InputRefused) as exc:
        provider.embed(TEXTS, timeout=10)
    assert exc.value.status == status and exc.value.endpoint_code == f"status_{status}"


@pytest.mark.parametrize("mode, status, words", [
    ("rate_limit", 429, "rate limited"),
    ("status:500", 500, "HTTP 500"),
    ("status:503", 503, "HTTP 503"),
    ("status:403", 403, "credential was refused"),
    ("status:404", 404, "check providers.embeddings.base_url"),
    ("status:307", 307, "check providers.embeddings.base_url"),   # a redirect is not followed (the key)
])
def test_failures_about_the_provider_are_provider_unavailable(server, provider, mode, status, words):
    server.mode = mode
    with pytest.raises(ProviderUnavailable) as exc:
        provider.embed(TEXTS, timeout=10)
    assert exc.value.status == status and words in exc.value.message
    assert not isinstance(exc.value, InputRefused)


def test_a_slow_server_is_a_timeout_within_the_requests_own_ceiling(server, provider):
    server.mode = "slow"                       # the server sleeps 3 s
    started = time.monotonic()
    with pytest.raises(ProviderUnavailable, match=r"no answer within 0.5 s"):
        provider.embed(TEXTS, timeout=0.5)
    assert time.monotonic() - started < server.delay   # cut at the client's timeout, not the server's sleep
    server.mode = "ok"
    assert_belong(provider.embed(TEXTS, timeout=10), TEXTS)   # the client is still usable


def test_an_answer_still_arriving_at_the_deadline_is_cut_there(server, provider):
    server.mode = "trickle"                    # a byte every 0.1 s for 3 s: no single read times out
    started = time.monotonic()
    with pytest.raises(ProviderUnavailable, match=r"no answer within 0.5 s"):
        provider.embed(TEXTS, timeout=0.5)
    assert time.monotonic() - started < server.delay


def test_a_refused_connection_is_provider_unavailable():
    with socket.socket() as s:                 # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = provider_for(f"http://127.0.0.1:{port}/v1")
    with pytest.raises(ProviderUnavailable, match="cannot reach the endpoint"):
        p.embed(TEXTS, timeout=5)
    p.close()


def test_the_key_is_read_from_the_named_variable_and_never_appears_in_a_message(monkeypatch):
    with EmbedServer(dimensions=DIMS, api_key=SECRET) as server:
        p = provider_for(server.url, api_key_env="CREWLET_TEST_EMBED_KEY")
        monkeypatch.delenv("CREWLET_TEST_EMBED_KEY", raising=False)
        with pytest.raises(ProviderUnavailable, match="CREWLET_TEST_EMBED_KEY, which is not set"):
            p.embed(TEXTS, timeout=5)
        assert server.requests == 0                          # nothing sent without the key

        monkeypatch.setenv("CREWLET_TEST_EMBED_KEY", SECRET)
        assert_belong(p.embed(TEXTS, timeout=5), TEXTS)
        assert server.headers[-1]["authorization"] == f"Bearer {SECRET}"
        assert SECRET not in repr(p.__dict__) and SECRET not in p.fingerprint

        wrong = "sk-wrong-" + "Z" * 30
        monkeypatch.setenv("CREWLET_TEST_EMBED_KEY", wrong)   # the server echoes the key it was sent
        with pytest.raises(ProviderUnavailable) as exc:
            p.embed(TEXTS, timeout=5)
        assert exc.value.status == 401 and "$CREWLET_TEST_EMBED_KEY" in exc.value.message
        assert wrong not in str(exc.value) and "Z" * 10 not in str(exc.value)
        p.close()


def test_a_refusal_message_is_redacted_of_anything_key_like(server, provider, monkeypatch):
    # an endpoint that quotes a key back in a 400 body
    from core.embed import openai_http
    err = openai_http._endpoint_error(f'{{"error": {{"message": "bad input; key {SECRET}", "code": "x"}}}}'.encode())
    refused = InputRefused(f"refused: {err[0]}", status=400, endpoint_message=err[0], code=err[1])
    assert SECRET not in str(refused) and SECRET not in refused.endpoint_message
    assert "[redacted]" in refused.endpoint_message


def test_limits_follow_the_configuration_and_the_fingerprint_ignores_the_key(server):
    p = provider_for(server.url)
    assert (p.limits.max_input_bytes, p.limits.max_batch_bytes, p.limits.max_batch_inputs) == (8192, 300_000, 128)
    narrow = provider_for(server.url, max_input_tokens=512, max_batch_tokens=4000, max_batch_inputs=16)
    assert (narrow.limits.max_input_bytes, narrow.limits.max_batch_bytes, narrow.limits.max_batch_inputs) == (512, 4000, 16)
    tiny_total = provider_for(server.url, max_batch_tokens=2000)      # one input must fit one request
    assert tiny_total.limits.max_input_bytes == 2000
    keyed = provider_for(server.url, api_key_env="SOME_KEY")
    other_url = provider_for(server.url.replace("/v1", "/v2"))
    assert keyed.fingerprint == p.fingerprint                          # a key change keeps refusals
    assert len({p.fingerprint, narrow.fingerprint, other_url.fingerprint, tiny_total.fingerprint}) == 4
    assert p.space.key() == f"openai:test-embed:{DIMS}" and p.space.tokenizer == ""


def test_every_error_is_a_provider_error_on_one_line(server, provider):
    server.mode = "status:500"
    with pytest.raises(ProviderError) as exc:
        provider.embed(["x"], timeout=5)
    assert "\n" not in str(exc.value) and len(str(exc.value)) <= 300
