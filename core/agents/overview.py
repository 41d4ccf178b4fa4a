"""Every configured agent with its space, onboarding state and diary size: `crewlet agents`, the app's
Diaries screen. Reads rows only (nothing is embedded or loaded), without taking any onboarding pass."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .diary import Diary
from .onboarding import Onboarding, OnboardingStatus, PageOf

if TYPE_CHECKING:
    from ..node import Node


@dataclass
class AgentLine:
    handle: str
    space: str | None
    onboarding: OnboardingStatus
    notes: int
    embedded: int
    last_note_at: int | None
    has_provider: bool = True          # without one, no note is embedded and none needs to be

    def to_json(self) -> dict[str, Any]:
        ob = self.onboarding
        return {"agent": self.handle, "space": self.space, "onboarding": ob.state, "onboarded": ob.onboarded,
                "stale_marker": ob.stale, "marked_at": ob.marker.marked_at if ob.marker else None,
                "onboarding_pages": [p.to_json() for p in ob.chain.pages], "chain": ob.chain.spaces,
                "onboarding_message": ob.message, "diary_notes": self.notes, "diary_embedded": self.embedded,
                "last_note_at": self.last_note_at, "embeddings_provider": self.has_provider}


def agents(node: Node, diary: Diary | None = None, page_of: PageOf | None = None) -> list[AgentLine]:
    """`page_of`: where the Onboarding pages are found when the company's knowledge lives on a remote site
    (core.knowledge.onboarding_pages); None: this node's copy."""
    diary = diary or Diary(node)
    onboarding = Onboarding(node, label="overview", page_of=page_of)
    space = diary.current_space()
    out = []
    for handle, actor in sorted(node.company.actors.items()):
        if not actor.is_agent:
            continue
        notes, embedded = diary.counts(handle, space)
        with node.lock:
            last = node.conn.execute("SELECT max(created_at) FROM agent_diary WHERE agent = ?", (handle,)).fetchone()[0]
        out.append(AgentLine(handle, actor.space, onboarding.peek(handle), notes, embedded, last, space is not None))
    return out
