"""The calling agent's private diary: remember (the spec's reflect_and_persist), recall_memory, forget.

An agent's own notes only: the tools act as the session's agent and take no agent argument, so no
agent can read or write another's diary through them (core/agents/diary.py holds the rule as well).
"""
from __future__ import annotations

from typing import Any

from pydantic import Field

from ...agents.diary import DEFAULT_RECALL, UNION_MAX, Note, Recall
from ...agents.notes import MAX_NOTE_CHARS
from ..session import Session
from .base import Args, Reply, Tool


def sentence(message: str, handle: str) -> str:
    """A message as a sentence: capitalised, unless it opens with a handle (eng-bot stays eng-bot)."""
    opens_with_handle = message.startswith(handle)
    return (message if opens_with_handle else message[:1].upper() + message[1:]) + "."


class RememberArgs(Args):
    fact: str = Field(description=(
        f"One declarative fact, in a sentence or two (at most {MAX_NOTE_CHARS} characters), written so it still "
        "makes sense out of context: 'Deploys to staging need the VPN on first', not 'remember the VPN'. One fact "
        "a call — a list is refused. Never a secret: a note that looks like it holds a key, token or password is "
        "refused; note where the secret is kept instead."))


class RecallArgs(Args):
    query: str = Field(description=(
        "What you are about to do, or want to know, in plain words (e.g. 'deploying the billing service'). Your "
        "notes closest in meaning are found with it; your most recent notes come back whatever it says. An "
        "empty query returns only the most recent."))
    limit: int = Field(default=DEFAULT_RECALL, ge=1, le=UNION_MAX, description=(
        f"How many notes at most (1–{UNION_MAX}; default {DEFAULT_RECALL}). The candidates are at most "
        f"{UNION_MAX}: 50 by meaning and 50 most recent."))


class ForgetArgs(Args):
    note_id: int = Field(description="The id of one of your own notes, as remember or recall_memory gave it.")


def _note_line(n: dict[str, Any]) -> str:
    """[note 12 · 3 days ago · similarity 0.41]: what a model weighs a note by."""
    parts = [f"note {n['id']}", "just now" if n["age"] == "just now" else f"{n['age']} ago"]
    if n["similarity"] is not None:
        parts.append(f"similarity {n['similarity']:.2f}")
    if n["via"] == ["recent"]:
        parts.append("among your most recent" + ("" if n["embedded"] else ", not embedded yet"))
    return "[" + " · ".join(parts) + "]"


def remember(session: Session, args: RememberArgs) -> Reply:
    done = session.diary.remember(args.fact, actor=session.handle)
    note = done.note
    if done.duplicate:
        text = f"You had already noted exactly this, as note {note.id}; nothing new was written."
    elif done.embedded:
        text = f"Remembered as note {note.id}."
    else:
        text = (f"Remembered as note {note.id}. It is not embedded yet ({done.why_not_embedded}): until it is, "
                "recall_memory finds it among your most recent notes, not by meaning.")
    return Reply(text, done.to_json())


def recall(session: Session, args: RecallArgs) -> Reply:
    result: Recall = session.diary.recall(args.query, actor=session.handle, limit=args.limit)
    data = result.to_json()
    lines = [sentence(result.message, session.handle)]
    for n in data["notes"]:
        lines.append(f"{n['rank']}. {_note_line(n)} {n['text']}")
    if data["notes"]:
        lines.append("These are your own notes; an older one may be out of date — prefer what you see now, and "
                     "forget a note that is wrong.")
    return Reply("\n".join(lines), data)


def forget(session: Session, args: ForgetArgs) -> Reply:
    note: Note = session.diary.forget(args.note_id, actor=session.handle)
    return Reply(f"Forgot note {note.id}: {note.text}", {"forgotten": note.to_json()})


REMEMBER = Tool(
    name="remember",
    title="Remember a fact for yourself",
    description=(
        "Keep one fact in your own private diary, so a later session of yours can recall it: something you "
        "learned that is not written in the knowledge base and that you will need again (how a system behaves, a "
        "person's preference, a step that failed and why). Returns the note's id, and whether it was embedded for "
        "recall by meaning. Use it when you learn something worth keeping, one fact per call; knowledge the team "
        "should share belongs in a page (write_page), not in your diary. Only you can read or forget your notes; "
        "the people running you can read them."),
    hint="keep one new fact a call in your private diary",
    args=RememberArgs, run=remember, audience="agent")

RECALL = Tool(
    name="recall_memory",
    title="Recall your own notes",
    description=(
        "Bring back notes from your own private diary for what you are about to do: the 50 closest in meaning to "
        "the query and your 50 most recent (general rules you noted may not share its words), merged without "
        "repeats and ordered by how well each half ranked them. Returns each note with its id, its age, which half "
        "found it and its similarity, plus a sentence saying how it was selected (by recency alone when notes "
        "cannot be compared by meaning just now). Use it at the start of a task and before you decide something "
        "you may have learned about before."),
    hint="before a task, bring back what you noted for yourself",
    args=RecallArgs, run=recall, read_only=True, audience="agent")

FORGET = Tool(
    name="forget",
    title="Forget one of your notes",
    description=(
        "Delete one note from your own diary by its id, for good. Returns the note that was forgotten. Use it for "
        "a note that turned out wrong or no longer holds (then remember the corrected fact). You can forget only "
        "your own notes."),
    hint="drop a note of yours that turned out wrong",
    args=ForgetArgs, run=forget, audience="agent")
