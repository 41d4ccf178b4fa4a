"""The embedding duty: every live page embedded once, in the configured space, published as a record.

One node of the fleet runs it (a fleet lease) and publishes each vector on the vector log; every node
applies it, so the provider is paid once. Spec 000, "Where the vectors come from", all of it:

- A tick embeds at most 1,024 sources in at most 32 requests of at most 128 sources each, packed by the
  provider's limits counted in bytes; `crewlet worker --once` runs tick after tick until nothing is left.
- What is embedded is a source's opening (core/embed/text.py). A page is selected again exactly when
  what its vector was computed from moved: its revision (a save or a rename) or its container. Where
  the stored vector was computed from exactly the text it would send now, it is restamped under the new
  revision and container with no provider call. A move, a label or a comment selects nothing.
- A refused request (400/413/422) is split in halves, sent ahead of everything else, until the input it
  refuses is alone; every half accepted on the way is embedded. The input refused alone is named
  (search_embed_input_refused) and held back an hour; then it is offered again alone, at most two a
  tick, the longest refused first. A vector that is not finite or all zero is refused like an input
  (search_embed_vector_refused). Halves a tick did not reach are kept in the duty's cursor and the next
  tick resumes the isolation there. The refusals are forgotten when the provider's configuration changes.
- Any other failure (rate limit, timeout, server down, bad credential, a response that does not map
  onto its batch) ends the tick's requests; nothing is lost, the selection is derived from the rows.
- A pass hands back between requests, with work left (`more`), when its runner's deadline passes, after
  `pass_budget_s` or as soon as `yield_to` is set. The app sets both: its one worker thread runs every
  duty in turn, and a first fill's pass of 1,024 pages (minutes on one thread) would otherwise keep a
  page just saved out of the keyword index, and the status line without news of it, until it ended.
  For the same reason, under a `yield_to`, a model that loads (the local one: seconds on a busy machine)
  loads on a thread of its own, and the pass waiting for it hands back as soon as `yield_to` is set.
- When the provider has accepted no request since this duty began with it as configured, and a tick
  sees it refuse two different inputs sent alone for the first time with nothing else failing, the duty
  says so once (search_embed_every_request_refused): that is the configuration, not the documents.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ..diagnostics import Diagnostics
from ..clock import now_ms
from ..vectors import records as vectors
from ..embed.provider import InputRefused, Provider, ProviderError, ResponseRefused, default_threads
from ..embed.registry import ProviderSlot, make_provider
from ..embed.text import BODY_READ_CHARS, bucket, embed_text
from ..search import entry_docs
from . import EMBEDDING
from .runner import Duty, DutyPass, PassContext
# what the duty reports (its coverage, the held pages, `index status`'s section) is read in .status, without numpy
from .status import coverage

if TYPE_CHECKING:
    from ..node import Node

log = logging.getLogger("crewlet.embed")

MAX_SOURCES_TICK = 1024
MAX_REQUESTS_TICK = 32
MAX_INPUTS_REQUEST = 128
REQUEST_TIMEOUT_S = 60.0
SINGLE_TIMEOUT_S = 15.0
HOLD_MS = 3600 * 1000
RETRIES_PER_TICK = 2


@dataclass
class Item:
    """One source as the provider will receive it."""

    source_id: str
    container: str
    revision: int
    text: str
    digest: str

    @property
    def nbytes(self) -> int:
        return len(self.text.encode("utf-8"))

    def to_json(self) -> list[Any]:
        return [self.source_id, self.container, self.revision, self.text, self.digest]

    @classmethod
    def from_json(cls, data: list[Any]) -> Item:
        return cls(str(data[0]), str(data[1]), int(data[2]), str(data[3]), str(data[4]))


@dataclass
class Request:
    """One request's inputs; `isolating` marks a half of a refused request (kept across ticks)."""

    items: list[Item]
    isolating: bool = False


T = TypeVar("T")


