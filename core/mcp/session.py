"""Who the server acts as, over which node, and keeping that node current between calls.

One Session per server process: one Node (one SQLite connection), one KnowledgeBase and, on the first
search, one searcher (the one core.knowledge chooses by knowledge.backend), so the embedding model
loads once per process rather than per call.

Before each call the session applies what other processes and nodes appended to the logs (the app, a
`crewlet worker`, the CLI, another `crewlet mcp`): two stats when nothing changed. A search first runs a
small keyword-index pass when something was written since the last one (as `crewlet search` does), so
an agent finds the page it has just written.
"""
from __future__ import annotations

import logging
import os
import re
import threading
from typing import TYPE_CHECKING, Any

from ..config import Actor
from ..errors import Description, describe
from ..knowledge import FollowingSearcher, RemoteSite, elsewhere, onboarding_pages, remote_site, where
from ..log import LogDamage
from ..pages.service import KnowledgeBase

if TYPE_CHECKING:
    from ..agents.diary import Diary
    from ..bank.entries import EntryBank
    from ..agents.onboarding import Onboarding
    from ..node import Node
    from ..paths import Home

log = logging.getLogger("crewlet.mcp")


class Session:
    def __init__(self, node: Node, handle: str | None, *, run: str | None = None) -> None:
        self.node = node
        self.kb = KnowledgeBase(node)
        # refused here, before the server answers anything: a handle that names no actor, or one without
        # the knowledge app (every tool here is the knowledge app's)
        self.handle = self.kb.reader(handle).handle
        self._follow = FollowingSearcher(node)
        self._index_dirty = True          # a search catches the keyword index up before its first answer
        self._pages_version: int | None = None   # the newest page change this session has seen
        self.lock = threading.RLock()     # one call at a time over the one connection
        self._diary: Diary | None = None
        self._onboarding: Onboarding | None = None
        self._bank: EntryBank | None = None     # the entries' tools: its repositories' cat-file processes kept
        self._bank_repositories: Any = None     # the [repositories] it was opened on
        self._asker: Any = None            # answer_knowledge's Asker: its chat client kept across calls
        # the model's load, begun when the server starts (start_warm): the first search waits for it to end
        self._warm_thread: threading.Thread | None = None
        self._warm_start = threading.Lock()   # not self.lock: the event loop starts the load, and never waits on a call
        self._warm_done = False
        self._warm_awaited = False
        self._warm_ended = threading.Condition(self.lock)
        # the agent run this session serves (`crewlet mcp --run ID`, CREWLET_RUN): its serves are recorded against it,
        # and a holdout run is given no knowledge (core/bank/runs.py)
        self.run: str | None = None
        self.holdout = False
        if run is not None and run.strip():
            self._tie_run(run.strip())

    def _tie_run(self, run_id: str) -> None:
        """Tie the session to agent run `run_id`: the runtime gave the id, so a run not started yet is started here
        for this session's agent (its arm drawn); one started is this agent's own and not finished."""
        from ..bank.runs import RunBank
        from ..errors import Refused

        if not self.kb.actor(self.handle).is_agent:
            raise Refused(f"a run is an agent's work: {self.handle} is a person — serve the run as its agent",
                          code="run_not_agent")
        runs = RunBank(self.bank)
        if runs.exists(run_id):
            found = runs.get(run_id, actor=self.handle)
            if found.agent != self.handle:
                raise Refused(f"run {run_id} is {found.agent}'s: this session acts as {self.handle}",
                              code="run_not_yours")
            if found.finished:
                raise Refused(f"run {run_id} finished already: its outcomes are in, a new run needs a new id",
                              code="run_finished")
        else:
            found = runs.start(self.handle, run_id=run_id, actor=self.handle)
        self.run, self.holdout = found.id, found.holdout

    # -- an agent's own memory (core/agents): made on first use ---------------------------------------
    @property
    def diary(self) -> Diary:
        if self._diary is None:
            from ..agents.diary import Diary

            self._diary = Diary(self.node)
        return self._diary

    @property
    def bank(self) -> EntryBank:
        """The knowledge bank's entries (core/bank), its repositories opened at the first read of a citation; made
        again (the old one's git processes ended) when company.toml's [repositories] changed under the server."""
        self.node.refresh_config()
        declared = self.node.company.repositories
        if self._bank is not None and declared != self._bank_repositories:
            self._bank.close()
            self._bank = None
        if self._bank is None:
            from ..bank.entries import EntryBank
            from ..bank.neighbours import NeighbourFinder

            # the neighbour check ranks the entries' vectors with the session searcher's semantic engine: its codes
            # and vectors held once in the process (a remote searcher has none: the finder makes its own)
            finder = NeighbourFinder(self.node, semantic=lambda: getattr(self.searcher, "semantic", None))
            self._bank, self._bank_repositories = EntryBank(self.node, neighbours=finder), declared
        return self._bank

    @property
    def onboarding(self) -> Onboarding:
        """This session's view of onboarding: the pass lease it may hold is this server process's."""
        if self._onboarding is None:
            from ..agents.onboarding import Onboarding

            self._onboarding = Onboarding(self.node, label=f"crewlet mcp as {self.handle} (pid {os.getpid()})",
                                          page_of=onboarding_pages(self.node, lambda: self.searcher))
        return self._onboarding

    @property
    def actor(self) -> Actor:
        """The actor as the configuration current now says (an edited company.toml applies at once)."""
        return self.kb.actor(self.handle)

    # -- freshness ---------------------------------------------------------------------------------
    def catch_up(self) -> None:
        """Apply what others appended since this process last looked (two stats when nothing was), and
        notice pages others changed: processes on one home share its database, so a page the CLI wrote
        is already applied here, and only the newest page version (one indexed lookup) says so."""
        node = self.node
        node.follow_storage()   # opened on a full disk: open for writing once there is room again
        if node.damage is None and not node.readonly:
            grown = False
            for path, applied in node.applied_ends().items():
                try:
                    grown = grown or os.stat(path).st_size > applied
                except OSError:
                    continue
            if grown or node.apply_error is not None:
                try:
                    node.catch_up()
                    node.apply_error = None
                except LogDamage:
                    pass  # node.damage holds it: reads go on, every write is refused with it
                except Exception as exc:  # a full disk, a locked file: reads go on from what is applied
                    node.apply_error = str(exc)
                    log.warning("records on the log could not be applied: %s", exc)
        with node.lock:
            version = node.conn.execute("SELECT max(version) FROM pages").fetchone()[0]
        if version != self._pages_version:
            self._pages_version = version
            self._index_dirty = True

    def wrote(self) -> None:
        """This process changed a page: the next search catches the keyword index up first."""
        self._index_dirty = True

    # -- search --------------------------------------------------------------------------------------
    @property
    def searcher(self) -> Any:
        """The searcher knowledge.backend names (core.knowledge): this node's copy, or a remote site
        searched live. Made again when an edit of company.toml moves the knowledge, by the rule the app
        follows too."""
        return self._follow.get()

    @property
    def asker(self) -> Any:
        """One Asker a session (its connection to the chat model kept across calls) over the searcher as it is
        now: made again when the knowledge moved, as the searcher is (the Asker closes only what it made)."""
        searcher = self.searcher
        if self._asker is None or self._asker.searcher is not searcher:
            from ..ask.answer import Asker

            if self._asker is not None:
                self._asker.close()
            self._asker = Asker(self.node, searcher)
        return self._asker

    @property
    def site(self) -> RemoteSite | None:
        """The remote site the company's knowledge lives on (configuration current now); None: this node's."""
        self.node.refresh_config()
        return remote_site(self.node.company)

    @property
    def remote(self) -> bool:
        return self.site is not None

    def where(self) -> str:
        self.node.refresh_config()
        return where(self.node.company)

    def elsewhere(self, what: str = "", *, write: bool = False) -> None:
        """Refuse a tool that would write (or list) this node's own copy of knowledge kept on a remote site."""
        self.node.refresh_config()
        refusal = elsewhere(self.node.company, what, write=write)
        if refusal is not None:
            raise refusal

    def index_catch_up(self) -> None:
        """The small pass `crewlet search` runs before it answers (core.search.indexer.catch_up_for_search),
        when this process saw a change. A remote site has no index here."""
        if not self._index_dirty or self.remote:
            return
        from ..search.indexer import catch_up_for_search

        report = catch_up_for_search(self.node.home)
        # failed, or busy (another process — the worker, the app — is running a pass): ask again next time
        self._index_dirty = report is None or report.kind == "busy" or report.more

    def start_warm(self) -> None:
        """Begin loading the embedding model in the background (once a session)."""
        with self._warm_start:
            if self._warm_thread is not None:
                return
            self._warm_thread = threading.Thread(target=self.warm, name="crewlet-mcp-warm", daemon=True)
            self._warm_thread.start()

    def warm(self) -> None:
        """Load the embedding model now (a background thread at start), so no search by meaning waits for it
        past its bound. A provider that loads (the local model) is loaded whole, however long a busy machine
        takes; an endpoint is asked one query, within the usual bound. Nothing when vectors are off."""
        try:
            with self.lock:
                searcher = self.searcher
                company = self.node.company
                embedder = getattr(searcher, "embedder", None)   # a remote searcher embeds nothing here
                if embedder is None or not company.knowledge.vectors:
                    return
            provider = embedder.provider(company)
            load = getattr(provider, "load", None)
            if callable(load):
                load()
            else:
                embedder.vector(company, "warm")
        except Exception as exc:  # the first search will say what is wrong
            log.info("could not warm the embedding model: %s", exc)
        finally:
            with self._warm_ended:
                self._warm_done = True
                self._warm_ended.notify_all()

    def await_model(self) -> None:
        """Before the session's first search: wait for the load start_warm began to end (loaded or failed),
        so an agent's first query, usually its most important, is not answered by keywords alone because the
        model was still loading. Later searches never wait here (the query's own bound protects them from a
        stuck provider). Called under the lock, which the wait gives up while it waits (the load needs it)."""
        if self._warm_thread is None or self._warm_awaited:
            return
        self._warm_awaited = True
        with self._warm_ended:
            self._warm_ended.wait_for(lambda: self._warm_done)

    def close(self) -> None:
        """Close the searcher (the node is its opener's to close), once a model load under way has ended
        (onnxruntime aborts a process that exits while a session is being made)."""
        if self._warm_thread is not None:
            self._warm_thread.join()
        with self.lock:
            if self._asker is not None:
                self._asker.close()
            self._follow.close()
            if self._diary is not None:
                self._diary.close()
            if self._bank is not None:          # ends the repositories' git processes
                self._bank.close()
            if self._onboarding is not None:   # a pass this session held is free for the next at once
                self._onboarding.release_all()


