"""comment_on_page: a remark on a page, under the actor's name."""
from __future__ import annotations

from pydantic import Field

from ..session import Session
from .base import REF_HELP, Args, Reply, Tool


class CommentArgs(Args):
    ref: str = Field(description=REF_HELP)
    text: str = Field(min_length=1, description="The comment, in plain words or Markdown.")


def run(session: Session, args: CommentArgs) -> Reply:
    comment = session.kb.add_comment(args.ref, args.text, actor=session.handle)
    session.wrote()
    page = session.kb.resolve(comment.page_id, actor=session.handle)
    return Reply(f"Commented on {page.container}/{page.title} (comment {comment.id}).",
                 {"comment_id": comment.id, "page_id": comment.page_id, "author": comment.author,
                  "text": comment.body, "at": comment.created_at})


TOOL = Tool(
    name="comment_on_page",
    title="Comment on a page",
    description=(
        "Add a comment to a page, shown under your name without changing the page's body. Returns the comment's "
        "id. Use it for a question, a correction you are not sure enough to make, or a note for the page's "
        "readers; to change what the page says, use save_page instead."),
    hint="remark on a page under your name without changing what it says",
    args=CommentArgs, run=run, on_remote=False)
