"""The diary-fill duty: notes written without a vector, or under another model, embedded in the current space.

Spec 000: "the node holding the seat fills any note left without a vector of the current model". A diary
is this node's own, so this is a node duty (its lease lives with the home): the node that holds the notes
embeds them, on the one duty runner, after the knowledge base's own duties.

A pass takes the oldest notes not in the current space (none held by this provider configuration), at
most 512, in requests packed by the provider's limits, and stores each vector in its row. A note the
provider refuses alone (400/413/422, or a vector that is not finite) is held: marked with the
configuration that refused it and skipped until that configuration changes, so one bad note never loops.
Any other failure ends the pass; nothing is lost, the selection is derived from the rows.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..agents.diary import diary_provider, has_provider, unit_vector
from ..embed.registry import ProviderSlot
from ..store.db import transaction
from .embedding import pack
from . import DIARY_FILL
from .runner import Duty, DutyPass, PassContext

if TYPE_CHECKING:
    from ..node import Node

log = logging.getLogger("crewlet.diary")

MAX_NOTES_PASS = 512
REQUEST_TIMEOUT_S = 60.0


class DiaryFillDuty(Duty):
    name = DIARY_FILL
    scope = "node"

    def __init__(self, node: Node, *, threads: int | None = None, interval_s: float = 60.0,
                 provider_factory: Callable[..., Any] = diary_provider) -> None:
        self.node = node
        self.threads = threads
        self.interval_s = interval_s
        self.provider_factory = provider_factory
        self._slot = ProviderSlot(lambda company: self.provider_factory(company, threads=self.threads))

    def provider(self) -> Any:
        return self._slot.get(self.node.company, self.node.company.embeddings)

    def close(self) -> None:
        self._slot.close()

    def run_pass(self, ctx: PassContext) -> DutyPass:
        from ..embed.provider import InputRefused, ProviderError

        self.node.refresh_config()
        if not has_provider(self.node.company):
            return DutyPass(summary='no embeddings provider (provider = "none"): diaries are recalled by recency alone',
                            status={"provider": None})
        provider = self.provider()
        space, fingerprint = provider.space.key(), provider.fingerprint
        conn = self.node.conn
        with self.node.lock:
            rows = conn.execute(
                "SELECT id, text FROM agent_diary WHERE (space IS NULL OR space != ?) "
                "AND (held IS NULL OR held != ?) ORDER BY id LIMIT ?", (space, fingerprint, MAX_NOTES_PASS)).fetchall()
        notes = [(int(r["id"]), r["text"]) for r in rows]
        batches = pack(notes, provider, lambda note: len(note[1].encode("utf-8")))
        filled = held = requests = 0
        failure = ""
        while batches and not ctx.out_of_time():
            batch = batches.pop(0)
            requests += 1
            try:
                vectors = provider.embed([text for _, text in batch], timeout=REQUEST_TIMEOUT_S)
            except InputRefused as exc:
                if len(batch) > 1:       # find the note it refuses: each half on its own
                    half = len(batch) // 2
                    batches[:0] = [batch[:half], batch[half:]]
                    continue
                held += self._hold(batch[0][0], fingerprint, str(exc))
                continue
            except ProviderError as exc:
                failure = f"the provider failed: {exc}"
                log.warning("diary-fill: %s (the next pass asks again)", failure)
                break
            updates, refused = [], []
            for (note_id, _), vector in zip(batch, vectors):
                unit = unit_vector(vector)
                if unit is None:
                    refused.append(note_id)
                else:
                    updates.append((space, unit.tobytes(), note_id))
            with self.node.lock, transaction(conn):
                # a note forgotten meanwhile is simply not there to update
                conn.executemany("UPDATE agent_diary SET space = ?, vector = ?, held = NULL WHERE id = ?", updates)
            for note_id in refused:
                held += self._hold(note_id, fingerprint, "a vector that is not finite or all zero")
            filled += len(updates)
            ctx.progress(filled, len(notes), "embedding diary notes")
            ctx.renew()
        with self.node.lock:
            behind = conn.execute("SELECT count(*) FROM agent_diary WHERE (space IS NULL OR space != ?) "
                                  "AND (held IS NULL OR held != ?)", (space, fingerprint)).fetchone()[0]
            total = conn.execute("SELECT count(*) FROM agent_diary").fetchone()[0]
        summary = (f"{filled} note(s) embedded in {requests} request(s); {total - behind:,} of {total:,} notes have a vector "
                   "of the configured model")
        if held:
            summary += f", {held} held back (the provider refused them)"
        if failure:
            summary += f" — {failure}"
        more = bool(filled or held) and behind > 0 and not failure
        return DutyPass(summary=summary, more=more, worked=bool(filled or held), cursor=str(total - behind),
                        counts={"filled": filled, "held": held, "requests": requests},
                        status={"provider": provider.space.provider, "model": provider.space.model, "space": space,
                                "notes": total, "behind": behind, "failure": failure})

    def _hold(self, note_id: int, fingerprint: str, why: str) -> int:
        log.warning("diary-fill: note %s was refused by the provider (%s); held until its configuration changes",
                    note_id, why)
        with self.node.lock:
            self.node.conn.execute("UPDATE agent_diary SET held = ? WHERE id = ?", (fingerprint, note_id))
        return 1
