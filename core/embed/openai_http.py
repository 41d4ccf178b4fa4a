"""Any OpenAI-compatible embeddings endpoint, over httpx.

POST {base_url}/embeddings with {"model", "input": [...], "dimensions"} and, when api_key_env names
one, `Authorization: Bearer <the key>` — read from that environment variable at each request and
never stored, logged or put in a message.

What a status means to the duty:
- 400 / 413 / 422: `InputRefused` — the request is unacceptable (the duty bisects the batch); it
  carries the endpoint's own message and code, redacted.
- 401 / 403 (credential), 429 (rate limit), 5xx, any other status, a timeout, a refused or dropped
  connection: `ProviderUnavailable` — about the provider; it ends the tick's requests.
- A 2xx answer that does not map onto the batch exactly once, or a vector of the wrong width:
  `ResponseRefused` — nothing from it is filed (see `map_response`).
"""
from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from core.http_client import Pool, error_in_body, transport_failure

from core.embed.provider import (
    MAX_INPUT_BYTES,
    EmbeddingSpace,
    InputRefused,
    Limits,
    ProviderUnavailable,
    ResponseRefused,
    fingerprint_of,
    one_line,
    redact,
)
from core.embed.registry import register

if TYPE_CHECKING:
    from core.embed import EmbeddingsSettings

INPUT_REFUSED_STATUSES = (400, 413, 422)
# 128 inputs x 3072 components as JSON text is about 8 MB; anything far past that is not an answer
MAX_RESPONSE_BYTES = 64 * 1024 * 1024


def map_response(payload: Any, count: int, dimensions: int) -> list[np.ndarray]:
    """File a response's vectors onto a batch of `count` inputs, in input order.

    Each result is filed by its `index`. When the field is absent from EVERY result they are read in
    arrival order (compatible servers that omit it keep working). Anything else is refused, never
    guessed: indices on only some results, an index that is null, not an integer, outside the batch
    or repeated, more or fewer results than inputs, an embedding that is not a list of numbers, or a
    width other than `dimensions`. Non-finite and all-zero vectors are returned as they came.
    """
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
        raise ResponseRefused("the answer has no `data` list of results")
    data = payload["data"]
    if len(data) != count:
        raise ResponseRefused(f"the answer has {len(data)} results for {count} inputs")
    if not all(isinstance(item, dict) for item in data):
        raise ResponseRefused("a result is not an object")
    indexed = ["index" in item for item in data]
    if all(indexed):
        order: list[int] = []
        seen: set[int] = set()
        for position, item in enumerate(data):
            index = item["index"]
            # bool is an int to Python; JSON true is not a position
            if isinstance(index, bool) or not isinstance(index, int):
                raise ResponseRefused(f"result {position} has index {json.dumps(index)}, not a position in the batch")
            if not 0 <= index < count:
                raise ResponseRefused(f"result {position} has index {index}, outside a batch of {count}")
            if index in seen:
                raise ResponseRefused(f"index {index} answers twice")
            seen.add(index)
            order.append(index)
    elif any(indexed):
        raise ResponseRefused(f"{sum(indexed)} of {count} results carry an index and the rest do not")
    else:
        order = list(range(count))
    out: list[np.ndarray | None] = [None] * count
    for position, (index, item) in enumerate(zip(order, data)):
        embedding = item.get("embedding")
        if not isinstance(embedding, list) or not all(type(x) in (int, float) for x in embedding):
            raise ResponseRefused(f"result {position}'s embedding is not a list of numbers")
        if len(embedding) != dimensions:
            raise ResponseRefused(f"result {position} is {len(embedding)} wide; dimensions = {dimensions} is configured")
        with np.errstate(over="ignore"):      # a component past float32 becomes inf: the duty refuses it
            out[index] = np.asarray(embedding, dtype=np.float32)
    return [v for v in out if v is not None]


_endpoint_error = error_in_body     # the name the tests and older callers know


