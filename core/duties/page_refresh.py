"""The page refresh duty (issue 37, spec 003 "Generated pages"): keeps each generated page answering its question
from the entries in its scope (core/bank/generated.py does one build).

At each pass (a look at the clock, every `interval_s`), for each generated page whose last build is at least
KNOWLEDGE_PAGE_REFRESH_MIN_INTERVAL old:
- a question not built yet (a new page, a changed question) is built now, even with the hourly look off;
- on KNOWLEDGE_PAGE_REFRESH_CRON (default hourly; `off` disables it), a page whose scope's entries changed since
  its last build is rebuilt; one whose entries did not is left alone (no model is asked).
A build that could not reach the model is tried once more at the next pass, then left to the hourly look.

The cursor (JSON) holds the calendar instant of the last hourly look and, per page, the question and the failed
tries of its build. Whether the cron is due is asked of `core.clock.calendar_now_ms`, which CREWLET_NOW sets. A
fleet duty: its builds are records every node applies.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..bank.generated import BUILT, FAILED, NO_EVIDENCE, NO_MODEL, evidence_digest, refresh, scope_entries
from ..chat.openai_http import ChatProvider
from ..clock import calendar_now_ms, from_ms
from . import PAGE_REFRESH
from .runner import Duty, DutyPass, PassContext

if TYPE_CHECKING:
    from ..chat import LlmSettings
    from ..node import Node

TRIES = 2       # a first build and one more; then the hourly look


def _when(ms: int) -> str:
    return from_ms(ms).isoformat(timespec="minutes").replace("+00:00", "Z")


def read_cursor(text: str | None, now: int) -> tuple[int | None, dict[str, dict[str, int]]]:
    """(the last hourly look, the failed tries per page) from a cursor; a look ahead of the calendar (a drill's
    CREWLET_NOW, since unset) counts as none, as the decay duty's does."""
    try:
        raw = json.loads(text) if text else {}
    except ValueError:
        raw = {}
    raw = raw if isinstance(raw, dict) else {}
    look = raw.get("look") if isinstance(raw.get("look"), int) else None
    if look is not None and look > now:
        look = None
    tries = raw.get("tries")
    if not isinstance(tries, dict):
        return look, {}
    return look, {k: v for k, v in tries.items() if isinstance(v, dict)}


class PageRefreshDuty(Duty):
    name = PAGE_REFRESH
    scope = "fleet"

    def __init__(self, node: Node, *, interval_s: float = 60.0, actor: str = "crewlet") -> None:
        self.node = node
        self.interval_s = interval_s
        self.actor = actor
        self._llm: LlmSettings | None = None
        self._chat: ChatProvider | None = None

    def _chat_for(self, llm: LlmSettings | None) -> ChatProvider | None:
        if llm != self._llm or (llm is not None and self._chat is None):
            if self._chat is not None:
                self._chat.close()
            self._chat, self._llm = (ChatProvider(llm) if llm is not None else None), llm
        return self._chat

    def run_pass(self, ctx: PassContext) -> DutyPass:
        self.node.refresh_config()
        settings = self.node.company.bank
        chat = self._chat_for(self.node.company.llm)
        now = calendar_now_ms()
        look, tries = read_cursor(ctx.cursor, now)
        cron = settings.page_refresh_cron
        look_due = not cron.off and cron.due(look)
        interval_ms = settings.page_refresh_min_interval.seconds * 1000
        with self.node.lock:
            pages = self.node.conn.execute(
                "SELECT g.* FROM generated_pages g JOIN pages p ON p.id = g.page_id "
                "WHERE g.state = 'generated' AND p.trashed_at IS NULL ORDER BY g.page_id").fetchall()
        counts = {"built": 0, "unchanged": 0, "waiting": 0, "failed": 0, "no_evidence": 0, "no_model": 0}
        errors: list[str] = []
        for i, row in enumerate(pages):
            ctx.progress(i, len(pages), "generated pages")
            page_id = row["page_id"]
            if row["built_at"] is not None and now - row["built_at"] < interval_ms:
                counts["waiting"] += 1
                continue
            pending = row["built_question_no"] < row["question_no"]
            tried = tries.get(page_id, {})
            if tried.get("q") != row["question_no"]:
                tried = {"q": row["question_no"], "n": 0}
            if pending and tried["n"] < TRIES:
                why = "question"
            elif look_due and (pending or self._scope_changed(page_id, row)):
                why = "look"
            else:
                counts["unchanged"] += 1
                continue
            outcome = refresh(self.node, page_id, chat=chat, now=now, actor=self.actor)
            if outcome.status == FAILED:
                counts["failed"] += 1
                tries[page_id] = {"q": row["question_no"], "n": tried["n"] + 1}
                errors.append(f"{page_id} ({why}): {outcome.reason}")
                continue
            if outcome.revision is None and outcome.status in (NO_EVIDENCE, NO_MODEL):
                # nothing could be written for the question (no entry in use in scope, no model): asked again at
                # the next pass, then left to the hourly look — not read every minute
                tries[page_id] = {"q": row["question_no"], "n": tried["n"] + 1}
            else:
                tries.pop(page_id, None)
            key = "built" if outcome.status == BUILT else outcome.status
            counts[key] = counts.get(key, 0) + 1
            if outcome.status == NO_MODEL and outcome.revision is not None:
                counts["built"] += 1
        ctx.progress(len(pages), len(pages), "generated pages")
        if look_due:
            look = now
        cursor = json.dumps({"look": look, "tries": tries}, sort_keys=True)
        said = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in counts.items() if n) or "no generated page"
        return DutyPass(summary=f"as of {_when(now)}: {said}", worked=bool(counts["built"]), cursor=cursor,
                        counts=counts, status={"cron": str(cron), "last_look": _when(look) if look else None,
                                               "counts": counts, "errors": errors[:5],
                                               "model": self._llm.model if self._llm is not None else None})

    def _scope_changed(self, page_id: str, row: Any) -> bool:
        with self.node.lock:
            scope = scope_entries(self.node.conn, page_id)
        return evidence_digest({k: v for k, v in scope.items() if v.in_use}) != row["inputs_digest"]

    def close(self) -> None:
        if self._chat is not None:
            self._chat.close()
            self._chat = None
