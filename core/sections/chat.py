"""[providers.llm]: the chat endpoint `crewlet ask` writes with — the section's settings and its parser.

Absent, there is no chat model (`crewlet ask` then lists the sources). `core.config` composes this section
(config.SECTIONS); the kit (core/settings.py) checks each value.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.settings import ConfigError, api_key_env, expect, only_known, table, whole

TABLE = "providers.llm"
DEFAULT_MAX_OUTPUT_TOKENS = 800
DEFAULT_TIMEOUT_S = 60.0
# the sources' share of the prompt, counted with the shipped tokenizer (docs/ask.md: how it was chosen)
DEFAULT_SOURCE_TOKENS = 2000
DEFAULT_MAX_SOURCES = 8        # pages the search is asked for; the budget decides how many become sources
MAX_TIMEOUT_S = 600.0
WINDOWS = ("day", "week", "month")
KEYS = ("provider", "base_url", "model", "api_key_env", "max_output_tokens", "timeout_s", "max_source_tokens",
        "max_sources", *(f"budget_tokens_{w}" for w in WINDOWS))
_EXAMPLES = {"base_url": 'base_url = "https://api.openai.com/v1"', "model": 'model = "gpt-4o-mini"'}


@dataclass(frozen=True)
class LlmSettings:
    """The chat endpoint. Its key is named by api_key_env and read from the environment at each call."""

    base_url: str                  # POST {base_url}/chat/completions
    model: str
    api_key_env: str = ""          # the NAME of the environment variable holding the key; never the key
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    timeout_s: float = DEFAULT_TIMEOUT_S      # the whole reply, from the request to its last token
    max_source_tokens: int = DEFAULT_SOURCE_TOKENS
    max_sources: int = DEFAULT_MAX_SOURCES
    budget_tokens_day: int | None = None      # tokens in + out the company may spend in each window
    budget_tokens_week: int | None = None
    budget_tokens_month: int | None = None

    def budget(self, window: str) -> int | None:
        return getattr(self, f"budget_tokens_{window}")

    def fingerprint(self) -> str:
        """What an answer was written with: a cached answer of another model or length is not served."""
        return f"{self.base_url}|{self.model}|{self.max_output_tokens}|{self.max_source_tokens}|{self.max_sources}"


def parse(file: Path, raw: Any) -> LlmSettings | None:
    """[providers.llm], or None when the table is absent."""
    if raw is None:
        return None
    e = table(file, TABLE, raw, "make [providers.llm] a table")
    only_known(file, TABLE, e, KEYS, problem="not a setting of the chat provider")
    provider = e.get("provider", "openai")
    if provider != "openai":
        raise ConfigError(file, f"{TABLE}.provider", f"{provider!r} is not a chat provider",
                          'remove it, or set provider = "openai" (any OpenAI-compatible chat endpoint)')
    missing = [k for k in ("base_url", "model") if k not in e]
    if missing:
        raise ConfigError(file, f"{TABLE}.{missing[0]}", f"a chat provider needs {', '.join(missing)}",
                          "add " + "; ".join(_EXAMPLES[k] for k in missing))
    base_url = expect(file, f"{TABLE}.base_url", e["base_url"], str, _EXAMPLES["base_url"]).strip()
    if not re.match(r"^https?://[^/\s]+", base_url):
        raise ConfigError(file, f"{TABLE}.base_url", f"{base_url!r} is not an http(s) URL",
                          'write it with its scheme, e.g. base_url = "http://127.0.0.1:8080/v1" '
                          "(questions are POSTed to {base_url}/chat/completions)")
    model = expect(file, f"{TABLE}.model", e["model"], str, _EXAMPLES["model"]).strip()
    if not model:
        raise ConfigError(file, f"{TABLE}.model", "is empty", f"name the endpoint's model, e.g. {_EXAMPLES['model']}")
    key_env = api_key_env(file, TABLE, e)
    max_output = whole(file, f"{TABLE}.max_output_tokens", e.get("max_output_tokens", DEFAULT_MAX_OUTPUT_TOKENS),
                       low=16, high=32_768, example=f"max_output_tokens = {DEFAULT_MAX_OUTPUT_TOKENS}")
    max_source_tokens = whole(file, f"{TABLE}.max_source_tokens", e.get("max_source_tokens", DEFAULT_SOURCE_TOKENS),
                              low=200, high=200_000, example=f"max_source_tokens = {DEFAULT_SOURCE_TOKENS}")
    max_sources_n = whole(file, f"{TABLE}.max_sources", e.get("max_sources", DEFAULT_MAX_SOURCES), low=1, high=50,
                          example=f"max_sources = {DEFAULT_MAX_SOURCES}")
    timeout = e.get("timeout_s", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise ConfigError(file, f"{TABLE}.timeout_s", f"expected a number of seconds, found {type(timeout).__name__} "
                          f"{timeout!r}", f"write a number, e.g. timeout_s = {DEFAULT_TIMEOUT_S:g}")
    if not 0 < timeout <= MAX_TIMEOUT_S:
        raise ConfigError(file, f"{TABLE}.timeout_s", f"{timeout:g} is out of range",
                          f"use more than 0 and at most {MAX_TIMEOUT_S:g} seconds, e.g. timeout_s = {DEFAULT_TIMEOUT_S:g}")
    budgets = {}
    for window in WINDOWS:
        key = f"budget_tokens_{window}"
        if key in e:
            budgets[key] = whole(file, f"{TABLE}.{key}", e[key], low=1, example=f"{key} = 200000")
    return LlmSettings(base_url=base_url.rstrip("/"), model=model, api_key_env=key_env,
                       max_output_tokens=max_output, timeout_s=float(timeout), max_source_tokens=max_source_tokens,
                       max_sources=max_sources_n, **budgets)
