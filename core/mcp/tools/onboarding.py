"""The calling agent's onboarding: onboarding_status (what to read, in order) and mark_onboarded."""
from __future__ import annotations

from ...agents.onboarding import OnboardingStatus
from ..session import Session
from .base import Args, Reply, Tool
from .diary import sentence


class NoArgs(Args):
    pass


def _reply(status: OnboardingStatus) -> Reply:
    lines = [sentence(status.message, status.agent)]
    if status.state == "to_read":
        for i, page in enumerate(status.chain.pages, 1):
            lines.append(f"{i}. {page.space}/{page.title} — get_page with ref {page.id}")
    return Reply("\n".join(lines), status.to_json())


def status(session: Session, args: NoArgs) -> Reply:
    return _reply(session.onboarding.status(session.handle))


def mark(session: Session, args: NoArgs) -> Reply:
    return _reply(session.onboarding.mark(session.handle))


ONBOARDING_STATUS = Tool(
    name="onboarding_status",
    title="Your onboarding: what to read",
    description=(
        "Say whether you have read your Onboarding pages — the company's (the root space) and your own team's — "
        "under your current place in the company. Returns the state ('onboarded', 'to_read', "
        "'onboarding_elsewhere' or 'nothing_to_read') and, when there is something to read, the pages in the "
        "order to read them, root first, with their ids. Use it at the start of every session: when it says "
        "to_read, read each page with get_page, in order, then call mark_onboarded; when another session is "
        "onboarding you, carry on with your task. It asks again by itself when your space or the pages change."),
    hint="call it first in every session: read the pages it names, in order, then mark_onboarded",
    args=NoArgs, run=status, audience="agent")

MARK_ONBOARDED = Tool(
    name="mark_onboarded",
    title="Mark yourself onboarded",
    description=(
        "Record that you have read the Onboarding pages onboarding_status named, so the next session does not ask "
        "you to read them again (until your space or those pages change). Returns your onboarding state after the "
        "mark. Use it once, right after reading every page onboarding_status listed; it is refused if the pages "
        "changed since it listed them, or while another session is onboarding you."),
    hint="record that you read the pages onboarding_status named",
    args=NoArgs, run=mark, audience="agent")
