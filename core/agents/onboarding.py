"""Onboarding: which pages an agent reads before its first task, whether it has, and the pass lease.

**The chain.** What an agent's onboarding depends on, root first: the company's root space
(`knowledge.root_space`), then the agent's own space (`actors.X.space`, when it has one other than the
root), and in each the page titled exactly "Onboarding" (spec 000: "Onboarding pages must be titled
exactly `Onboarding`"; a title is unique in its space, so each space has at most one, found by one
indexed lookup of its address, wherever it sits in the outline; a trashed one does not count).

**The chain hash** is sha256 over the chain's space keys in order and each Onboarding page's id (or
that the space has none). So moving the agent to another space in company.toml changes it, and so does
an Onboarding page created (or trashed, or purged and written anew) in a space of the chain, or the root
space renamed. An edit of an Onboarding page's text does not: keeping a page current is upkeep, and
re-onboarding every agent at each typo fix would train agents to skim; the spec's chain hash, too, is
over the org chain, not the pages' words.

**The marker** is the `agent_onboarding_markers` row (UPSERT by agent), written by an `onboarding.mark`
record on the pages log, so every node applies it and an agent moved to another node stays onboarded.
A marker whose hash is not the current chain's counts for nothing — silently: the status says what to
read, as for an agent never onboarded, and names when the stale mark was made.

**The pass lease** keeps two sessions from onboarding one agent at once: the session that first asks for
the status of an agent with pages to read takes it (a lease file among the fleet's leases, `log/leases/
onboarding/<agent>.lease`, so it holds across processes and across the nodes of a shared directory —
the markers it guards are replicated too); another session is told the pass is under way elsewhere, by
whom and until when. Marking releases it; a session that stops without marking lets it expire
(LEASE_S), or sooner where the lease machinery sees its holder is gone. The lease columns of
`agent_onboarding_markers` (from its first migration) are not used: that row is replicated, a lease is
not — a node-local column in a replicated row would be a second, unreplicated truth in the same place.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..config import Company
from ..errors import Invalid, Refused
from ..log import Record
from ..clock import now_ms
from ..pages.links import link_to
from ..pages.model import normalise_title
from ..leases import Lease, new_owner

if TYPE_CHECKING:
    from ..node import Node

ONBOARDING_TITLE = "Onboarding"
LEASE_S = 15 * 60.0
CHAIN_VERSION = 1


@dataclass
class ChainPage:
    space: str
    id: str
    title: str
    revision: int

    def to_json(self) -> dict[str, Any]:
        return {"space": self.space, "id": self.id, "title": self.title, "address": f"{self.space}/{self.title}",
                "revision": self.revision, "link": link_to(self.id, self.title)}


@dataclass
class Chain:
    agent: str
    spaces: list[str]                   # root first
    pages: list[ChainPage]              # the Onboarding pages along it, in the same order
    hash: str

    def to_json(self) -> dict[str, Any]:
        return {"agent": self.agent, "spaces": self.spaces, "pages": [p.to_json() for p in self.pages],
                "chain_hash": self.hash}


@dataclass
class Marker:
    chain_hash: str
    marked_at: int


@dataclass
class OnboardingStatus:
    agent: str
    state: str        # onboarded | to_read | onboarding_elsewhere | nothing_to_read
    chain: Chain
    marker: Marker | None
    message: str
    lease_holder: str = ""              # who runs the pass (onboarding_elsewhere), or "this session"
    lease_until: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def onboarded(self) -> bool:
        return self.state in ("onboarded", "nothing_to_read")

    @property
    def stale(self) -> bool:
        """Marked once, under a chain that is no longer the agent's."""
        return self.marker is not None and self.marker.chain_hash != self.chain.hash

    def to_json(self) -> dict[str, Any]:
        return {"agent": self.agent, "state": self.state, "onboarded": self.onboarded, "stale_marker": self.stale,
                "marked_at": self.marker.marked_at if self.marker else None, "message": self.message,
                "to_read": [p.to_json() for p in self.chain.pages] if self.state == "to_read" else [],
                "lease_holder": self.lease_holder or None, "lease_until": self.lease_until,
                "chain": self.chain.spaces, "chain_pages": [p.to_json() for p in self.chain.pages],
                "chain_hash": self.chain.hash}


