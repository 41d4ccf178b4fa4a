"""What the bank knows about an area, within a token budget: `load_context` (spec 003, "What agents get").

An agent calls it before it starts work in a folder (`apps/server/prisma`, or `NAME:apps/server` where several
repositories are configured). It gets, in this order, while they fit:

1. the pages linked to the area's modules (addresses only: get_page reads one);
2. the CONVENTION entries in use of the area's modules (every one, whatever its tier: a convention a person
   accepted is handed to every run in its modules);
3. the KNOWLEDGE_CONTEXT_TOP_K most relevant entries in use for the area that are GROUNDED or HUMAN_VERIFIED
   by their last checks. Relevance is the scope first — the area's own folder, then the nearest folder holding
   it or held by it, then unscoped entries (which serve every area) — then a person's verification, then the
   newest. Each cited file is then read at its branch head: one that changed since its last check says so and
   the entry serves as UNGROUNDED, below the others.

**The budget** is counted with the WordPiece tokenizer that ships in crewlet (core/embed/tokens.py) over the
whole text a model reads — the headings, every line, the closing line — and the text is never over it: an item
that does not fit is left out (counted, and said), and the next, smaller one may still fit. What the
structured data adds repeats the same facts.

**At 100,000 entries** the selection reads only what it serves: the in-use entries' scopes and counts come
from one partial index (m013), the candidates are read newest first a scope at a time (each scope an index
range), their last checks a batch at a time, and the reading stops once K are found. The full entries are
built only for what is served.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..clock import calendar_now_ms
from ..embed import tokens
from ..errors import CrewletError, Invalid
from ..pages.entry_model import CONSOLIDATED, CONVENTION, HOLDING
from ..repos import Repositories, Scope, Unreadable, parse_scope, scope_matches
from ..repos.modules import contains, stored_scope
from .entries import Entry, EntryBank
from .links import linked_pages
from .trust import TIER_RANK, UNGROUNDED, CitationState, ago, trust_tier

# written exactly as the partial indexes of migration m013 say it, so SQLite's planner uses them
IN_USE_SQL = "status IN ('STANDING', 'CONSOLIDATED')"
BATCH = 32                      # candidates whose last checks are read in one query
CHUNK = 8                       # entries built, read at the head and fitted at a time
MIN_TOKEN_BUDGET = 100          # the tool's floor: the framing of a context always fits
MIN_ENTRY_TOKENS = 24           # no entry reads in fewer (its id, tier, kind, scope, page and age): less room, none fits
VIA = "load_context"


@dataclass
class Item:
    """One thing a context serves, as the model reads it."""

    section: str                # "pages" | "conventions" | "entries", as Context.left_out counts them
    lines: list[str]
    tokens: int
    entry: Entry | None = None
    page: dict[str, Any] | None = None


@dataclass
class Context:
    area: str
    modules: list[str]
    budget: int
    top_k: int
    tokens: int = 0
    text: str = ""
    pages: list[dict[str, Any]] = field(default_factory=list)
    conventions: list[Entry] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    # left out for the budget, by section; and the entries in use for the area ranked past the top K (or not
    # grounded) that were not candidates at all
    left_out: dict[str, int] = field(default_factory=lambda: {"pages": 0, "conventions": 0, "entries": 0})
    ranked_lower: int = 0

    @property
    def served(self) -> list[Entry]:
        """The entries served, in the order the text gives them (conventions, then the relevant ones)."""
        return [*self.conventions, *self.entries]

    def to_json(self, now: int | None = None) -> dict[str, Any]:
        now = calendar_now_ms() if now is None else now
        return {"area": self.area, "modules": self.modules, "token_budget": self.budget, "tokens": self.tokens,
                "counted_with": tokens.TOKENIZER_NAME, "top_k": self.top_k, "pages": self.pages,
                "conventions": [served_json(e, now) for e in self.conventions],
                "entries": [served_json(e, now) for e in self.entries],
                "left_out_for_budget": dict(self.left_out), "ranked_lower": self.ranked_lower}


def served_json(entry: Entry, now: int) -> dict[str, Any]:
    """An entry as a serve gives it: what it says, its tier, where it applies and each citation's last check."""
    return {"id": entry.id, "page": entry.page, "page_id": entry.page_id, "kind": entry.kind, "body": entry.body,
            "scope": entry.scope, "status": entry.status, "tier": entry.tier, "age": ago(now - entry.created_at),
            # a consolidated entry is served as evidence for its page, whose body says it (spec 003)
            "evidence_for": entry.page_id if entry.status == CONSOLIDATED else None,
            "citations": [{"index": c.index, "citation": c.citation, "result": c.result, "said": c.said(now),
                           "changed_since": c.changed_since} for c in entry.citations]}


