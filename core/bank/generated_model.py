"""The chat model of [providers.llm] asked for edits to a generated page (spec 003, "Edits, not rewrites").

It is given the question, the page's sections as they are (each with its id, the entries it cites and whether what
it was written from changed) and the entries the refresh read, and answers one JSON object:

    {"edits": [{"op": "replace", "section": "s-…", "text": "…", "entries": ["e…"]},
               {"op": "insert", "after": "s-…" | null, "text": "…", "entries": ["e…"]},
               {"op": "remove", "section": "s-…"}]}

Anything else — no reply, a refusal, an answer that is not that object — is an `EditsFailed`; nothing is guessed
from prose. What may be applied is decided by the caller (core/bank/generated.py), never by the model.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from ..chat.openai_http import ChatFailed
from ..http_client import one_line

OPS = ("replace", "insert", "remove")

INSTRUCTION = (
    "You keep a page that answers one question from a set of numbered facts (entries). The page is a list of "
    "sections; each cites the entries it was written from. You are given the question, the sections as they are "
    "(each with changed: true when the question or one of its entries changed since it was written) and the "
    "entries. Propose edits to single sections, and only where needed: replace a changed section, remove a "
    "changed section whose entries no longer support it, or insert a new section for what the entries add. Say "
    "only what the entries say, and cite in each section the ids of the entries it rests on. Answer with one JSON "
    'object and nothing else: {"edits": [{"op": "replace", "section": "<id>", "text": "<markdown>", "entries": '
    '["<entry id>"]}, {"op": "insert", "after": "<section id or null>", "text": "<markdown>", "entries": '
    '["<entry id>"]}, {"op": "remove", "section": "<id>"}]}. No edit needed: {"edits": []}.'
)


class EditsFailed(Exception):
    """No edits: the endpoint failed, the model refused, or its answer is not the edits object (one line why)."""


class Chat(Protocol):
    def complete(self, messages: list[dict[str, str]]) -> Any: ...


@dataclass(frozen=True)
class Edit:
    op: str
    section: str | None = None      # replace, remove: the section named; insert: the section it follows (None: top)
    text: str = ""
    entries: tuple[str, ...] = ()


def messages(question: str, sections: list[dict[str, Any]], entries: list[dict[str, Any]]) -> list[dict[str, str]]:
    user = json.dumps({"question": question, "sections": sections, "entries": entries}, indent=1)
    return [{"role": "system", "content": INSTRUCTION}, {"role": "user", "content": user}]


def read_edits(text: str) -> list[Edit]:
    """The edits in the model's answer (the first JSON object in it; a fence around it is allowed)."""
    start = text.find("{")
    if start < 0:
        raise EditsFailed(f"the model's answer holds no JSON edits: {one_line(text)[:80]!r}")
    try:
        payload, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError:
        raise EditsFailed(f"the model's answer is not JSON edits: {one_line(text)[:80]!r}") from None
    raw = payload.get("edits") if isinstance(payload, dict) else None
    if not isinstance(raw, list):
        raise EditsFailed('the model\'s answer has no "edits" list')
    out = []
    for item in raw:
        if not isinstance(item, dict) or item.get("op") not in OPS:
            continue                         # an edit of no known shape is one dropped, not a failed refresh
        target = item.get("section") if item["op"] != "insert" else item.get("after")
        cited = item.get("entries") or []
        said = item.get("text")
        out.append(Edit(item["op"], target if isinstance(target, str) else None, said if isinstance(said, str) else "",
                        tuple(e for e in cited if isinstance(e, str)) if isinstance(cited, list) else ()))
    return out


def propose(chat: Chat, question: str, sections: list[dict[str, Any]], entries: list[dict[str, Any]]) -> list[Edit]:
    try:
        reply = chat.complete(messages(question, sections, entries))
    except ChatFailed as exc:
        raise EditsFailed(f"the model could not be reached ({exc.kind}): {exc.message}") from None
    if reply.refusal is not None:
        raise EditsFailed(f"the model refused: {one_line(reply.refusal)[:120] or 'no words given'}")
    return read_edits(reply.text)
