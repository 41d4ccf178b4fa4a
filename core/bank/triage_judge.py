"""The two model judgments of triage (spec 003, "Triage and escalation": "rules in code and two model judgments
decide how the two relate", and the acceptance's "two separate model judgments accept it").

Triage (triage.py) asks the configured chat model ([providers.llm]) twice, in two separate calls, each call
covering the new entry and every neighbour the rules could not relate: two calls a triage, not two a neighbour.
The neighbours the rules did relate are shown too, with what the rules found, so that `accept` weighs them (an
entry contradicting one no person verified is not in the spec's conditions, but the judgments should decline it).
Each prompt says which judgment it is ("Judgment 1 of 2", "Judgment 2 of 2"), so the two are told apart in a log
and a test's endpoint can answer each as it wants. The model answers one JSON object:

    {"one_claim": true, "accept": true, "relations": {"<neighbour id>": "duplicate"}, "reason": "…"}

`relations` names every neighbour asked about, each with one of duplicate, refinement, replacement, contradiction,
different. Anything else — no reply, an HTTP error, a refusal, an answer that is not that object, a value of the
wrong type, a neighbour left out or given another word — is a `JudgmentFailed` saying what was wrong, and triage
escalates with the failure in its inputs. A judgment is never guessed from prose (as core/bank/judge.py).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..chat.openai_http import ChatFailed, ChatProvider, ChatReply
from ..http_client import one_line
from ..pages.triage_model import RELATIONS

if TYPE_CHECKING:
    from ..chat import LlmSettings

JUDGMENTS = 2                   # "two separate model judgments"
MAX_REASON_CHARS = 300          # what the decision's inputs keep of a judgment's reason
MAX_BODY_CHARS = 1_200          # an entry's body is at most 1,000 characters: every body goes in whole

INSTRUCTION = (
    "You triage a new entry for a company's knowledge bank about its own software, before a person sees it. You "
    "are one of two separate judges. You are given the new entry (its kind, scope, who wrote it, what it cites) and "
    "the entries in use nearest to it. Answer with one JSON object and nothing else: "
    '{"one_claim": true | false, "accept": true | false, "relations": {"<neighbour id>": "duplicate" | '
    '"refinement" | "replacement" | "contradiction" | "different"}, "reason": "<one sentence>"}. '
    "one_claim: the entry says one thing (one fact, decision, convention or gotcha, with its reason or fix), not a "
    "list, a summary or several unrelated facts. relations: for every neighbour listed, by its id, how the new "
    "entry relates to it: duplicate (says the same thing), refinement (says what the neighbour says and more), "
    "replacement (says the neighbour was true and is no longer: something changed), contradiction (both cannot be "
    "true at once), different (another fact). accept: the entry can be used by agents as it is, beside the entries "
    "listed: it says one specific thing a reader can act on, plausibly true of what it cites, and it repeats, "
    "replaces or contradicts none of them."
)


class JudgmentFailed(Exception):
    """No judgment: the endpoint failed, the model refused, or its answer is not a judgment (one line why)."""


@dataclass(frozen=True)
class Subject:
    """The new entry as a judgment is shown it."""

    body: str
    kind: str
    scope: str | None
    written_by: str                  # "an agent", "a person", "crewlet"
    citations: tuple[str, ...] = ()  # each in a few words ("server:src/cache.py lines 1-3 at 1a2b3c4")


@dataclass(frozen=True)
class Neighbour:
    """An entry in use near the new one. `relation`: what the rules found (shown, for the judgment's accept; no
    relation is asked), or None: the rules could not tell, and the judgment gives it."""

    id: str
    body: str
    kind: str
    scope: str | None
    verified: bool
    locked: bool
    relation: str | None = None


@dataclass(frozen=True)
class Judgment:
    n: int                                  # 1 or 2
    one_claim: bool
    accept: bool
    relations: dict[str, str] = field(default_factory=dict)
    reason: str = ""
    model: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "one_claim": self.one_claim, "accept": self.accept, "relations": dict(self.relations),
                "reason": self.reason, "model": self.model}


class Chat(Protocol):
    """What a judgment needs of a chat endpoint: core/chat's ChatProvider, or a stand-in of the same interface
    (bench/triage.py's counting one, in process)."""

    def complete(self, messages: list[dict[str, str]]) -> ChatReply: ...

    def close(self) -> None: ...


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def prompt(n: int, subject: Subject, neighbours: list[Neighbour]) -> list[dict[str, str]]:
    """The messages judgment `n` (1 or 2) sends."""
    lines = [f"Judgment {n} of {JUDGMENTS}.", "",
             f"The new entry ({subject.kind}, scope {subject.scope or 'every area'}, written by {subject.written_by}):",
             _clip(subject.body, MAX_BODY_CHARS)]
    lines += ["It cites:", *[f"- {c}" for c in subject.citations]] if subject.citations else ["It cites nothing."]
    known = [nb for nb in neighbours if nb.relation is not None]
    asked = [nb for nb in neighbours if nb.relation is None]
    if known:
        lines += ["", "Entries in use near it whose relation rules in code found (weigh them for accept; give no "
                      "relation for these):"]
        lines += [_line(nb, f"the rules found: {nb.relation}") for nb in known]
    lines.append("")
    if asked:
        lines.append("The entries in use near it (give a relation for each id):")
        lines += [_line(nb) for nb in asked]
    else:
        lines.append('No relation is asked of you: answer "relations": {}.')
    return [{"role": "system", "content": INSTRUCTION}, {"role": "user", "content": "\n".join(lines)}]


def _line(nb: Neighbour, *also: str) -> str:
    marks = [nb.kind, f"scope {nb.scope or 'every area'}"]
    if nb.verified:
        marks.append("verified by a person")
    if nb.locked:
        marks.append("on a page people maintain by hand")
    return f"- id {nb.id} ({', '.join([*marks, *also])}): {_clip(nb.body, MAX_BODY_CHARS)}"


def _flag(payload: dict[str, Any], key: str) -> bool:
    value = payload.get(key)
    if not isinstance(value, bool):
        raise JudgmentFailed(f"the model's {key} is {value!r}, not true or false")
    return value


def read_judgment(n: int, text: str, asked: list[str], model: str = "") -> Judgment:
    """Judgment `n` from the model's answer: the first JSON object in it (a fence around it is allowed), with a
    relation for every neighbour id in `asked`. JudgmentFailed saying what was wrong otherwise."""
    start = text.find("{")
    if start < 0:
        raise JudgmentFailed(f"the model's answer holds no JSON judgment: {one_line(text)[:80]!r}")
    try:
        payload, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError:
        raise JudgmentFailed(f"the model's answer is not a JSON judgment: {one_line(text)[:80]!r}") from None
    if not isinstance(payload, dict):
        raise JudgmentFailed("the model's answer is not a JSON object")
    one_claim, accept = _flag(payload, "one_claim"), _flag(payload, "accept")
    given = payload.get("relations", {})
    if not isinstance(given, dict):
        raise JudgmentFailed(f"the model's relations are {type(given).__name__}, not an object by neighbour id")
    relations: dict[str, str] = {}
    for nid in asked:
        word = given.get(nid)
        if word is None:
            raise JudgmentFailed(f"the model gave no relation for neighbour {nid}")
        if not isinstance(word, str) or word.strip().lower() not in RELATIONS:
            raise JudgmentFailed(f"the model's relation for neighbour {nid} is {word!r}, not one of "
                                 f"{', '.join(RELATIONS)}")
        relations[nid] = word.strip().lower()
    reason = payload.get("reason")
    reason = one_line(reason)[:MAX_REASON_CHARS] if isinstance(reason, str) and reason.strip() else "no reason given"
    return Judgment(n, one_claim, accept, relations, reason, model)


class TriageJudge:
    """The configured chat model ([providers.llm]) as triage's judge. `chat`: a stand-in endpoint of the same
    interface (the bench's); by default a ChatProvider of `settings`. `close()` ends its client."""

    def __init__(self, settings: LlmSettings, *, chat: Chat | None = None) -> None:
        self.settings = settings
        self.chat: Chat = chat if chat is not None else ChatProvider(settings)

    @property
    def model(self) -> str:
        return self.settings.model

    def judge(self, n: int, subject: Subject, neighbours: list[Neighbour]) -> Judgment:
        """Judgment `n` of the two: one chat call, a relation asked for each neighbour whose `relation` is None."""
        try:
            reply = self.chat.complete(prompt(n, subject, neighbours))
        except ChatFailed as exc:
            raise JudgmentFailed(f"the model gave no judgment ({exc.kind}): {exc.message}") from None
        if reply.refusal is not None:
            raise JudgmentFailed(f"the model refused to judge: {one_line(reply.refusal)[:120] or 'no words given'}")
        return read_judgment(n, reply.text, [nb.id for nb in neighbours if nb.relation is None],
                             reply.model or self.settings.model)

    def close(self) -> None:
        self.chat.close()
