"""The chat model answers are written by: `[providers.llm]`, any OpenAI-compatible chat endpoint (optional).

`LlmSettings` is what company.toml's table says (parsed and validated by core.config, like the embeddings
provider's table); `openai_http.ChatProvider` speaks to the endpoint. crewlet's only user of a chat model is
`crewlet ask` (core/ask); nothing else in core depends on one.
"""
from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_OUTPUT_TOKENS = 800
DEFAULT_TIMEOUT_S = 60.0
# the sources' share of the prompt, counted with the shipped tokenizer (docs/ask.md: how it was chosen)
DEFAULT_SOURCE_TOKENS = 2000
DEFAULT_MAX_SOURCES = 8        # pages the search is asked for; the budget decides how many become sources
MAX_TIMEOUT_S = 600.0
WINDOWS = ("day", "week", "month")
KEYS = ("provider", "base_url", "model", "api_key_env", "max_output_tokens", "timeout_s", "max_source_tokens",
        "max_sources", *(f"budget_tokens_{w}" for w in WINDOWS))


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

