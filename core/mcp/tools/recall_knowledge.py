"""recall_knowledge: what the bank knows about a question (spec 003, "What agents get"; core/ask/recall.py).

The entries and pages that answer it, grounded and verified entries first, each entry with its trust tier (read at
serve time), its citations' last checks and the page it stands under; with a chat model configured, an answer
citing them [n] as `crewlet ask` writes one. For agents and persons alike: an agent is shown entries in use
only. Each entry given is recorded as served. A failure of the model, or a search that could not run, is an
answer with its reason (as answer_knowledge's); what the call got wrong (an empty question) is a tool error.
"""
from __future__ import annotations

from pydantic import Field

from ...ask.answer import MAX_QUESTION_CHARS
from ...ask.recall import recall
from ...errors import Invalid
from ...pages.run_model import HOLDOUT_WORDS
from ..session import Session, keep_paths_here
from .base import Args, Reply, Tool


class RecallArgs(Args):
    question: str = Field(max_length=MAX_QUESTION_CHARS, description=(
        "What you need to know, in plain words (e.g. 'how long does the session cache hold an entry?'). One "
        f"question a call; at most {MAX_QUESTION_CHARS:,} characters."))


def run(session: Session, args: RecallArgs) -> Reply:
    if not args.question.strip():
        raise Invalid("the question is empty", code="empty_question")
    if session.holdout:      # an agent run in the holdout arm is given no knowledge, and records no use
        return Reply(HOLDOUT_WORDS, {"question": args.question, "run": session.run, "holdout": True, "hits": []})
    session.await_model()
    session.index_catch_up()
    found = recall(session.node, args.question, session.handle, asker=session.asker, run=session.run)
    text = keep_paths_here(found.to_text(), session.node.home) or "nothing in the bank answers it"
    return Reply(text, found.to_json())


TOOL = Tool(
    name="recall_knowledge",
    title="Recall what the knowledge bank holds on a question",
    description=(
        "Ask the knowledge bank a question. Returns the entries (one fact each, under a page) and the pages that "
        "answer it: each entry with its trust tier (HUMAN_VERIFIED, GROUNDED: accepted and every citation checked "
        "against the code and holding; UNGROUNDED: check it against the code before you rely on it), its "
        "citations' last checks with their age, and the page it is under — verified and grounded entries first. "
        "With a chat model configured it also answers in a few sentences, every claim cited [n] to the n-th "
        "source; without one, the entries and pages are the answer. Use it before you work on something the team "
        "may already know a fact about; read a page in full with get_page."),
    hint=("before you rely on what you believe about the code or the team's decisions: the bank's entries and pages "
          "on a question, each entry with its trust tier"),
    # not read-only: with a chat model it spends the company's tokens, and every serve is recorded; the entries
    # live in this node's own bank, which a company whose knowledge is on a remote site has not
    args=RecallArgs, run=run, on_remote=False)