# -- how an entry and its citations read --------------------------------------------------------------------

def citation_words(cit: dict[str, Any]) -> str:
    """'server:src/cache.py lines 1-3' or 'acme/api#12 (issue)'."""
    if "link" in cit:
        return f"{cit['link']} ({cit.get('kind', 'link')})"
    lines = cit.get("lines") or []
    span = f" lines {lines[0]}-{lines[1]}" if len(lines) == 2 else ""
    return f"{cit.get('repository')}:{cit.get('path')}{span}"


def entry_lines(entry: Entry, now: int) -> list[str]:
    """An entry in a few lines: its id, tier, kind, scope, page and age; what it says; each citation with its
    last check and its age. An UNGROUNDED one says what to do before relying on it."""
    head = (f"- entry {entry.id} · {entry.tier} · {entry.kind} · scope {entry.scope or 'every area'} · "
            f"{'evidence for' if entry.status == CONSOLIDATED else 'under'} {entry.page} · added "
            f"{ago(now - entry.created_at)}")
    out = [head, f"  {entry.body}"]
    for c in entry.citations:
        out.append(f"  cites [{c.index}] {citation_words(c.citation)}: {c.said(now)}")
    if entry.tier == UNGROUNDED:
        out.append("  (UNGROUNDED: check it against the code before relying on it)")
    return out


# -- the serve-time check -----------------------------------------------------------------------------------

def check_at_head(bank: EntryBank, entries: Sequence[Entry], heads: dict[str, str] | None = None) -> None:
    """Each code citation's file read at its repository's branch head (where a recheck re-anchored it, the file
    it stands in now), a repository at a time — one round trip for its head, one for every blob — and each
    entry's tier derived again: a file whose blob differs from the one last checked says so (`changed_since`)
    and the entry serves as UNGROUNDED until rechecked. A repository that cannot be read just now is left out
    (its last checks stand), as EntryBank.head_blobs leaves it. `heads`: each repository's head as read earlier in
    the same serve (read here, and kept in it, when not there)."""
    heads_of = {} if heads is None else heads
    wanted: dict[str, list[tuple[Entry, CitationState, str]]] = {}
    for e in entries:
        for c in e.citations:
            if "path" in c.citation and c.blob is not None:
                path = str((c.anchor or {}).get("path") or c.citation["path"])
                wanted.setdefault(str(c.citation.get("repository")), []).append((e, c, path))
    now_at: dict[tuple[str, int], str | None] = {}
    for name, cited in wanted.items():
        repo = bank.repositories.get(name)
        if repo is None:
            continue
        try:
            head = heads_of.get(name) or heads_of.setdefault(name, repo.head())
            # a check made at the head itself read the file as it is there: no need to read it again
            moved = [(e, c, path) for e, c, path in cited if c.commit != head]
            blobs = repo.blob_ids([(head, path) for _, _, path in moved])
        except Unreadable:
            continue
        for (e, c, _), blob in zip(moved, blobs):
            now_at[(e.id, c.index)] = blob
    for e in entries:
        mine = {i: b for (eid, i), b in now_at.items() if eid == e.id}
        if mine:
            e.tier = trust_tier(e.status, e.verified_by, e.citations, mine)
            if e.verified_by:     # the tier stays a person's; the citation still says its file changed
                for c in e.citations:
                    if c.index in mine and c.blob is not None and mine[c.index] != c.blob:
                        c.changed_since = True


