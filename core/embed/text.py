"""What is embedded for a source, and the bucket every source is stamped with.

A source is embedded as its opening: the title, one space, then the body with every run of
whitespace collapsed, cut to a byte bound (8 KiB, or the model's smaller per-input bound) on a
UTF-8 character boundary. Collapsed first and cut second, so indentation and blank lines spend none
of the bound. Only the first 16,384 characters of a body are read: that is all an 8 KiB opening can
need (and a body that opens on a longer run of whitespace counts what follows as past the window,
exactly as the spec's coverage report measures it).

The digest is sha256 over exactly the UTF-8 bytes the provider will receive, so a stored vector can be
matched to the text it came from and an unchanged text never costs a provider call.
"""
from __future__ import annotations

import hashlib

DEFAULT_BOUND_BYTES = 8 * 1024
BODY_READ_CHARS = 16_384
BUCKETS = 64


def embed_text(title: str, body: str, bound_bytes: int = DEFAULT_BOUND_BYTES) -> tuple[str, str]:
    """(text, digest): the opening the provider is sent, and sha256 hex of its UTF-8 bytes.

    Whitespace is Python's definition (`str.split()` with no argument: every Unicode space
    character, tabs, newlines), and the result has no leading or trailing whitespace. A lone
    surrogate (which UTF-8 cannot carry) is sent as '?'.
    """
    if bound_bytes < 1:
        raise ValueError(f"bound_bytes must be at least 1, got {bound_bytes}")
    collapsed = " ".join(f"{title} {body[:BODY_READ_CHARS]}".split())
    data = collapsed.encode("utf-8", "replace")
    if len(data) > bound_bytes:
        # 'ignore' drops only a multi-byte character the cut split in two (all before it is valid)
        text = data[:bound_bytes].decode("utf-8", "ignore").rstrip()
        data = text.encode("utf-8")
    else:
        text = data.decode("utf-8")
    return text, hashlib.sha256(data).hexdigest()


def bucket(source_id: str) -> int:
    """The search shard of a source: a stable hash of its own id into 64 fixed buckets.

    bucket(id) = the first 8 bytes of sha256(id as UTF-8), read as a big-endian unsigned integer,
    modulo 64. It depends on nothing but the id — not the container, the project, the log position or
    the node — so a source that moves keeps its bucket and a source with no vector still has one.
    The function is fixed for the life of a deployment: changing it would leave every stored row in
    the wrong bucket. Both estates (the keyword and the vector side) must call this one function.
    """
    digest = hashlib.sha256(source_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % BUCKETS
