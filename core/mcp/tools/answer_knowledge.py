"""answer_knowledge: a person's question answered from the knowledge base's own pages (core/ask).

A person's tool, offered to no agent (the spec's "Answering a question"): an agent has search_knowledge
and its own model, and a second model's summary in its context would be one it could not check. The
answer is the one `crewlet ask` gives — the same search scoped as the asker may read, the same sources,
citation check, cache and the company's spend windows, charged to the person the server acts as.

A failure (the model timed out, refused, answered garbage or an HTTP error; a spend window had no room; the
search could not run) is an answer here as everywhere, as search_knowledge's outcomes are: its one-line
reason first, then the sources it would have been written from, with `status` saying which — not a tool
error, since the sources are still worth reading. What the call itself got wrong (an empty question, a space
that does not exist, an unknown argument) is a tool error, said as search_knowledge and list_pages say it.
"""
from __future__ import annotations

from dataclasses import replace

from pydantic import Field

from ...ask.answer import FAILED, MAX_QUESTION_CHARS, NOT_SEARCHED, OVER_BUDGET, REFUSED
from ..session import Session, keep_paths_here
from .base import Args, Reply, Tool

NO_ANSWER = (FAILED, OVER_BUDGET, REFUSED, NOT_SEARCHED)


class AnswerArgs(Args):
    question: str = Field(max_length=MAX_QUESTION_CHARS, description=(
        "The person's question, in their words (e.g. 'how do we roll back a deploy?'). Ask one question a call; "
        f"at most {MAX_QUESTION_CHARS:,} characters."))
    container: str | None = Field(default=None, description=(
        "Answer only from this space (its key, e.g. 'ENG'); by default every space the person may read."))
    fresh: bool = Field(default=False, description=(
        "Write a new answer even when one is cached for this question at the knowledge base's current state "
        "(it spends tokens again); false by default."))


def run(session: Session, args: AnswerArgs) -> Reply:
    session.index_catch_up()
    # the session's Asker: its searcher the session's (the embedding model loaded once), its chat client kept
    result = session.asker.answer(args.question, session.handle, [args.container] if args.container else None,
                                  use_cache=not args.fresh)
    # the reason's words for a person at the server (a missing [providers.llm] names company.toml): its path kept there
    result = replace(result, reason=keep_paths_here(result.reason, session.node.home))
    text = result.to_text()
    if result.status in NO_ANSWER:            # the reason is already its verdict line; say plainly there is none
        text = f"No answer was written — {text}"
    return Reply(text, result.to_json())


TOOL = Tool(
    name="answer_knowledge",
    title="Answer a question from the knowledge base",
    description=(
        "Answer the person's question with a short Markdown answer written only from the team's own pages, every "
        "claim cited as [n], where [n] is the n-th of the answer's sources. Returns the answer, whether its "
        "citations check out (every [n] names a source given — an answer that cites a missing source or nothing "
        "is marked unchecked), and the numbered sources with their addresses and page ids; a question nothing "
        "matches is answered without a model and costs nothing, and a repeat is served from the cache (cached: "
        "true). Without a configured model it returns the passages an answer would be written from. Use it when "
        "the person asks what the team has written down and wants the answer, not a list of pages; read a source "
        "in full with get_page and its id before you rely on a claim. It spends the company's tokens on the "
        "person's behalf."),
    # not read-only: it spends the company's tokens (a client must not run it unasked as it may a read)
    hint=("when the person wants an answer rather than a list of pages: one written from the pages by a chat model, "
          "every claim cited [n] to its numbered sources (it spends the company's tokens)"),
    args=AnswerArgs, run=run, audience="person")