def advice(said: Description) -> str:
    """This surface's own next step, after a refusal whose core words state the fact alone: a model is
    pointed at the tools it has (the CLI points a person at its commands). A refusal's `fix` — a command
    or a file of this machine — is never said here: a model can take neither step."""
    details = said.details
    code = said.code
    if code == "knowledge_elsewhere":
        return ("; search_knowledge and get_page read it here" if details.get("write")
                else " — search_knowledge searches it and get_page reads a hit")
    if code == "not_found" and details.get("space_unknown"):   # an address whose space does not exist
        return " — call list_pages without a container for the spaces there are"
    if code == "not_found" and "ref" in details and "container" in details:   # a reference naming no page
        container = details.get("container")
        return (f" — check the space and title (list_pages with container '{container}' lists its pages)" if container
                else " — give a page id as search_knowledge or list_pages gave it, or the address SPACE/Title")
    if code == "invalid_parent" and details.get("parent_container"):
        return f" — call list_pages with container '{details['parent_container']}' to list under it"
    if code == "stale_revision":
        current = details.get("current_revision")
        return (f"; your text was not saved — get_page reads revision {current}: merge into it, then call save_page "
                f"with base_revision {current}")
    if code in ("empty_query", "no_words"):
        return " — call search_knowledge with the words to look for"
    if code == "empty_question":
        return " — call answer_knowledge with the person's question in words"
    if code == "unknown_container":
        return " — call list_pages without a container for the spaces there are"
    if code == "not_declared":
        declared = ", ".join(details.get("declared") or [])
        return (f" — pick one of: {declared}" if declared else "") + " (only a person who runs this server declares a space)"
    return AT_THE_SERVER.get(code, "")


