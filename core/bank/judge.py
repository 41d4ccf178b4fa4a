"""A chat model asked whether rewritten code still supports an entry's claim (spec 003, "Checks when the code
changes": "a model judges whether the new code still supports the claim").

The recheck (recheck.py) asks it only for a citation whose cited lines were rewritten in place and found nowhere
else (CHANGED): the claim, the file, the lines as they were and the lines at their place now. The model answers
one JSON object, `{"verdict": "supports" | "contradicts" | "unclear", "reason": "…"}`; anything else — no
reply, a refusal, an answer that is not that object — is a `JudgeFailed`, and the citation goes to a person
with the failure said. A verdict is never guessed from prose.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..chat.openai_http import ChatFailed, ChatProvider
from ..http_client import one_line

if TYPE_CHECKING:
    from ..chat import LlmSettings

SUPPORTS, CONTRADICTS, UNCLEAR = "supports", "contradicts", "unclear"
VERDICTS = (SUPPORTS, CONTRADICTS, UNCLEAR)
MAX_LINES_CHARS = 4_000        # each side of the change in the prompt: a cited range is a few lines, not a file
MAX_REASON_CHARS = 300         # what a check's message and a dispute's reason keep of the model's reason

INSTRUCTION = (
    "You check whether a fact about a codebase still holds after the code it cites changed. You are given the "
    "fact, the file, the cited lines as they were, and the lines at their place now. Answer with one JSON object "
    'and nothing else: {"verdict": "supports" | "contradicts" | "unclear", "reason": "<one sentence>"}. '
    "supports: the new lines still support the fact. contradicts: the new lines show the fact is no longer "
    "true. unclear: the new lines neither support nor contradict it (the code it rests on moved elsewhere, or "
    "the change is unrelated to it)."
)


class JudgeFailed(Exception):
    """No verdict: the endpoint failed, the model refused, or its answer is not a verdict (one line why)."""


@dataclass(frozen=True)
class Verdict:
    verdict: str                   # SUPPORTS, CONTRADICTS or UNCLEAR
    reason: str                    # one line, at most MAX_REASON_CHARS
    model: str = ""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "\n…"


def prompt(claim: str, kind: str, path: str, old_text: str, new_text: str) -> list[dict[str, str]]:
    """The messages a judgment sends."""
    user = (f"Fact ({kind}): {claim}\n\nFile: {path}\n\nThe cited lines as they were:\n```\n"
            f"{_clip(old_text, MAX_LINES_CHARS)}\n```\n\nThe lines at their place now:\n```\n"
            f"{_clip(new_text, MAX_LINES_CHARS)}\n```")
    return [{"role": "system", "content": INSTRUCTION}, {"role": "user", "content": user}]


def read_verdict(text: str) -> tuple[str, str]:
    """(verdict, reason) from the model's answer: the first JSON object in it (a fence around it is allowed).
    JudgeFailed saying what was wrong otherwise."""
    start = text.find("{")
    if start < 0:
        raise JudgeFailed(f"the model's answer holds no JSON verdict: {one_line(text)[:80]!r}")
    try:
        payload, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError:
        raise JudgeFailed(f"the model's answer is not a JSON verdict: {one_line(text)[:80]!r}") from None
    if not isinstance(payload, dict):
        raise JudgeFailed("the model's answer is not a JSON object")
    verdict = payload.get("verdict")
    if not isinstance(verdict, str) or verdict.strip().lower() not in VERDICTS:
        raise JudgeFailed(f"the model's verdict {verdict!r} is not one of {', '.join(VERDICTS)}")
    reason = payload.get("reason")
    reason = one_line(reason)[:MAX_REASON_CHARS] if isinstance(reason, str) and reason.strip() else "no reason given"
    return verdict.strip().lower(), reason


class Judge:
    """The configured chat model ([providers.llm]) as a judge of changed citations. `close()` ends its client."""

    def __init__(self, settings: LlmSettings) -> None:
        self.settings = settings
        self.provider = ChatProvider(settings)

    @property
    def model(self) -> str:
        return self.settings.model

    def judge(self, claim: str, kind: str, path: str, old_text: str, new_text: str) -> Verdict:
        try:
            reply = self.provider.complete(prompt(claim, kind, path, old_text, new_text))
        except ChatFailed as exc:
            raise JudgeFailed(f"the model gave no verdict ({exc.kind}): {exc.message}") from None
        if reply.refusal is not None:
            raise JudgeFailed(f"the model refused to judge: {one_line(reply.refusal)[:120] or 'no words given'}")
        verdict, reason = read_verdict(reply.text)
        return Verdict(verdict, reason, reply.model or self.settings.model)

    def close(self) -> None:
        self.provider.close()