# -- which scopes serve an area -----------------------------------------------------------------------------

def _depth(folder: str) -> int:
    return len(folder.split("/")) if folder else 0


def closeness(scope: Scope | None, area: Scope) -> tuple[int, int, int] | None:
    """How near an entry's scope is to the area, smaller first, or None when it does not serve it: the area's
    own folder (0, 0, 0); a folder holding it k levels up (0, k, 0) before one held by it k levels down
    (0, k, 1); unscoped entries, which serve every area, last (2, 0, 0)."""
    if scope is None:
        return (2, 0, 0)
    if not scope_matches(scope, area):
        return None
    if contains(scope.folder, area.folder):
        return (0, _depth(area.folder) - _depth(scope.folder), 0)
    return (0, _depth(scope.folder) - _depth(area.folder), 1)


def _module_closeness(scope: Scope | None, modules: Sequence[Scope]) -> tuple[int, int, int] | None:
    """A convention that does not serve the area itself but a module the area lies in (a sibling folder of the
    same module): after every direct match."""
    for m in modules:
        if scope is not None and scope_matches(scope, m):
            return (1, 0, 0)
    return None


# -- the selection ------------------------------------------------------------------------------------------

class Selector:
    """Reads the candidates of one context under the node's lock."""

    def __init__(self, bank: EntryBank, areas: Sequence[Scope], modules: Sequence[Scope]) -> None:
        # a run's context serves several areas (its modules): an entry ranks by the area it is nearest
        self.bank, self.conn, self.areas, self.modules = bank, bank.conn, list(areas), modules
        # every scope entries in use hold, with how many: one scan of the partial index entries_in_use_scope
        self.scopes = [(r[0], r[1]) for r in self.conn.execute(
            f"SELECT scope, count(*) FROM entries WHERE {IN_USE_SQL} GROUP BY scope")]
        self._groups: dict[bool, list[tuple[tuple[int, int, int], str | None, int]]] = {}

    def groups(self, *, modules_too: bool = False) -> list[tuple[tuple[int, int, int], str | None, int]]:
        """The stored scopes that serve the area (and, `modules_too`, its modules), nearest first."""
        if modules_too not in self._groups:
            self._groups[modules_too] = self._read_groups(modules_too)
        return self._groups[modules_too]

    def _read_groups(self, modules_too: bool) -> list[tuple[tuple[int, int, int], str | None, int]]:
        out = []
        for text, n in self.scopes:
            parsed = stored_scope(text)
            if text is not None and parsed is None:
                continue
            near = [k for k in (closeness(parsed, a) for a in self.areas) if k is not None]
            key = min(near) if near else None
            if key is None and modules_too:
                key = _module_closeness(parsed, self.modules)
            if key is not None:
                out.append((key, text, n))
        return sorted(out, key=lambda g: (g[0], g[1] or ""))

    def holding(self, rows: Sequence[Any]) -> set[str]:
        """Of candidate rows (id, n citations), those whose every citation's last check held (by the checks on
        record: the serve-time read at the head comes after)."""
        rows = [r for r in rows if r["n"]]
        if not rows:
            return set()
        marks = ",".join("?" * len(rows))
        last: dict[tuple[str, int], str] = {}
        for c in self.conn.execute(f"SELECT entry_id, idx, result FROM citation_checks WHERE entry_id IN ({marks}) "
                                   "ORDER BY seq", [r["id"] for r in rows]):
            last[(c[0], c[1])] = c[2]
        return {r["id"] for r in rows if all(last.get((r["id"], i)) in HOLDING for i in range(1, r["n"] + 1))}

    def _where(self, scope: str | None) -> tuple[str, list[Any]]:
        return ("scope IS NULL", []) if scope is None else ("scope = ?", [scope])

    def relevant(self, k: int) -> list[str]:
        """The ids of the K most relevant entries in use for the area, grounded or verified by their last checks
        (conventions apart), in rank order: by scope group, a person's verified ones first, then the newest."""
        found: list[str] = []
        for _key, scope, _n in self.groups():
            if len(found) >= k:
                break
            where, args = self._where(scope)
            found += [r[0] for r in self.conn.execute(
                f"SELECT id FROM entries WHERE {where} AND {IN_USE_SQL} AND verified_by IS NOT NULL "
                f"AND kind <> '{CONVENTION}' ORDER BY created_at DESC, rowid DESC LIMIT ?", [*args, k - len(found)])]
            if len(found) >= k:
                break
            cur = self.conn.execute(
                f"SELECT id, json_array_length(citations) AS n FROM entries WHERE {where} AND {IN_USE_SQL} "
                f"AND verified_by IS NULL AND kind <> '{CONVENTION}' AND citations <> '[]' "
                "ORDER BY created_at DESC, rowid DESC", args)
            while len(found) < k:
                batch = cur.fetchmany(BATCH)
                if not batch:
                    break
                held = self.holding(batch)
                found += [r["id"] for r in batch if r["id"] in held][:k - len(found)]
            cur.close()
        return found

    def conventions(self) -> list[tuple[str, bool]]:
        """The conventions in use of the area and its modules — (id, whether its scope serves the area itself) —
        those verified or holding by their last checks first, then by scope group and newest."""
        ranked: list[tuple[Any, ...]] = []
        for key, scope, _n in self.groups(modules_too=True):
            where, args = self._where(scope)
            rows = self.conn.execute(
                f"SELECT id, json_array_length(citations) AS n, verified_by, created_at FROM entries "
                f"WHERE {where} AND {IN_USE_SQL} AND kind = '{CONVENTION}'", args).fetchall()
            held = self.holding(rows)
            for r in rows:
                tier = 0 if r["verified_by"] else 1 if r["id"] in held else 2
                ranked.append((tier, key, -r["created_at"], r["id"]))
        return [(r[-1], r[1][0] != 1) for r in sorted(ranked)]

    def in_use_for_area(self) -> int:
        return sum(n for _key, _scope, n in self.groups())


