"""The providers layer the embedding duty and the query path call: what a vector is pinned to, a
provider's packing rule and the errors that decide what the duty does next (`registry.make_provider`
picks the configured provider).

Error classes carry the decision, not the transport:
- `InputRefused`      the request is unacceptable (HTTP 400/413/422): the duty bisects the batch.
- `ProviderUnavailable` about the provider (429, 5xx, timeout, refused connection, bad credential):
                      ends the tick's requests; nothing is lost, the selection is derived from rows.
- `ResponseRefused`   an answer that does not map onto the batch exactly once, or of the wrong width:
                      nothing from it is filed.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..clock import half_the_cores
from ..errors import CrewletError
# the words a failure is told in, shared with every HTTP client (re-exported: core.embed.provider.redact)
from ..http_client import one_line, redact  # noqa: F401

if TYPE_CHECKING:
    import numpy as np

MAX_INPUT_BYTES = 8 * 1024


@dataclass(frozen=True)
class EmbeddingSpace:
    """What a stored vector is pinned to: vectors of two spaces are never compared."""
    provider: str                # "local" | "openai"
    model: str                   # e.g. "all-MiniLM-L6-v2-int8"
    dimensions: int              # the stored width
    tokenizer: str = ""          # the local tokenizer's digest (empty for a remote model)

    def key(self) -> str:
        """One stable string, stored beside each vector and filtered on, e.g.
        `local:all-MiniLM-L6-v2-int8:384:be50c3628f2bf5bb` or `openai:text-embedding-3-small:1536`."""
        parts = [self.provider, self.model, str(self.dimensions)]
        if self.tokenizer:
            parts.append(self.tokenizer)
        return ":".join(parts)


@dataclass(frozen=True)
class Limits:
    """The provider's packing rule, counted in BYTES so no tokenizer is needed: no tokenizer emits
    more than one token a byte, so N bytes are at most N tokens."""
    max_input_bytes: int         # per input: min(8 KiB, the model's own bound, max_input_tokens)
    max_batch_bytes: int         # a request's total (max_batch_tokens)
    max_batch_inputs: int        # at most 128


class ProviderError(CrewletError):
    """Base of every provider failure; its message is one line with anything key-like redacted."""

    code = "provider_failed"

    def __init__(self, message: str) -> None:
        self.message = one_line(redact(message))
        super().__init__(self.message)


class InputRefused(ProviderError):
    """HTTP 400/413/422: the request is unacceptable; the endpoint does not say which input."""

    def __init__(self, message: str, *, status: int, endpoint_message: str = "", code: str = "") -> None:
        self.status = status
        self.endpoint_message = one_line(redact(endpoint_message))
        self.endpoint_code = one_line(redact(code))    # the endpoint's own error code (`code` is crewlet's)
        super().__init__(message)


class ProviderUnavailable(ProviderError):
    """About the provider rather than an input: ends the tick's requests."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


class ResponseRefused(ProviderError):
    """A response that does not map onto the batch exactly once, or carries the wrong width."""


@runtime_checkable
class Provider(Protocol):
    space: EmbeddingSpace
    limits: Limits
    fingerprint: str             # model, width, limits, endpoint (NOT the key)

    def embed(self, texts: list[str], *, timeout: float) -> list[np.ndarray]:
        """One float32 vector per input, in INPUT order. Non-finite or all-zero vectors are
        returned as they came: the duty refuses them per source."""
        ...

    def close(self) -> None: ...


def fingerprint_of(space: EmbeddingSpace, limits: Limits, endpoint: str = "") -> str:
    """sha256 over what a refusal depends on: model, width, limits and endpoint — never the key, so
    rotating a key keeps the refusal memory and changing any of these forgets it."""
    blob = json.dumps({
        "provider": space.provider, "model": space.model, "dimensions": space.dimensions,
        "tokenizer": space.tokenizer, "endpoint": endpoint,
        "limits": [limits.max_input_bytes, limits.max_batch_bytes, limits.max_batch_inputs],
    }, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def default_threads() -> int:
    """The local model's compute threads: half this machine's cores (the seats and searches keep the rest)."""
    return half_the_cores()
