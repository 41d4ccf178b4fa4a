"""Answering a question from what the company wrote down (the spec's "Answering a question").

    with Node.open(home) as node:
        result = answer(node, "how do we roll back a deploy?", actor="alex")
        print(result.status, result.text, [s.address for s in result.sources])

One ask, in order:
1. who asks: a person holding the knowledge app (an agent is refused: it has search and its own model,
   and a second model's summary in its context is one it could not check);
2. the cache: an answer kept at this node's applied positions, for the same question, the same spaces
   the asker may read and the same model, is given again and spends nothing (`cached: true`);
3. the hybrid search, scoped as the asker may read; a search that could not run, or that matched
   nothing, is the answer — no model is asked and nothing is spent;
4. the sources: the best-matching passages of the pages found, inside max_source_tokens
   (`passages.py`), numbered in the search's order;
5. no [providers.llm]: the answer is those sources and one sentence saying how to configure a model;
6. the spend: the company's windows must have room for the call, else it is refused before it is made;
7. the model, streamed (`on_text` hears each piece), told to say only what the numbered sources say and
   cite each claim [n]; what it spent is recorded, a refusal included;
8. the citation check: every [n] must be a source given, and at least one must be cited, else the reply
   is marked unchecked — never silently.

Every failure (a timeout, an HTTP error, a reply that is not a chat completion, a refusal) is an answer:
a status, one line of reason and the sources, never an exception. What raises is the caller's mistake:
an empty question (`Invalid`), an unknown actor or one not allowed to ask (`Refused`, `ConfigError`).
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import CrewletError, Invalid, Refused
from ..store.driver import sqlite3
from . import citations, passages, prompt, tokens
from .cache import AnswerCache, cache_key
from ..chat.openai_http import ChatFailed, ChatProvider, Usage
from ..chat import DEFAULT_MAX_SOURCES, DEFAULT_SOURCE_TOKENS, LlmSettings
from .spend import Ledger, NoRoom

if TYPE_CHECKING:
    from ..node import Node
    from ..pages.service import KnowledgeBase
    from ..search.seam import Searcher

log = logging.getLogger("crewlet.ask")

MEANING_TIMEOUT_S = 2.0        # ranking one page's passages by meaning (as long as a query's embedding)
MAX_QUESTION_CHARS = 2000

# what an answer is
ANSWERED = "answered"          # the model wrote an answer; `citations.checked` says whether it holds up
NOT_ANSWERED = "not_answered"  # the model said the sources do not answer the question
NO_MODEL = "no_model"          # no [providers.llm]: the sources an answer would be written from
NO_MATCH = "no_match"          # nothing the asker may read matches: no model asked, nothing spent
NOT_SEARCHED = "not_searched"  # the search could not run (its reason)
REFUSED = "refused"            # the model refused (what it spent is recorded)
OVER_BUDGET = "over_budget"    # a spend window had no room: refused before the call
FAILED = "failed"              # timeout | unreachable | http | garbage | key | cancelled (`failure`)
WRITTEN = (ANSWERED, NOT_ANSWERED)


def no_model_sentence(company_file: Any) -> str:
    return (f"No model is configured, so no answer was written — these are the passages an answer would be "
            f"written from; to have answers written, add a [providers.llm] table (base_url, model, api_key_env) "
            f"to {company_file}.")


@dataclass
class Source:
    n: int                        # cited as [n]
    page_id: str
    title: str
    container: str
    address: str                  # CONTAINER/Title: what `crewlet page show` and the app open
    url: str
    ancestors: list[str]
    passages: list[str]           # exactly the texts the model was (or would have been) given
    tokens: int = 0
    by_meaning: bool = False      # its passage was chosen by meaning (no passage held a word of the question)
    entry_id: str | None = None   # an entry under the page (spec 003): its body is the one passage

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Answer:
    question: str
    status: str
    text: str = ""                # the model's Markdown (answered, not_answered, refused)
    reason: str = ""              # one line: why there is no checked answer ("" for a checked one)
    sources: list[Source] = field(default_factory=list)
    citations: citations.CitationCheck | None = None
    cached: bool = False
    usage: Usage | None = None    # what the reply spent when it was written
    spent: int = 0                # tokens this ask spent (0 when cached, or when no model was asked)
    model: str = ""
    failure: str | None = None    # the kind of failure, for status failed
    finish_reason: str | None = None
    search: dict[str, Any] = field(default_factory=dict)   # what the search served (mode, degraded, message)
    position: tuple[int, int] = (0, 0)                     # the pages and vector logs' applied seqs
    source_tokens: int = 0        # the passages' tokens (the shipped tokenizer's count)
    prompt_tokens: int = 0        # the whole prompt as counted here: what the model is (or would be) sent

    @property
    def checked(self) -> bool | None:
        """True: every citation names a source given; False: shown marked unchecked; None: nothing written."""
        if self.status not in WRITTEN or self.citations is None:
            return None
        return self.citations.checked

    @property
    def written(self) -> bool:
        return self.status in WRITTEN

    def verdict(self) -> str:
        """One line: what this answer is worth."""
        if self.status == ANSWERED:
            return "checked: every citation names a source below" if self.checked else self.reason
        if self.status == NOT_ANSWERED:
            return "the sources below do not answer the question"
        return self.reason

    def to_text(self) -> str:
        """The answer as words for a reader that takes plain text (an assistant over MCP): the answer, what
        it is worth, and the numbered sources with their addresses and ids."""
        parts = [self.text.strip()] if self.status in WRITTEN and self.text.strip() else []
        parts.append(("(cached) " if self.cached else "") + self.verdict())
        if self.sources:
            parts.append("Sources:\n" + "\n".join(
                f"[{s.n}] entry under {s.address} (entry {s.entry_id})" if s.entry_id else
                f"[{s.n}] {s.address} (id {s.page_id})" for s in self.sources))
        if self.status == NO_MODEL:
            parts.append("\n\n".join(f"[{s.n}] {s.address}\n" + "\n…\n".join(s.passages) for s in self.sources))
        return "\n\n".join(p for p in parts if p)

    def to_json(self) -> dict[str, Any]:
        return {"question": self.question, "status": self.status, "answer": self.text, "checked": self.checked,
                "reason": self.reason, "cached": self.cached,
                "sources": [s.to_json() for s in self.sources],
                "citations": self.citations.to_json() if self.citations else None,
                "usage": self.usage.to_json() if self.usage else None, "spent": self.spent, "model": self.model,
                "failure": self.failure, "finish_reason": self.finish_reason, "search": self.search,
                "position": {"pages": self.position[0], "vectors": self.position[1]},
                "source_tokens": self.source_tokens, "prompt_tokens": self.prompt_tokens}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Answer:
        usage = data.get("usage")
        return cls(question=data["question"], status=data["status"], text=data.get("answer", ""),
                   reason=data.get("reason", ""), sources=[Source(**s) for s in data.get("sources", [])],
                   citations=citations.CitationCheck.from_json(data["citations"]) if data.get("citations") else None,
                   cached=bool(data.get("cached")),
                   usage=Usage(usage["prompt_tokens"], usage["completion_tokens"], usage["reported"]) if usage else None,
                   spent=int(data.get("spent", 0)), model=data.get("model", ""), failure=data.get("failure"),
                   finish_reason=data.get("finish_reason"), search=data.get("search", {}),
                   position=(data["position"]["pages"], data["position"]["vectors"]),
                   source_tokens=int(data.get("source_tokens", 0)), prompt_tokens=int(data.get("prompt_tokens", 0)))


class Asker:
    """Answers questions over one node. Thread-safe enough for the app: each ask is independent, and the
    searcher serialises its own searches. `searcher`: the one to share (the app's), else the one
    knowledge.backend names is made (core.knowledge) and closed with this.

    On a Confluence or Plane company the search and the pages are the site's, read live as the asker
    (core/remote): the answer is written from them the same way, and never cached — the site changes
    without this node hearing, so there is no position to keep it at."""

    def __init__(self, node: Node, searcher: Searcher | None = None, *, search_limit: int | None = None,
                 source_tokens: int | None = None) -> None:
        self.node = node
        # over max_sources and max_source_tokens (the bench sweeps them)
        self.search_limit, self.source_tokens = search_limit, source_tokens
        self._own_searcher = searcher is None
        if searcher is None:
            from core.knowledge import make_searcher

            searcher = make_searcher(node)
        # past the seam by backend: the native one's policy, a remote one's get_page (is_remote decides)
        self.searcher: Any = searcher
        self.cache = AnswerCache(node)
        self._provider: ChatProvider | None = None
        self._provider_settings: LlmSettings | None = None
        self._lock = threading.Lock()

    # -- parts ----------------------------------------------------------------------------------------------
    def provider(self) -> ChatProvider | None:
        """The chat provider as configured now (company.toml is read again at each ask)."""
        settings = self.node.company.llm
        with self._lock:
            if settings != self._provider_settings:
                if self._provider is not None:
                    self._provider.close()
                self._provider = ChatProvider(settings) if settings is not None else None
                self._provider_settings = settings
            return self._provider

    def ledger(self) -> Ledger:
        return Ledger(self.node.home.log_dir, getattr(self.node, "node_id", "") or "")

    def position(self) -> tuple[int, int]:
        """The applied positions of the pages log and the vector log (the search's own stamp)."""
        from core.search.stamp import read_stamp

        stamp = read_stamp(self.node)
        return stamp.applied, stamp.vectors

    def close(self) -> None:
        with self._lock:
            if self._provider is not None:
                self._provider.close()
                self._provider = None
                self._provider_settings = None
        if self._own_searcher:
            self.searcher.close()

    # -- one ask --------------------------------------------------------------------------------------------
    def answer(self, question: str, actor: str | None = None, containers: list[str] | None = None, *,
               on_text: Callable[[str], None] | None = None, cancel: threading.Event | None = None,
               use_cache: bool = True, agents: bool = False,
               rank: Callable[[list[Any]], list[Any]] | None = None) -> Answer:
        """`agents`: an agent may ask too (recall_knowledge, spec 003's "What agents get": the answer is a tool's
        answer to the agent, its sources beside it), else an agent is refused. `rank`: the search's hits put in
        the order the sources are numbered in (recall ranks grounded and verified entries first)."""
        from core.pages.service import KnowledgeBase
        from core.knowledge import is_remote
        from core.search.seam import UNKNOWN_CONTAINER, Query

        question = (question or "").strip()
        if not question:
            raise Invalid("the question is empty", fix="ask it in words, e.g. `crewlet ask \"how do we roll back a deploy?\"`",
                          code="empty_question")
        if len(question) > MAX_QUESTION_CHARS:
            raise Invalid(f"the question is {len(question):,} characters long — ask it in at most "
                          f"{MAX_QUESTION_CHARS:,}", code="question_too_long")
        self.node.refresh_config()
        company = self.node.company
        kb = KnowledgeBase(self.node)
        who = kb.reader(actor)            # refused: an unknown actor, or one without the knowledge app
        if who.is_agent and not agents:
            raise Refused(f"{who.handle} is an agent: answers are written for a person — an agent searches "
                          "(`crewlet search`) and reads the pages with its own model, since a second model's "
                          "summary in its context is one it could not check", code="not_a_person")
        settings = company.llm
        narrowing = [c for c in (containers or []) if c and c.strip()] or None
        remote = is_remote(self.searcher)
        position = (0, 0) if remote else self.position()
        key = ""
        if not remote and settings is not None:     # only written answers are kept
            self.cache.retire(position)
            # an agent is shown entries in use only, a person every entry in the bank: not one answer for both
            spaces = self._spaces(question, who.handle, narrowing) + (";agent" if who.is_agent else "")
            key = cache_key(question, spaces + (";ranked" if rank is not None else ""), settings.fingerprint())
            if use_cache:
                kept = self.cache.get(key, position)
                if kept is not None:
                    found = Answer.from_json(kept)
                    found.cached, found.spent, found.question = True, 0, question
                    return found

        # a remote backend ranks by its own keyword search: asking it for hybrid only adds a note
        limit = self.search_limit or (settings.max_sources if settings is not None else DEFAULT_MAX_SOURCES)
        result = self.searcher.search(Query(question, actor=who.handle, limit=limit,
                                            mode="keyword" if remote else "hybrid", containers=narrowing))
        outcome = result.outcome
        searched = {"served_mode": outcome.served_mode, "degraded": outcome.degraded, "message": outcome.message}
        base = Answer(question, NO_MATCH, search=searched, position=position,
                      model=settings.model if settings is not None else "")
        if outcome.degraded == UNKNOWN_CONTAINER:
            # what the caller got wrong (a typo of a space) is a refusal, as search and list refuse it: not an answer
            raise self._unknown_space(narrowing or [], outcome.message)
        if outcome.served_mode is None:
            base.status, base.reason = NOT_SEARCHED, f"the knowledge base could not be searched: {outcome.message}"
            return base
        if not result.hits:
            base.reason = ("nothing you may read matches the question, so no model was asked and nothing was spent"
                           + (f" ({outcome.message})" if outcome.message else ""))
            return base

        hits = rank(list(result.hits)) if rank is not None else result.hits
        by_meaning = outcome.served_mode in ("hybrid", "semantic")   # the question's vector is at hand
        budget = self.source_tokens or (settings.max_source_tokens if settings is not None else DEFAULT_SOURCE_TOKENS)
        chosen = self._sources(kb, who.handle, question, hits, budget, by_meaning, remote)
        urls = {h.page_id: h.url for h in result.hits} if remote else {}
        base.sources = [_source(i, c, urls.get(c.page.page_id)) for i, c in enumerate(chosen, 1)]
        base.source_tokens = sum(s.tokens for s in base.sources)
        if not chosen:
            base.reason = "the pages the search found hold no text to answer from, so no model was asked"
            return base
        sent = prompt.messages(question, chosen)
        base.prompt_tokens = tokens.count_messages(sent)
        if settings is None:
            base.status, base.reason = NO_MODEL, no_model_sentence(company.file)
            return base

        written = self._write(base, settings, sent, who.handle, on_text, cancel)
        if key and use_cache and written.status in WRITTEN and _keepable(outcome) and \
                (cancel is None or not cancel.is_set()):
            try:
                self.cache.put(key, position, written.to_json())
            except (sqlite3.Error, OSError) as exc:   # the answer was written and paid for: it stands uncached
                log.warning("could not keep the answer in the cache: %s", exc)
        return written

    def _unknown_space(self, narrowing: list[str], said: str) -> CrewletError:
        """The refusal of the space asked for that names none (core.pages.containers decides which)."""
        from core.errors import UnknownContainer
        from core.pages.containers import unknown_container

        with self.node.lock:
            for name in narrowing:
                why = unknown_container(self.node.conn, self.node.company, name.strip())
                if why is not None:
                    return why
        # a remote site's own verdict, or a key two spaces fold to: its words
        return UnknownContainer(said, container=narrowing[0] if narrowing else "")

    def _spaces(self, question: str, handle: str, narrowing: list[str] | None) -> str:
        """The set of spaces the asker may read, as the cache keys it: "*" for every one."""
        from core.search.access import Access
        from core.search.native import BACKEND
        from core.search.seam import Query

        access = self.searcher.policy.decide(Query(question, actor=handle, containers=narrowing), BACKEND)
        if not isinstance(access, Access):
            return "-"                         # the search will say why it does not run
        return "*" if access.allowed is None else ",".join(sorted(access.allowed))

    def _sources(self, kb: KnowledgeBase, handle: str, question: str, hits: list[Any], budget: int,
                 by_meaning: bool, remote: bool) -> list[passages.Chosen]:
        pages: list[passages.PageText] = []
        for hit in hits:
            if getattr(hit, "entry_id", None):     # an entry: its whole body (one fact) is its one passage
                with self.node.lock:
                    row = self.node.conn.execute("SELECT body FROM entries WHERE id = ?", (hit.entry_id,)).fetchone()
                if row is None:                    # gone since the search read it
                    continue
                pages.append(passages.PageText(len(pages), hit.page_id, hit.title, hit.container,
                                               list(hit.ancestors or []), [passages.Passage(0, 0, "", row["body"])],
                                               entry_id=hit.entry_id))
                continue
            try:
                if remote:            # the site's page API, as the asker (their own credential, else the company's)
                    page = self.searcher.get_page(hit.page_id, actor=handle)
                else:
                    page = kb.get_page(hit.page_id, actor=handle, record_read=False)
            except CrewletError as exc:
                # purged or moved out of reach since the search read it; a site that failed: a source less
                log.info("page %s left out of the sources: %s", hit.page_id, exc)
                continue
            found = passages.split(page.body or "")
            if not found:
                continue
            pages.append(passages.PageText(len(pages), page.id, page.title, page.container,
                                           list(hit.ancestors or []), found))
        passages.score(pages, passages.query_terms(question))
        return passages.select(pages, budget, header_tokens=prompt.header_tokens,
                               meaning=self._meaning(question) if by_meaning else None)

    def _meaning(self, question: str) -> passages.Meaning | None:
        """Ranks one page's passages by meaning: the question's vector (the search embedded it: cached) against
        each passage's, through the configured embedding provider. None when vectors are off."""
        embedder = getattr(self.searcher, "embedder", None)
        company = self.node.company
        if embedder is None or not company.knowledge.vectors:
            return None

        def rank(texts: list[str]) -> list[float] | None:
            try:
                import numpy as np

                qv = embedder.vector(company, question)
                provider = embedder.provider(company)
                if qv.vector is None or provider is None:
                    return None
                vectors = provider.embed(texts, timeout=MEANING_TIMEOUT_S)
                q = qv.vector / (np.linalg.norm(qv.vector) or 1.0)
                return [float(np.dot(q, v) / (np.linalg.norm(v) or 1.0)) for v in vectors]
            except Exception as exc:  # noqa: BLE001 - the page's opening serves instead
                log.info("passages not ranked by meaning: %s", exc)
                return None

        return rank

    def _write(self, base: Answer, settings: LlmSettings, sent: list[dict[str, str]], handle: str,
               on_text: Callable[[str], None] | None, cancel: threading.Event | None) -> Answer:
        provider = self.provider()
        assert provider is not None
        try:
            provider.key()
        except ChatFailed as exc:
            base.status, base.failure, base.reason = FAILED, exc.kind, exc.message
            return base
        estimate = base.prompt_tokens
        ledger = self.ledger()
        try:
            reservation = ledger.reserve(settings, estimate + settings.max_output_tokens, actor=handle)
        except NoRoom as exc:
            base.status, base.reason = OVER_BUDGET, str(exc)
            return base
        try:
            reply = provider.complete(sent, on_text=on_text, cancel=cancel)
        except ChatFailed as exc:
            usage = exc.usage
            if usage is None:
                billed = exc.sent and exc.kind != "http"        # an error status, or no connection: nothing billed
                usage = Usage(estimate if billed else 0, tokens.count(exc.partial) if billed else 0, reported=False)
            ledger.record(reservation, usage.prompt_tokens, usage.completion_tokens, reported=usage.reported,
                          actor=handle, outcome=f"failed:{exc.kind}", model=settings.model)
            base.status, base.failure, base.reason = FAILED, exc.kind, exc.message
            base.usage, base.spent = usage, usage.total
            base.text = exc.partial
            return base
        except BaseException:
            ledger.record(reservation, estimate, 0, reported=False, actor=handle, outcome="failed:crashed",
                          model=settings.model)
            raise
        usage = reply.usage or Usage(estimate, tokens.count(reply.text or reply.refusal or ""), reported=False)
        base.usage, base.spent, base.model = usage, usage.total, reply.model or settings.model
        base.finish_reason = reply.finish_reason
        if reply.refusal is not None:
            ledger.record(reservation, usage.prompt_tokens, usage.completion_tokens, reported=usage.reported,
                          actor=handle, outcome="refused", model=settings.model)
            said = " ".join(reply.refusal.split()) or "it gave no reason"
            base.status, base.text = REFUSED, reply.refusal or reply.text
            base.reason = f"the model refused to answer: {said[:300]}"
            return base
        check = citations.check(reply.text, len(base.sources))
        base.text, base.citations = reply.text, check
        base.status = NOT_ANSWERED if check.not_answered else ANSWERED
        if not check.checked:
            base.reason = f"unchecked: {check.reason}"
        if reply.finish_reason == "length":
            cut = f"the reply was cut at max_output_tokens = {settings.max_output_tokens}"
            base.reason = f"{base.reason}; {cut}" if base.reason else cut
        ledger.record(reservation, usage.prompt_tokens, usage.completion_tokens, reported=usage.reported,
                      actor=handle, outcome=base.status, model=settings.model)
        return base


def _keepable(outcome: Any) -> bool:
    """Whether an answer from this search may be kept at the position it was written at. Most of what a
    search can lack moves a position when it is made good (the embedding duty files vectors on the vector
    log); an embedding provider that was slow or failing, and a keyword index behind the rows, do not —
    the same question at the same position would be searched better a moment later."""
    from core.search.seam import PROVIDER_FAILED, PROVIDER_SLOW

    return outcome.degraded not in (PROVIDER_SLOW, PROVIDER_FAILED) and outcome.coverage.behind == 0


def _source(n: int, chosen: passages.Chosen, url: str | None = None) -> Source:
    from core.search.hits import page_url

    page = chosen.page
    from core.search.entry_docs import entry_url

    return Source(n=n, page_id=page.page_id, title=page.title, container=page.container,
                  address=f"{page.container}/{page.title}",
                  url=url or (entry_url(page.entry_id) if page.entry_id else page_url(page.page_id)),
                  ancestors=page.ancestors, passages=[p.rendered() for p in chosen.passages], tokens=chosen.tokens,
                  by_meaning=page.by_meaning, entry_id=page.entry_id)


def answer(node: Node, question: str, actor: str | None = None, containers: list[str] | None = None,
           **options: Any) -> Answer:
    """One answer over `node` (the MCP tool `answer_knowledge` and scripts); `options` go to Asker.answer."""
    asker = Asker(node)
    try:
        return asker.answer(question, actor, containers, **options)
    finally:
        asker.close()
