"""Counting tokens: the WordPiece tokenizer that ships inside crewlet (core/embed/data, all-MiniLM-L6-v2's
30,522 pieces), without its 256-token truncation.

The reader's own tokenizer is unknown (a chat model behind any OpenAI-compatible endpoint, an agent's model),
so a count here is the one crewlet can make on every machine, offline: the answer's sources (core/ask) and the
knowledge bank's context (core/bank/context.py) are kept inside their budgets by it. Its pre-tokenizer splits
at whitespace and punctuation before it splits words into pieces, so the count of lines joined by newlines is
the sum of their counts.
"""
from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_tokenizer: Any = None

TOKENIZER_NAME = "all-MiniLM-L6-v2 WordPiece"


def _load() -> Any:
    global _tokenizer
    with _lock:
        if _tokenizer is None:
            from tokenizers import Tokenizer

            from .local import TOKENIZER_FILE, TOKENIZER_SHA256, _sha256_of

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
