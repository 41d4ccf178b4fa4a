"""Embedding providers: the local offline model (default) and any OpenAI-compatible HTTP endpoint.

This package's top level imports nothing heavy — its section of company.toml ([providers.embeddings]) is
`settings.py`, which `core.config` composes — and the local model's onnxruntime and tokenizers are imported only when something
first embeds. Entry point: `core.embed.registry.make_provider(company)`.
"""
from __future__ import annotations

from ..sections.embed import LOCAL_DIMENSIONS, LOCAL_MODEL, MAX_BATCH_INPUTS, EmbeddingsSettings

__all__ = ["LOCAL_DIMENSIONS", "LOCAL_MODEL", "MAX_BATCH_INPUTS", "EmbeddingsSettings"]