def _linked_pages(bank: EntryBank, scopes: Sequence[Scope]) -> list[dict[str, Any]]:
    """The pages linked to a module holding, or lying within, the area or its modules (core/bank/links.py), as
    addresses."""
    return [{"id": p.page_id, "address": p.page, "linked_to": p.item} for p in linked_pages(bank.conn, scopes)]


def area_modules(bank: EntryBank, area: Scope) -> list[Scope]:
    """The modules the area reaches at the branch head (the modules under it, else the innermost it lies in); none
    when its repository cannot be read just now."""
    if area.repository is None or area.repository not in bank.repositories:
        return []
    repositories = bank.repositories
    if not isinstance(repositories, Repositories):
        return []
    try:
        reached = repositories.reached(area)
    except CrewletError:          # Unreadable among them: no modules just now, the scope still serves
        return []
    return [Scope(repo, folder) for repo, folder in reached]


def build(bank: EntryBank, ids: Sequence[str]) -> list[Entry]:
    """The entries as EntryBank builds them (page, citations with their last checks, corroborations), in the order
    of `ids`, without what only `show` needs (the history)."""
    if not ids:
        return []
    with bank.node.lock:
        marks = ",".join("?" * len(ids))
        rows = {r["id"]: r for r in bank.conn.execute(f"SELECT * FROM entries WHERE id IN ({marks})", list(ids))}
        return [bank._build(rows[i]) for i in ids if i in rows]


