"""Embedding providers: the local offline model (default) and any OpenAI-compatible HTTP endpoint.

This package's top level imports nothing heavy — `core.config` reads the constants below — and the
local model's onnxruntime and tokenizers are imported only when something first embeds.
Entry point: `core.embed.provider.make_provider(company)`.
"""
LOCAL_MODEL = "all-MiniLM-L6-v2-int8"
LOCAL_DIMENSIONS = 384
MAX_BATCH_INPUTS = 128