def pack(items: list[T], provider: Provider, nbytes: Callable[[T], int] = lambda item: item.nbytes  # type: ignore[attr-defined]
         ) -> list[list[T]]:
    """Requests the model accepts for their size: at most 128 inputs (or the provider's fewer) and the
    provider's byte total (each item's `nbytes`), greedily in order."""
    limits = provider.limits
    per_request = max(1, min(MAX_INPUTS_REQUEST, limits.max_batch_inputs))
    batches: list[list[T]] = []
    batch: list[T] = []
    size = 0
    for item in items:
        n = nbytes(item)
        if batch and (len(batch) >= per_request or size + n > limits.max_batch_bytes):
            batches.append(batch)
            batch, size = [], 0
        batch.append(item)
        size += n
    if batch:
        batches.append(batch)
    return batches


class EmbeddingDuty(Duty):
    name = EMBEDDING
    scope = "fleet"

    def __init__(self, node: Node, *, threads: int | None = None, interval_s: float = 60.0,
                 provider_factory: Callable[..., Provider | None] = make_provider,
                 pass_budget_s: float | None = None, yield_to: threading.Event | None = None) -> None:
        self.node = node
        self.threads = threads or default_threads()
        self.interval_s = interval_s
        self.provider_factory = provider_factory
        self.pass_budget_s = pass_budget_s     # hand back after this long (None: at the tick's caps)
        self.yield_to = yield_to               # hand back as soon as this is set (another duty is wanted)
        self.diagnostics = Diagnostics(node.home.diagnostics_file)
        self._slot = ProviderSlot(lambda company: self.provider_factory(company, threads=self.threads))
        self._accepted_since: str | None = None    # the fingerprint a request was last accepted under
        self._said_every_refused: str | None = None
        self._run_done = 0
        # (provider, the thread loading its model, set when the load ended)
        self._loading: tuple[Any, threading.Thread, threading.Event] | None = None

    # -- the provider as configured now ----------------------------------------------------------------
    def provider(self) -> Provider | None:
        company = self.node.company
        return self._slot.get(company, (company.knowledge.vectors, company.embeddings))

    def close(self) -> None:
        # a model still loading is waited for: onnxruntime aborts the process when it exits under a load
        if self._loading is not None:
            self._loading[1].join()
        self._slot.close()

    # -- one tick --------------------------------------------------------------------------------------
    def run_pass(self, ctx: PassContext) -> DutyPass:
        self.node.refresh_config()
        provider = self.provider()
        if provider is None:
            return DutyPass(summary="vectors are off (knowledge.vectors = false): nothing is embedded",
                            status={"vectors": False})
        if not self._model_loaded(provider, ctx):
            return DutyPass(summary="loading the model (handed back for the other duties)", more=True)
        space, fingerprint = provider.space.key(), provider.fingerprint
        bound = min(provider.limits.max_input_bytes, provider.limits.max_batch_bytes)
        conn = self.node.conn
        with self.node.lock:
            # the memory of refusals follows the provider's configuration
            conn.execute("DELETE FROM embed_holds WHERE fingerprint != ?", (fingerprint,))
            # a page's vector whose page is gone; an entry's whose entry is gone or out of the bank
            orphans = [r[0] for r in conn.execute(
                "SELECT DISTINCT source_id FROM vectors WHERE kind != ? AND source_id NOT IN (SELECT id FROM pages)",
                (entry_docs.KIND,))]
            orphans += [r[0] for r in conn.execute(
                "SELECT DISTINCT source_id FROM vectors WHERE kind = ? AND substr(source_id, ?) NOT IN "
                f"(SELECT id FROM entries WHERE {entry_docs.IN_BANK_SQL})", (entry_docs.KIND, len(entry_docs.PREFIX) + 1))]
        if orphans:
            self.node.submit_vectors([vectors.drop_record(s) for s in orphans])

        pending = self._pending(ctx.cursor, fingerprint)
        now = now_ms()
        with self.node.lock:
            retries = self._retries(space, fingerprint, now, bound)
            busy = {i.source_id for batch in pending for i in batch} | {i.source_id for i in retries}
            # entries first: few and short, and what a write's neighbours are found among
            fresh, restamps = self._select_entries(space, fingerprint, bound, MAX_SOURCES_TICK - len(busy), busy)
            more_fresh, more_restamps = self._select(space, fingerprint, bound,
                                                     MAX_SOURCES_TICK - len(busy) - len(fresh) - len(restamps), busy)
            fresh, restamps = fresh + more_fresh, restamps + more_restamps
            entries_behind = self._entries_behind(space, fingerprint)
            behind = self._behind(space, fingerprint) + entries_behind
        if restamps:
            self.node.submit_vectors(restamps)
        total = self._run_done + behind
        ctx.progress(self._run_done, total, "embedding pages")

        # refused halves first, then the hour-old refusals alone, then the fresh requests
        queue = ([Request(b, isolating=True) for b in pending] + [Request([i]) for i in retries]
                 + [Request(b) for b in pack(fresh, provider)])
        requests = embedded = refused = 0
        first_refusals: set[str] = set()
        failure = ""
        started = time.monotonic()
        handed_back = False
        while queue and requests < MAX_REQUESTS_TICK and not ctx.stop.is_set():
            if self._hand_back(ctx, started):
                handed_back = True
                break
            request = queue.pop(0)
            batch = request.items
            requests += 1
            timeout = SINGLE_TIMEOUT_S if len(batch) == 1 else REQUEST_TIMEOUT_S
            try:
                vecs = provider.embed([i.text for i in batch], timeout=timeout)
            except InputRefused as exc:
                if len(batch) > 1:
                    half = len(batch) // 2
                    queue[:0] = [Request(batch[:half], isolating=True), Request(batch[half:], isolating=True)]
                    continue
                refused += 1
                first = self._hold(batch[0], fingerprint, space, provider, exc)
                if first:
                    first_refusals.add(batch[0].source_id)
                continue
            except ResponseRefused as exc:
                failure = self._event("search_embed_response_refused", f"the provider's answer does not map onto "
                                      f"its batch of {len(batch)}: {exc} — nothing from it was filed", provider)
                break
            except ProviderError as exc:
                failure = f"the provider failed: {exc}"
                log.warning("embedding: %s (the next tick asks again)", failure)
                break
            self._accepted_since = fingerprint
            records = []
            for item, vec in zip(batch, vecs):
                vec = np.asarray(vec, dtype=np.float32)
                if not np.all(np.isfinite(vec)) or not np.any(vec):
                    what = "a component that is not finite" if not np.all(np.isfinite(vec)) else "every component zero"
                    self._hold_vector(item, fingerprint, space, provider, what)
                    refused += 1
                    continue
                kind = entry_docs.KIND if entry_docs.entry_of(item.source_id) is not None else "page"
                records.append(vectors.put_record(item.source_id, space, item.container, item.revision, item.digest,
                                                  item.nbytes, bucket(item.source_id), vec, kind=kind))
            if records:
                self.node.submit_vectors(records)
                with self.node.lock:
                    conn.execute(f"DELETE FROM embed_holds WHERE source_id IN ({','.join('?' * len(records))})",
                                 [r.payload["source_id"] for r in records])
            embedded += len(records)
            self._run_done += len(records)
            ctx.progress(self._run_done, max(total, self._run_done), "embedding pages")
            ctx.renew()

        if (len(first_refusals) >= 2 and not failure and self._accepted_since != fingerprint
                and self._said_every_refused != fingerprint):
            self._said_every_refused = fingerprint
            self._event("search_embed_every_request_refused",
                        f"every request was refused: {len(first_refusals)} different inputs sent alone were refused "
                        f"and none was accepted since embedding began with {provider.space.model} as configured — "
                        "check providers.embeddings (a parameter the endpoint does not take, a model it does not "
                        "serve at that width)", provider)

        isolating = [r.items for r in queue if r.isolating]  # the next tick resumes these; the rest is re-derived
        with self.node.lock:
            cov = coverage(conn, space, fingerprint)
            entries_left = self._entries_behind(space, fingerprint)
        progressed = bool(embedded or restamps or refused)
        # handed back on purpose: run again at once even if this pass had no time to embed anything
        more = (not failure and not ctx.stop.is_set() and (progressed or handed_back)
                and (bool(queue) or cov.covered + cov.held < cov.total or entries_left > 0))
        words = [f"{embedded} embedded"]
        if restamps:
            words.append(f"{len(restamps)} restamped")
        if refused:
            words.append(f"{refused} refused")
        summary = f"{', '.join(words)} in {requests} request(s); {cov.covered:,} of {cov.total:,} pages covered"
        if failure:
            summary += f" — {failure}"
        return DutyPass(summary=summary, more=more, worked=bool(embedded or restamps or refused or orphans),
                        cursor=json.dumps({"fingerprint": fingerprint,
                                           "isolating": [[i.to_json() for i in b] for b in isolating]}),
                        counts={"embedded": embedded, "restamped": len(restamps), "refused": refused,
                                "requests": requests},
                        status=cov.to_json() | {"vectors": True, "model": provider.space.model,
                                                "provider": provider.space.provider, "failure": failure})

    def _model_loaded(self, provider: Any, ctx: PassContext) -> bool:
        """Under a `yield_to` (one thread runs every duty): the model of `provider` loads on a thread of its own,
        begun here, and the pass waits for it — but hands back (False) the moment `yield_to` is set, so a page
        just written reaches the keyword index without waiting for the load. Without a `yield_to`, or for a
        provider with nothing to load, True at once (the first request loads it)."""
        load = getattr(provider, "load", None)
        if self.yield_to is None or not callable(load):
            return True
        if self._loading is None or self._loading[0] is not provider:
            done = threading.Event()

            def run() -> None:
                try:
                    load()
                except Exception as exc:  # noqa: BLE001 - the pass's first request fails the same way, and says so
                    log.info("the embedding model did not load: %s", exc)
                finally:
                    done.set()

            thread = threading.Thread(target=run, name="crewlet-model-load", daemon=True)
            self._loading = (provider, thread, done)
            thread.start()
        done = self._loading[2]
        # two events to wait on, one a caller's: looked at every 50 ms while the load runs
        while not done.wait(0.05):
            if self.yield_to.is_set() or ctx.stop.is_set():
                return False
        return True

    def _hand_back(self, ctx: PassContext, started: float) -> bool:
        """Before each request: is this pass to end here? The budget counts from the first request, so a
        budget alone never ends a pass before it has embedded something."""
        if self.yield_to is not None and self.yield_to.is_set():
            return True
        if ctx.deadline is not None and time.monotonic() >= ctx.deadline:
            return True
        return self.pass_budget_s is not None and time.monotonic() - started >= self.pass_budget_s

    # -- selection ---------------------------------------------------------------------------------------
    def _select(self, space: str, fingerprint: str, bound: int, limit: int,
                busy: set[str]) -> tuple[list[Item], list[Any]]:
        """Pages whose vector in `space` is missing or was computed from another revision or container,
        oldest first, not held back: the items to embed, and restamps for those whose text is unchanged."""
        if limit <= 0:
            return [], []
        rows = self.node.conn.execute(
            "SELECT p.id, p.container, p.title, substr(p.body, 1, ?) AS opening, p.revision, v.digest "
            "FROM pages p LEFT JOIN vectors v ON v.source_id = p.id AND v.space = ? "
            "WHERE p.trashed_at IS NULL AND (v.id IS NULL OR v.revision != p.revision OR v.container != p.container) "
            "AND NOT EXISTS (SELECT 1 FROM embed_holds h WHERE h.source_id = p.id AND h.revision = p.revision "
            "AND h.fingerprint = ?) ORDER BY p.updated_at, p.id LIMIT ?",
            (BODY_READ_CHARS, space, fingerprint, limit + len(busy))).fetchall()
        items: list[Item] = []
        restamps: list[Any] = []   # the records restamp_record builds
        for r in rows:
            if r["id"] in busy or len(items) + len(restamps) >= limit:
                continue
            text, digest = embed_text(r["title"], r["opening"], bound)
            if r["digest"] == digest:
                restamps.append(vectors.restamp_record(r["id"], space, r["container"], r["revision"], digest))
            else:
                items.append(Item(r["id"], r["container"], r["revision"], text, digest))
        return items, restamps

    _ENTRIES_DUE = (
        "FROM entries e JOIN pages p ON p.id = e.page_id "
        "LEFT JOIN vectors v ON v.source_id = ? || e.id AND v.space = ? "
        f"WHERE e.{entry_docs.IN_BANK_SQL} AND (v.id IS NULL OR v.revision != e.version OR v.container != p.container) "
        "AND NOT EXISTS (SELECT 1 FROM embed_holds h WHERE h.source_id = ? || e.id AND h.revision = e.version "
        "AND h.fingerprint = ?)")

    def _select_entries(self, space: str, fingerprint: str, bound: int, limit: int,
                        busy: set[str]) -> tuple[list[Item], list[Any]]:
        """Entries in the bank (core/search/entry_docs.py) whose vector in `space` is missing or was filed for
        another version of the row or another container: their body embedded alone (no title), or restamped
        when the body is what the stored vector was computed from (a status change, a move of its page)."""
        if limit <= 0:
            return [], []
        prefix = entry_docs.PREFIX
        rows = self.node.conn.execute(
            f"SELECT e.id, p.container, e.body, e.version, v.digest {self._ENTRIES_DUE} ORDER BY e.version, e.id "
            "LIMIT ?", (prefix, space, prefix, fingerprint, limit + len(busy))).fetchall()
        items: list[Item] = []
        restamps: list[Any] = []
        for r in rows:
            source = entry_docs.doc_id(r["id"])
            if source in busy or len(items) + len(restamps) >= limit:
                continue
            text, digest = embed_text("", r["body"], bound)
            if r["digest"] == digest:
                restamps.append(vectors.restamp_record(source, space, r["container"], r["version"], digest))
            else:
                items.append(Item(source, r["container"], r["version"], text, digest))
        return items, restamps

    def _entries_behind(self, space: str, fingerprint: str) -> int:
        prefix = entry_docs.PREFIX
        return int(self.node.conn.execute(f"SELECT count(*) {self._ENTRIES_DUE}",
                                          (prefix, space, prefix, fingerprint)).fetchone()[0])

    def _behind(self, space: str, fingerprint: str) -> int:
        cov = coverage(self.node.conn, space, fingerprint)
        return max(0, cov.total - cov.covered - cov.held)

    def _retries(self, space: str, fingerprint: str, now: int, bound: int) -> list[Item]:
        """Held sources whose hour is up, the longest refused first, at most two a tick (each alone)."""
        rows = self.node.conn.execute(
            "SELECT p.id, p.container, p.title, substr(p.body, 1, ?) AS opening, p.revision FROM embed_holds h "
            "JOIN pages p ON p.id = h.source_id AND p.revision = h.revision AND p.trashed_at IS NULL "
            "WHERE h.fingerprint = ? AND h.held_until <= ? ORDER BY h.refused_at, h.source_id LIMIT ?",
            (BODY_READ_CHARS, fingerprint, now, RETRIES_PER_TICK)).fetchall()
        out = []
        for r in rows:
            text, digest = embed_text(r["title"], r["opening"], bound)
            out.append(Item(r["id"], r["container"], r["revision"], text, digest))
        # held entries the same way, in what is left of the tick's retries (an entry's body alone, no title)
        for r in self.node.conn.execute(
                "SELECT e.id, p.container, e.body, e.version FROM embed_holds h "
                "JOIN entries e ON h.source_id = ? || e.id AND e.version = h.revision "
                f"JOIN pages p ON p.id = e.page_id WHERE e.{entry_docs.IN_BANK_SQL} AND h.fingerprint = ? "
                "AND h.held_until <= ? ORDER BY h.refused_at, h.source_id LIMIT ?",
                (entry_docs.PREFIX, fingerprint, now, RETRIES_PER_TICK - len(out))).fetchall():
            text, digest = embed_text("", r["body"], bound)
            out.append(Item(entry_docs.doc_id(r["id"]), r["container"], r["version"], text, digest))
        return out

    def _pending(self, cursor: str | None, fingerprint: str) -> list[list[Item]]:
        """An isolation a previous tick did not finish (its halves), unless the configuration changed."""
        if not cursor:
            return []
        try:
            data = json.loads(cursor)
            if data.get("fingerprint") != fingerprint:
                return []
            return [[Item.from_json(i) for i in batch] for batch in data.get("isolating", [])]
        except (ValueError, TypeError, IndexError, AttributeError):
            return []

    # -- refusals ----------------------------------------------------------------------------------------
    def _hold(self, item: Item, fingerprint: str, space: str, provider: Provider, exc: InputRefused) -> bool:
        """Hold a source the provider refused alone; True when this is its first refusal (not a retry)."""
        bound = provider.limits.max_input_bytes
        inside = item.nbytes <= bound
        why = (f"{exc.endpoint_message or exc}" + (f" (code {exc.endpoint_code})" if exc.endpoint_code else ""))
        if inside:
            hint = ("the refusal is inside the per-input bound the limits assume: max_input_tokens is declared "
                    "wider than the endpoint enforces, or the endpoint refuses the text for what it says")
        else:
            hint = "the input is past the per-input bound"
        self._event("search_embed_input_refused",
                    f"page {item.source_id} was refused by {provider.space.model}: {why} — {item.nbytes} bytes sent, "
                    f"per-input bound {bound} bytes; {hint}; held back an hour", provider,
                    source_id=item.source_id, bytes=item.nbytes, bound=bound, status=exc.status, code=exc.endpoint_code)
        return self._store_hold(item, fingerprint, f"refused: {why}")

    def _hold_vector(self, item: Item, fingerprint: str, space: str, provider: Provider, what: str) -> None:
        self._event("search_embed_vector_refused",
                    f"page {item.source_id}: {provider.space.model} answered a vector with {what} ({item.nbytes} bytes "
                    "sent); not published, held back an hour", provider, source_id=item.source_id, bytes=item.nbytes)
        self._store_hold(item, fingerprint, f"vector with {what}")

    def _store_hold(self, item: Item, fingerprint: str, reason: str) -> bool:
        now = now_ms()
        with self.node.lock:
            before = self.node.conn.execute("SELECT 1 FROM embed_holds WHERE source_id = ? AND revision = ?",
                                            (item.source_id, item.revision)).fetchone()
            self.node.conn.execute(
                "INSERT INTO embed_holds (source_id, revision, fingerprint, refused_at, held_until, bytes, reason) "
                "VALUES (?,?,?,?,?,?,?) ON CONFLICT(source_id) DO UPDATE SET revision = excluded.revision, "
                "fingerprint = excluded.fingerprint, refused_at = excluded.refused_at, "
                "held_until = excluded.held_until, bytes = excluded.bytes, reason = excluded.reason",
                (item.source_id, item.revision, fingerprint, now, now + HOLD_MS, item.nbytes, reason))
        return before is None

    def _event(self, event: str, message: str, provider: Provider, **fields: Any) -> str:
        self.diagnostics.record(event, message, model=provider.space.model, space=provider.space.key(), **fields)
        return message