# -- the whole context --------------------------------------------------------------------------------------

def load_context(bank: EntryBank, area: str | Sequence[str], *, token_budget: int | None = None,
                 top_k: int | None = None, actor: str | None = None, record: bool = True,
                 run: str | None = None) -> Context:
    """What the bank knows about `area` within `token_budget` tokens (default KNOWLEDGE_CONTEXT_TOKEN_BUDGET), the
    relevant entries at most `top_k` (default KNOWLEDGE_CONTEXT_TOP_K). `area` may be several (an agent run's
    modules, core/bank/runs.py): each entry ranks by the one it is nearest. The entries served are recorded as one
    serve to `actor` (`record`), as served to agent run `run` when one is named."""
    who = bank.kb.reader(actor)
    settings = bank.kb.company.bank
    budget = settings.context_token_budget if token_budget is None else token_budget
    k = settings.context_top_k if top_k is None else top_k
    areas = [area] if isinstance(area, str) else list(area)
    if not areas or any(not a or not a.strip() for a in areas):
        raise Invalid("the area is empty: name a folder of a repository, e.g. apps/server, or '.' for all of it",
                      code="empty_area")
    scopes: list[Scope] = []
    for a in areas:
        parsed = parse_scope(a, list(bank.repositories))
        assert parsed is not None
        if parsed not in scopes:
            scopes.append(parsed)
    modules: list[Scope] = []
    for parsed in scopes:
        modules += [m for m in area_modules(bank, parsed) if m not in modules]
    now = calendar_now_ms()
    out = Context(area=", ".join(str(s) for s in scopes), modules=[str(m) for m in modules], budget=budget, top_k=k)

    with bank.node.lock:
        sel = Selector(bank, scopes, modules)
        pages = _linked_pages(bank, [*scopes, *modules])
        conventions = sel.conventions()
        convention_ids = [i for i, _ in conventions]
        relevant_ids = sel.relevant(k) if k > 0 else []
        # the entries in use for the area that are neither conventions nor among the top K
        out.ranked_lower = max(0, sel.in_use_for_area() - len(relevant_ids) - sum(1 for _, own in conventions if own))

    head = [f"What the bank knows about {out.area}"
            + (f" (module{'s' if len(modules) != 1 else ''} {', '.join(out.modules)})" if modules else "")
            + f", within {budget:,} tokens:"]
    fitter = _Fitter(budget, head)

    for p in pages:
        line = f"- {p['address']} (id {p['id']}), linked to {p['linked_to']}"
        if not fitter.add("Pages about its modules (read one with get_page):", Item("pages", [line], 0, page=p)):
            out.left_out["pages"] += 1

    heads: dict[str, str] = {}

    def serve(ids: list[str], section: str, heading: str) -> None:
        """Build, read at the head and fit the entries a few at a time, so that only what can fit is built: once
        the room left is below any entry, or a whole chunk found none that fits, the rest are counted as left
        out unread."""
        for at in range(0, len(ids), CHUNK):
            if fitter.room() < MIN_ENTRY_TOKENS:
                out.left_out[section] += len(ids) - at
                return
            built = build(bank, ids[at:at + CHUNK])
            check_at_head(bank, built, heads)
            fitted = 0
            for e in built:
                if fitter.add(heading, Item(section, entry_lines(e, now), 0, entry=e)):
                    fitted += 1
                else:
                    out.left_out[section] += 1
            if not fitted:
                out.left_out[section] += max(0, len(ids) - at - CHUNK)
                return

    serve(convention_ids, "conventions", "Conventions of its modules:")
    serve(relevant_ids, "entries", f"The most relevant entries (at most {k}, grounded or verified first):")
    fitter.finish(out)
    if record and out.served:
        bank.record_serve(who.handle, VIA, out.served, query=out.area, run=run)
    return out


