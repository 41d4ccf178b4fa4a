"""The chat model answers are written by: `[providers.llm]`, any OpenAI-compatible chat endpoint (optional).

`LlmSettings` is what company.toml's table says (`settings.py`: the section and its parser, which
core.config composes); `openai_http.ChatProvider` speaks to the endpoint. crewlet's only user of a chat model is
`crewlet ask` (core/ask); nothing else in core depends on one.
"""
from __future__ import annotations

from ..sections.chat import (DEFAULT_MAX_OUTPUT_TOKENS, DEFAULT_MAX_SOURCES, DEFAULT_SOURCE_TOKENS, DEFAULT_TIMEOUT_S, KEYS,
                       MAX_TIMEOUT_S, WINDOWS, LlmSettings)

__all__ = ["DEFAULT_MAX_OUTPUT_TOKENS", "DEFAULT_MAX_SOURCES", "DEFAULT_SOURCE_TOKENS", "DEFAULT_TIMEOUT_S", "KEYS",
           "MAX_TIMEOUT_S", "WINDOWS", "LlmSettings"]