def chain_spaces(company: Company, agent: str) -> list[str]:
    """The chain's spaces, root first."""
    actor = company.actor(agent)
    root = company.knowledge.root_space
    return [root] + ([actor.space] if actor.space and actor.space != root else [])


# (space, agent) -> the space's Onboarding page the agent may read, or None: where the company's knowledge
# lives decides it (core.knowledge.onboarding_pages); raises when that place cannot say
PageOf = Callable[[str, str], "ChainPage | None"]


def local_onboarding_page(node: Node, space: str) -> ChainPage | None:
    """The space's Onboarding page in this node's copy: one indexed lookup of its address."""
    with node.lock:
        row = node.conn.execute("SELECT id, title, revision FROM pages WHERE container = ? AND address = ? "
                                "AND trashed_at IS NULL", (space, normalise_title(ONBOARDING_TITLE))).fetchone()
    return ChainPage(space, row["id"], row["title"], int(row["revision"])) if row is not None else None


def chain_of(node: Node, agent: str, page_of: PageOf | None = None) -> Chain:
    """The agent's chain as the configuration (re-read when company.toml changed: one stat) and the
    pages say now: one lookup a space, in this node's copy unless `page_of` reads where the company's
    knowledge lives (a Confluence or Plane site)."""
    node.refresh_config()
    spaces = chain_spaces(node.company, agent)
    pages: list[ChainPage] = []
    for space in spaces:
        page = page_of(space, agent) if page_of is not None else local_onboarding_page(node, space)
        if page is not None:
            pages.append(page)
    by_space = {p.space: p.id for p in pages}
    blob = json.dumps({"v": CHAIN_VERSION, "chain": [[s, by_space.get(s)] for s in spaces]}, separators=(",", ":"))
    return Chain(agent, spaces, pages, hashlib.sha256(blob.encode("utf-8")).hexdigest())


def marker_of(node: Node, agent: str) -> Marker | None:
    with node.lock:
        row = node.conn.execute("SELECT chain_hash, marked_at FROM agent_onboarding_markers WHERE agent_id = ?",
                                (agent,)).fetchone()
    return Marker(row["chain_hash"], int(row["marked_at"])) if row else None


def _agent(company: Company, handle: str | None) -> str:
    handle = handle or company.operator
    if not handle:
        raise Refused(f"no actor to act as: set `operator = \"…\"` in {company.file}, or pass --as HANDLE", code="no_actor")
    actor = company.actor(handle)
    if not actor.is_agent:
        raise Refused(f"{actor.handle} is a person: onboarding markers are agents' (`crewlet agents` shows them)",
                      code="not_an_agent")
    return actor.handle


