"""[providers.embeddings]: which model turns text into vectors — the section's settings and its parser.

Absent, it is the local model, which needs no network and no key. `core.config` composes this section
(config.SECTIONS); the kit (core/settings.py) checks each value.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.settings import ConfigError, api_key_env, expect, table, whole

TABLE = "providers.embeddings"
LOCAL_MODEL = "all-MiniLM-L6-v2-int8"
LOCAL_DIMENSIONS = 384
MAX_BATCH_INPUTS = 128
# "none": no embeddings provider at all — nothing embeds (searches are keyword, agents' diaries recency
# alone), knowledge.vectors derives false, and vectors = true beside it is refused
PROVIDERS = ("local", "openai", "none")
KEYS = {
    "local": ("provider", "model", "dimensions", "max_batch_inputs"),
    "none": ("provider",),
    "openai": ("provider", "base_url", "model", "dimensions", "api_key_env",
               "max_input_tokens", "max_batch_tokens", "max_batch_inputs"),
}


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


def parse(file: Path, raw: Any) -> EmbeddingsSettings:
    """[providers.embeddings]; absent (None) means the local model. An endpoint needs base_url, model and
    dimensions; its key is named by api_key_env and read from the environment when it is used."""
    e = table(file, TABLE, raw, "make [providers.embeddings] a table")
    provider = e.get("provider", "local")
    if provider not in PROVIDERS:
        raise ConfigError(file, f"{TABLE}.provider", f"{provider!r} is not an embeddings provider",
                          'set it to "local" (the embedded model), "openai" (any OpenAI-compatible endpoint) or '
                          '"none" (nothing embeds)')
    allowed = KEYS[provider]
    for key in e:
        if key not in allowed:
            hint = (' (it is for provider = "openai")' if key in KEYS["openai"] else "")
            raise ConfigError(file, f"{TABLE}.{key}", f"not a setting of provider = {provider!r}{hint}",
                              f"remove it, or use one of: {', '.join(allowed)}")
    batch_inputs = e.get("max_batch_inputs")
    if batch_inputs is not None:
        batch_inputs = whole(file, f"{TABLE}.max_batch_inputs", batch_inputs, low=1, high=MAX_BATCH_INPUTS,
                             example="max_batch_inputs = 128")
    if provider == "none":
        return EmbeddingsSettings(provider="none", model="", dimensions=0)
    if provider == "local":
        model = expect(file, f"{TABLE}.model", e.get("model", LOCAL_MODEL), str, f'model = "{LOCAL_MODEL}"')
        if model != LOCAL_MODEL:
            raise ConfigError(file, f"{TABLE}.model", f"the local provider has no model {model!r}",
                              f'remove model (the local model is "{LOCAL_MODEL}"), or set provider = "openai"')
        dimensions = whole(file, f"{TABLE}.dimensions", e.get("dimensions", LOCAL_DIMENSIONS), low=1,
                           example=f"dimensions = {LOCAL_DIMENSIONS}")
        if dimensions != LOCAL_DIMENSIONS:
            raise ConfigError(file, f"{TABLE}.dimensions", f"the local model is {LOCAL_DIMENSIONS} wide, not {dimensions}",
                              f"remove dimensions (or set it to {LOCAL_DIMENSIONS})")
        return EmbeddingsSettings(provider="local", model=model, dimensions=dimensions, max_batch_inputs=batch_inputs)

    missing = [k for k in ("base_url", "model", "dimensions") if k not in e]
    if missing:
        examples = {"base_url": 'base_url = "https://api.openai.com/v1"', "model": 'model = "text-embedding-3-small"',
                    "dimensions": "dimensions = 1536"}
        raise ConfigError(file, f"{TABLE}.{missing[0]}", f"provider = \"openai\" needs {', '.join(missing)}",
                          "add " + "; ".join(examples[k] for k in missing))
    base_url = expect(file, f"{TABLE}.base_url", e["base_url"], str, 'base_url = "http://127.0.0.1:8089/v1"').strip()
    if not re.match(r"^https?://[^/\s]+", base_url):
        raise ConfigError(file, f"{TABLE}.base_url", f"{base_url!r} is not an http(s) URL",
                          'write it with its scheme, e.g. base_url = "http://127.0.0.1:8089/v1" (embeddings are POSTed to {base_url}/embeddings)')
    model = expect(file, f"{TABLE}.model", e["model"], str, 'model = "text-embedding-3-small"').strip()
    if not model:
        raise ConfigError(file, f"{TABLE}.model", "is empty", 'name the endpoint\'s model, e.g. model = "text-embedding-3-small"')
    dimensions = whole(file, f"{TABLE}.dimensions", e["dimensions"], low=1, high=65_536, example="dimensions = 1536")
    key_env = api_key_env(file, TABLE, e)
    max_input_tokens = whole(file, f"{TABLE}.max_input_tokens", e.get("max_input_tokens", 8192), low=1,
                             example="max_input_tokens = 8192")
    max_batch_tokens = whole(file, f"{TABLE}.max_batch_tokens", e.get("max_batch_tokens", 300_000), low=1,
                             example="max_batch_tokens = 300000")
    return EmbeddingsSettings(
        provider="openai", base_url=base_url.rstrip("/"), model=model, dimensions=dimensions, api_key_env=key_env,
        max_input_tokens=max_input_tokens, max_batch_tokens=max_batch_tokens,
        max_batch_inputs=batch_inputs if batch_inputs is not None else MAX_BATCH_INPUTS,
    )
