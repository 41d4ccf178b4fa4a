"""Counting tokens for an answer: the WordPiece tokenizer that ships inside crewlet (core/embed/tokens.py),
and a chat message's framing.

The chat model's own tokenizer is unknown (any OpenAI-compatible endpoint), so a count here is an
estimate of what it bills; it is used to keep the sources inside their budget and to judge whether a
spend window has room before a call. After a call the endpoint's own `usage` is what is recorded.
Measured on the documentation corpora (bench/ask_retrieval.py): docs/ask.md has bytes per token.
"""
from __future__ import annotations

from ..embed.tokens import count, count_many

# a chat message's framing (role, separators) in the chat formats of the common servers
MESSAGE_OVERHEAD = 4

__all__ = ["MESSAGE_OVERHEAD", "count", "count_many", "count_messages"]


def count_messages(messages: list[dict[str, str]]) -> int:
    return sum(count(m.get("content", "")) + MESSAGE_OVERHEAD for m in messages) + 2