# refusals only a person who runs the server can lift: said so, without that person's command or file
AT_THE_SERVER = {
    "config": " — the server's configuration needs a person's fix: tell the person who runs it",
    "log_damaged": "; reads go on — tell the person who runs this server, who can check and repair the log",
    "log": " — tell the person who runs this server",
    "log_busy": " — call again in a while",
    "disk_full": " — tell the person who runs this server", "read_only": " — tell the person who runs this server",
    "busy": " — call again in a while",
}


_COMMAND_ASIDE = re.compile(r"\s*\([^()]*`crewlet [^()]*\)")


def without_commands(fact: str) -> str:
    """A refusal's fact without a `crewlet` command still written into it (a refusal should keep the command
    apart as its `fix`; one that does not loses it here): an aside naming one is dropped, and a clause
    ' — run `crewlet …`' cut where it starts."""
    fact = _COMMAND_ASIDE.sub("", fact)
    at = fact.find("`crewlet ")
    if at >= 0:
        cut = fact.rfind(" — ", 0, at)
        fact = fact[:cut] if cut > 0 else fact
    return fact


def keep_paths_here(text: str, home: Home) -> str:
    """`text` without this server's own paths: a file of the home (or of the shared directory it joined) is
    named by its place inside it, so a model is never shown where the server keeps its files."""
    places = {str(home.root): "", str(home.root.resolve()): ""}
    shared = home.shared
    if shared is not None:
        places |= {str(shared): "", str(shared.resolve()): ""}
    for place in sorted(places, key=len, reverse=True):
        text = text.replace(place + os.sep, "").replace(place, "the server's home")
    return text


def _private(value: Any, home: Home) -> Any:
    if isinstance(value, str):
        return keep_paths_here(value, home)
    if isinstance(value, dict):
        return {k: _private(v, home) for k, v in value.items()}
    if isinstance(value, list):
        return [_private(v, home) for v in value]
    return value


def describe_error(exc: BaseException, home: Home) -> tuple[str, dict[str, Any]]:
    """A refusal or failure (core.errors.describe) in the one line a model reads — the fact and this
    surface's advice, the server's paths kept here — and its facts for structured content. A refused
    write's own text is not sent back: the model has it."""
    said = describe(exc, home=home)
    message = keep_paths_here(without_commands(said.fact) + advice(said), home)
    details = {k: v for k, v in said.details.items() if k != "your_body"}
    return message, _private({"error": said.code, **details}, home) | {"message": message}
