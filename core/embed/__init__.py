"""Embedding providers: the local offline model (default) and any OpenAI-compatible HTTP endpoint.

This package's top level imports nothing heavy — `core.config` parses [providers.embeddings] into the
settings below — and the local model's onnxruntime and tokenizers are imported only when something
first embeds. Entry point: `core.embed.registry.make_provider(company)`.
"""
from __future__ import annotations

from dataclasses import dataclass

LOCAL_MODEL = "all-MiniLM-L6-v2-int8"
LOCAL_DIMENSIONS = 384
MAX_BATCH_INPUTS = 128


@dataclass(frozen=True)
class EmbeddingsSettings:
    """[providers.embeddings]: which model turns text into vectors. The default is the local model,
    which needs no network and no key."""
    provider: str = "local"       # "local" (embedded, offline), "openai" (any OpenAI-compatible endpoint) or "none"
    base_url: str = ""            # e.g. "http://127.0.0.1:8089/v1"; POST {base_url}/embeddings
    model: str = LOCAL_MODEL      # the local model's name, or the endpoint's model
    dimensions: int = LOCAL_DIMENSIONS   # the stored width (an endpoint is sent it as `dimensions`)
    api_key_env: str = ""         # the NAME of the environment variable holding the key; never the key
    max_input_tokens: int = 8192
    max_batch_tokens: int = 300_000
    max_batch_inputs: int | None = None   # None: the provider's own (128 for an endpoint)