class OpenAIHTTPProvider:
    """An OpenAI-compatible endpoint. The HTTP client opens on the first `embed`; `close()` ends it."""

    def __init__(self, settings: EmbeddingsSettings) -> None:
        self.settings = settings
        self.url = f"{settings.base_url.rstrip('/')}/embeddings"
        self.space = EmbeddingSpace("openai", settings.model, settings.dimensions)
        batch_bytes = settings.max_batch_tokens
        # one input must fit one request, so a request total below the window lowers it too
        self.limits = Limits(
            max_input_bytes=min(MAX_INPUT_BYTES, settings.max_input_tokens, batch_bytes),
            max_batch_bytes=batch_bytes,
            max_batch_inputs=settings.max_batch_inputs or 128,
        )
        self.fingerprint = fingerprint_of(self.space, self.limits, endpoint=self.url)
        self._pool = Pool()

    def _key(self) -> str:
        name = self.settings.api_key_env
        if not name:
            return ""
        key = os.environ.get(name, "").strip()
        if not key:
            raise ProviderUnavailable(
                f"providers.embeddings.api_key_env names {name}, which is not set in this environment — "
                f"export {name} before starting crewlet")
        return key

    def _fail(self, message: str, key: str) -> str:
        return one_line(redact(f"{redact(self.url)}: {message}", key))

    def embed(self, texts: list[str], *, timeout: float) -> list[np.ndarray]:
        if not texts:
            return []
        key = self._key()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        body = {"model": self.settings.model, "input": list(texts), "dimensions": self.settings.dimensions}
        try:
            status, raw = self._pool.fetch(
                "POST", self.url, bound_s=timeout, timeout=timeout, max_bytes=MAX_RESPONSE_BYTES,
                too_large=lambda bound: ResponseRefused(self._fail(f"the answer passed {bound >> 20} MiB", key)),
                json=body, headers=headers)
        except Exception as exc:
            kind = transport_failure(exc)
            if kind in ("connect_timeout", "timeout"):
                raise ProviderUnavailable(self._fail(f"no answer within {timeout:g} s", key)) from None
            if kind is not None:
                reason = str(exc) or type(exc).__name__
                raise ProviderUnavailable(self._fail(f"cannot reach the endpoint: {reason}", key)) from None
            raise

        if status in INPUT_REFUSED_STATUSES:
            message, code = _endpoint_error(raw)
            message, code = redact(message, key), redact(code, key)
            raise InputRefused(
                self._fail(f"HTTP {status}: the request ({len(texts)} inputs) was refused: {message}"
                           + (f" (code {code})" if code else ""), key),
                status=status, endpoint_message=message, code=code)
        if status in (401, 403):
            message, _ = _endpoint_error(raw)
            where = f"the key in ${self.settings.api_key_env}" if self.settings.api_key_env else \
                "providers.embeddings.api_key_env (no key is sent)"
            raise ProviderUnavailable(self._fail(f"HTTP {status}: the credential was refused ({message}) — check {where}",
                                                 key), status=status)
        if status == 429:
            raise ProviderUnavailable(self._fail("HTTP 429: rate limited — the next tick asks again", key), status=status)
        if not 200 <= status < 300:
            message, _ = _endpoint_error(raw)
            hint = " — check providers.embeddings.base_url" if status in (301, 302, 307, 308, 404, 405) else ""
            raise ProviderUnavailable(self._fail(f"HTTP {status}: {message[:200]}{hint}", key), status=status)
        try:
            payload = json.loads(raw)
        except ValueError:
            raise ResponseRefused(self._fail(f"HTTP {status} with a body that is not JSON", key)) from None
        try:
            return map_response(payload, len(texts), self.settings.dimensions)
        except ResponseRefused as exc:
            raise ResponseRefused(self._fail(f"refused the answer: {exc.message}", key)) from None

    def close(self) -> None:
        self._pool.close()


register("openai", lambda settings, threads: OpenAIHTTPProvider(settings))