class Onboarding:
    """One session's view of onboarding: its own lease owner, so two sessions of one agent are told apart."""

    def __init__(self, node: Node, *, label: str = "session", page_of: PageOf | None = None) -> None:
        self.node = node
        self.page_of = page_of                     # None: the Onboarding pages are this node's own
        self.owner = new_owner(label)
        self.label = label
        self.handed_out: dict[str, str] = {}       # agent -> the chain hash this session last told it to read

    def lease(self, agent: str) -> Lease:
        return Lease(self.node.home.fleet_lease_dir / "onboarding", agent, self.owner, self.label, ttl_s=LEASE_S)

    def release_all(self) -> None:
        """Give back every pass this session took (a session that ends without marking)."""
        for agent in list(self.handed_out):
            try:
                self.lease(agent).release()
            except OSError:
                pass
        self.handed_out.clear()

    def peek(self, agent: str) -> OnboardingStatus:
        """The state without taking the pass (for `crewlet agents` and people): never 'to_read' for a
        session, only whether the agent is onboarded and who is onboarding it."""
        chain, marker = chain_of(self.node, agent, self.page_of), marker_of(self.node, agent)
        if marker is not None and marker.chain_hash == chain.hash:
            return OnboardingStatus(agent, "onboarded", chain, marker, f"onboarded {_when(marker.marked_at)}")
        if not chain.pages:
            return OnboardingStatus(agent, "nothing_to_read", chain, marker, _nothing(chain))
        held = self.lease(agent).holder()
        if held is not None and held.expires_at > now_ms():
            return OnboardingStatus(agent, "onboarding_elsewhere", chain, marker, f"being onboarded ({held.label})",
                                    lease_holder=held.label, lease_until=held.expires_at)
        why = "its onboarding chain changed since it was marked" if marker else "never onboarded"
        return OnboardingStatus(agent, "to_read", chain, marker, f"not onboarded: {why}")

    def status(self, actor: str | None) -> OnboardingStatus:
        """The calling agent's onboarding: onboarded, or the pages to read in order (root first) with this
        session holding the pass, or the pass under way in another session."""
        self.node.refresh_config()
        agent = _agent(self.node.company, actor)
        chain, marker = chain_of(self.node, agent, self.page_of), marker_of(self.node, agent)
        if marker is not None and marker.chain_hash == chain.hash:
            return OnboardingStatus(agent, "onboarded", chain, marker,
                                    f"{agent} is onboarded (marked {_when(marker.marked_at)}, under the current chain "
                                    f"{' → '.join(chain.spaces)}): nothing to read")
        if not chain.pages:
            return OnboardingStatus(agent, "nothing_to_read", chain, marker, _nothing(chain))
        lease = self.lease(agent)
        held = lease.acquire()
        if held is not None:
            return OnboardingStatus(agent, "onboarding_elsewhere", chain, marker,
                                    f"another session is onboarding {agent} now ({held.label}, until "
                                    f"{_when(held.expires_at)}): do not read the onboarding pages here — carry on, "
                                    "and ask onboarding_status again later", lease_holder=held.label,
                                    lease_until=held.expires_at)
        self.handed_out[agent] = chain.hash
        stale = ("your onboarding chain changed since you were marked "
                 f"{_when(marker.marked_at)}" if marker else "you have not been onboarded")
        order = ", then ".join(f"{p.space}/{p.title} (id {p.id})" for p in chain.pages)
        return OnboardingStatus(agent, "to_read", chain, marker,
                                f"{stale}: read {order} — in that order, root first — with get_page, then call "
                                "mark_onboarded", lease_holder="this session",
                                lease_until=now_ms() + int(LEASE_S * 1000))

    def mark(self, actor: str | None) -> OnboardingStatus:
        """Record that the calling agent has read its chain's Onboarding pages (UPSERT on the log)."""
        self.node.refresh_config()
        agent = _agent(self.node.company, actor)
        chain = chain_of(self.node, agent, self.page_of)
        told = self.handed_out.get(agent)
        if told is not None and told != chain.hash:
            self.handed_out.pop(agent, None)
            raise Refused(f"{agent}'s onboarding chain changed since onboarding_status named the pages to read (now "
                          f"{' → '.join(chain.spaces)}, {len(chain.pages)} Onboarding page(s)) — call onboarding_status "
                          "again and read what it names", code="chain_changed")
        lease = self.lease(agent)
        held = lease.acquire()
        if held is not None:
            raise Refused(f"another session is onboarding {agent} ({held.label}, until {_when(held.expires_at)}); it "
                          "marks the agent when it has read the pages", code="onboarding_elsewhere")
        try:
            self.node.submit_one(Record.new("onboarding.mark", agent, {"agent_id": agent, "chain_hash": chain.hash}))
        finally:
            lease.release()
        self.handed_out.pop(agent, None)
        marker = marker_of(self.node, agent)
        read = ", ".join(f"{p.space}/{p.title}" for p in chain.pages) or "no pages (the chain has none)"
        return OnboardingStatus(agent, "onboarded" if chain.pages else "nothing_to_read", chain, marker,
                                f"{agent} is marked onboarded under the chain {' → '.join(chain.spaces)} ({read}); a "
                                "change of that chain asks for it again")


def _nothing(chain: Chain) -> str:
    return (f"there is no page titled '{ONBOARDING_TITLE}' in {' or '.join(chain.spaces)}: nothing to read (a person "
            f"publishes one, e.g. {chain.spaces[0]}/{ONBOARDING_TITLE})")


def _when(ms: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def check_agent(company: Company, agent: str) -> None:
    if not company.actor(agent).is_agent:
        raise Invalid(f"{agent} is a person, not an agent", fix="`crewlet agents` lists the agents", code="not_an_agent")
