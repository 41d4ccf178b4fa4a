"""Counting tokens: the WordPiece tokenizer that ships inside crewlet (core/embed/data), without its
256-token truncation.

The chat model's own tokenizer is unknown (any OpenAI-compatible endpoint), so a count here is an
estimate of what it bills; it is used to keep the sources inside their budget and to judge whether a
spend window has room before a call. After a call the endpoint's own `usage` is what is recorded.
Measured on the documentation corpora (bench/ask_retrieval.py): docs/ask.md has bytes per token.
"""
from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_tokenizer: Any = None
# a chat message's framing (role, separators) in the chat formats of the common servers
MESSAGE_OVERHEAD = 4


def _load() -> Any:
    global _tokenizer
    with _lock:
        if _tokenizer is None:
            from tokenizers import Tokenizer

            from core.embed.local import TOKENIZER_FILE, TOKENIZER_SHA256, _sha256_of

            if _sha256_of(TOKENIZER_FILE) != TOKENIZER_SHA256:
                raise RuntimeError(f"the tokenizer file {TOKENIZER_FILE} does not match its pinned sha256 — "
                                   "reinstall crewlet (pip install -e .)")
            tok = Tokenizer.from_file(str(TOKENIZER_FILE))
            tok.no_truncation()
            tok.no_padding()
            _tokenizer = tok
        return _tokenizer


def count(text: str) -> int:
    """Tokens in `text` (0 for empty)."""
    if not text:
        return 0
    return len(_load().encode(text, add_special_tokens=False).ids)


def count_many(texts: list[str]) -> list[int]:
    if not texts:
        return []
    return [len(e.ids) for e in _load().encode_batch(texts, add_special_tokens=False)]


def count_messages(messages: list[dict[str, str]]) -> int:
    return sum(count(m.get("content", "")) + MESSAGE_OVERHEAD for m in messages) + 2