class _Fitter:
    """Adds items while the whole text stays within the budget: the heading, each section's heading, every line
    and the closing line counted."""

    def __init__(self, budget: int, head: list[str]) -> None:
        self.budget = budget
        self.head = list(head)
        self.used = tokens.count("\n".join(head))
        self.items: list[tuple[str, Item]] = []
        # room kept for the closing line, whose figures are known only at the end; finish() counts the real text
        self.reserve = tokens.count("Left out for the budget: 99 pages, 99 conventions and 99 entries. "
                                    "99,999 more entries in use here rank lower.")

    def room(self) -> int:
        return self.budget - self.used - self.reserve

    def add(self, heading: str, item: Item) -> bool:
        new_heading = all(h != heading for h, _ in self.items)
        cost = tokens.count("\n".join(([heading] if new_heading else []) + item.lines))
        if self.used + cost + self.reserve > self.budget:
            return False
        item.tokens = cost
        self.used += cost
        self.items.append((heading, item))
        return True

    def text(self, ctx: Context) -> str:
        # within a section, grounded and verified above the others (a file changed at the head demotes an entry
        # its last checks had ranked higher); reordering changes no count
        rank = {"pages": 0, "conventions": 1, "entries": 2}
        self.items = [it for _, it in sorted(enumerate(self.items), key=lambda p: (
            rank[p[1][1].section], TIER_RANK[p[1][1].entry.tier] if p[1][1].entry is not None else 0, p[0]))]
        lines = list(self.head)
        said: set[str] = set()
        for heading, item in self.items:
            if heading not in said:
                said.add(heading)
                lines.append(heading)
            lines += item.lines
        if not self.items:
            lines.append("Nothing fits in the budget." if any(ctx.left_out.values())
                         else "Nothing in the bank serves this area yet.")
        closing = closing_line(ctx)
        return "\n".join(lines + ([closing] if closing else []))

    def finish(self, ctx: Context) -> None:
        """The text as served, and what it holds: never over the budget — should the closing line take more than
        the room kept for it, the last items go, counted as left out."""
        text = self.text(ctx)
        used = tokens.count(text)
        while used > self.budget and self.items:
            _, item = self.items.pop()
            ctx.left_out[item.section] += 1
            text = self.text(ctx)
            used = tokens.count(text)
        if used > self.budget:          # a budget below the framing itself: say nothing rather than too much
            text, used = "", 0
        ctx.text, ctx.tokens = text, used
        ctx.pages = [i.page for _, i in self.items if i.page is not None]
        ctx.conventions = [i.entry for _, i in self.items if i.entry is not None and i.section == "conventions"]
        ctx.entries = [i.entry for _, i in self.items if i.entry is not None and i.section == "entries"]


def closing_line(ctx: Context) -> str:
    parts = []
    left = [(n, w) for n, w in ((ctx.left_out["pages"], "page"), (ctx.left_out["conventions"], "convention"),
                                (ctx.left_out["entries"], "entry")) if n]
    if left:
        said = [f"{n:,} {w if n == 1 else ('entries' if w == 'entry' else w + 's')}" for n, w in left]
        parts.append("Left out for the budget: " + (said[0] if len(said) == 1 else
                                                    ", ".join(said[:-1]) + " and " + said[-1]) + ".")
    if ctx.ranked_lower:
        parts.append(f"{ctx.ranked_lower:,} more entr{'y' if ctx.ranked_lower == 1 else 'ies'} in use here "
                     f"rank{'s' if ctx.ranked_lower == 1 else ''} lower.")
    return " ".join(parts)


def with_json(entries: Sequence[Entry]) -> list[dict[str, Any]]:
    now = calendar_now_ms()
    return [served_json(e, now) for e in entries]


__all__ = ["Context", "MIN_TOKEN_BUDGET", "check_at_head", "citation_words", "closeness", "entry_lines",
           "load_context", "served_json", "stored_scope", "with_json"]
