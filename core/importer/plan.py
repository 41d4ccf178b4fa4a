"""Planning an import: every file read, routed, titled and matched against the pages that exist, in
memory and before anything is written, so every problem is found (and named) at once.

Two layouts:

- **spaces** (the spec's layout, the default): a doc's container is its immediate parent directory's
  name (frontmatter `space:` overrides it); `parent:` names a page of the same space.
- **tree** (`into=KEY`): the whole tree lands in one space KEY; each directory becomes a folder page
  (an empty page titled by the directory's name) and each file a page under its directory's folder.
  Titles are unique per container, not per folder, so titles that collide are claimed in path order
  (shallower first, then by path): the first keeps its title, each later one is suffixed with its
  parent directory's path — ``About (7.4/Microsoft.PowerShell.Core)`` — or, when the collision is
  within one directory, with its own path. A page an earlier run published keeps its title: a node
  whose candidate title is held by an existing page filed under the node's own folder claims it before
  any other node, so adding or removing a file never hands an existing page another file's content.

In both layouts a file with `trigger:` in its frontmatter is a tool skill, published to the skills
container (its frontmatter kept on the page as a YAML code block the engine parses back out).
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..config import KEY_RE, Actor, Company, Space
from ..errors import Refused
from ..pages import reads, rules
from ..pages.model import MAX_TITLE, clean_title
from ..pages.records import new_ids
from ..pages.service import KnowledgeBase
from . import titles
from .docs import DocPlanner, _address, _listing, _Node
from .model import ImportNote, ImportProblem, ImportReport, PlannedPage



class Planner(DocPlanner):
    """The native knowledge base's import plan: the tree layout (--into), declared spaces, the pages that
    exist (by address) and the rules that say who may write where."""

    def __init__(self, kb: KnowledgeBase, root: Path, who: Actor, *, into: str | None = None,
                 title_from_name: bool = False, declare_spaces: bool = False) -> None:
        super().__init__(kb.company, root, who, into=into, title_from_name=title_from_name)
        self.kb = kb
        self.declare_spaces = declare_spaces
        self.to_declare: list[str] = []

    # -- 3. the tree layout: folders and unique titles ----------------------------------------------
    def build_tree(self, docs: list[_Node]) -> list[_Node]:
        """Folder pages for every directory holding a doc (at any depth), each doc under its folder,
        and titles made unique across the space in path order."""
        folders: dict[tuple[str, ...], _Node] = {}

        def folder(parts: tuple[str, ...]) -> _Node | None:
            if not parts:
                return None
            got = folders.get(parts)
            if got is None:
                got = _Node("folder", "/".join(parts), parts, container=self.into or "", title=clean_title(parts[-1]))
                got.folder = folder(parts[:-1])
                folders[parts] = got
                if not self._title_ok(got.title, got.rel + "/"):
                    got.title = got.title[:MAX_TITLE] or "(unnamed)"
            return got

        for doc in docs:
            doc.folder = folder(doc.parts[:-1])
        nodes = [*folders.values(), *docs]
        nodes.sort(key=lambda n: (len(n.parts), n.parts))

        def candidates(n: _Node, held: dict[str, str] | None = None) -> Iterator[str]:
            """The titles n may take, in the order it tries them. With `held` (the addresses under its
            folder), the numbered ones are offered only while they are held: a gap ends the run, so a
            folder of thousands costs a handful of tries per file, not thousands (it was O(n²))."""
            natural = n.title
            parent_path = "/".join(n.parts[:-1])
            yield natural
            if parent_path:
                yield titles.fit(natural, f"({parent_path})")
            yield titles.fit(natural, f"({n.rel})")
            if held is None:
                return
            k = 2
            while True:
                numbered = titles.fit(natural, f"({n.rel}) {k}")
                if _address(numbered) not in held:
                    return
                yield numbered
                k += 1

        # Pages already published stay with the files that published them: a node whose candidate title
        # is held by an existing page filed under the node's own folder claims that title first (sort key
        # `(not already_here, len(parts), parts)`), so adding or removing a file elsewhere in the tree
        # never hands an existing page another file's content.
        children = self.existing_children()
        claimed: set[str] = set()
        here_page: dict[int, str] = {}                 # id(node) -> the existing page id it claimed
        natural_of: dict[int, str] = {}
        rest: list[_Node] = []
        for n in nodes:                                # parents before children: (len(parts), parts)
            natural_of[id(n)] = n.title
            if n.folder is None:
                under = children.get(None, {})
            else:
                pid = here_page.get(id(n.folder))
                under = children.get(pid, {}) if pid is not None else {}
            held = None
            if under:
                for c in candidates(n, under):
                    address = _address(c)
                    if address in under and address not in claimed:
                        held = c
                        break
            if held is None:
                rest.append(n)
                continue
            n.title = held
            claimed.add(_address(held))
            here_page[id(n)] = under[_address(held)]
        for n in rest:                                 # then the rest, in path order (shallower first)
            if _address(n.title) in claimed:
                title = next((c for c in candidates(n) if _address(c) not in claimed), "")
                k = 2
                while not title:
                    c = titles.fit(natural_of[id(n)], f"({n.rel}) {k}")
                    title = c if _address(c) not in claimed else ""
                    k += 1
                n.title = title
            claimed.add(_address(n.title))
        for n in nodes:
            natural = natural_of[id(n)]
            if n.title != natural:
                n.notes.append(ImportNote(
                    "title_disambiguated", f"'{natural}' is already a title in {self.into} (titles are unique per "
                    f"space): published as '{n.title}'", [n.rel + ("/" if n.kind == "folder" else "")]))
        return nodes

    def existing_children(self) -> dict[str | None, dict[str, str]]:
        """The target space's pages (trashed too) by parent: parent id -> {address: page id}."""
        out: dict[str | None, dict[str, str]] = {}
        with self.kb.node.lock:
            for r in reads.in_container(self.kb.conn, self.into, "id, parent_id, address"):
                out.setdefault(r["parent_id"], {})[r["address"]] = r["id"]
        return out

    # -- 4. containers and parents against the rows ----------------------------------------------
    def check_containers(self, nodes: list[_Node]) -> Company:
        """Every container declared (or to be declared); returns the company as it will be when writing."""
        by_container: dict[str, list[str]] = {}
        for n in nodes:
            by_container.setdefault(n.container, []).append(n.rel)
        declared = self.company.declared_containers()
        view = self.company
        for key in sorted(by_container):
            if key in declared:
                continue
            files = by_container[key]
            if not KEY_RE.match(key):
                self.problems.append(ImportProblem(
                    "invalid_space", f"'{key}' is not a valid space key (letters, digits, '_', '-', '.'; "
                    f"at most 64) — needed by {len(files)} file(s): {_listing(files)}",
                    "rename the directory, set `space:` in those files' frontmatter, or import with --into KEY",
                    files))
            elif self.declare_spaces:
                self.to_declare.append(key)
            else:
                self.problems.append(ImportProblem(
                    "not_declared",
                    f"space '{key}' is not declared — needed by {len(files)} file(s): {_listing(files)}",
                    f"declare it in {self.company.file} as [spaces.{key}] (name = \"…\"), or pass --declare-spaces "
                    "to declare every space the tree needs", files))
        if self.to_declare:
            spaces = {**self.company.spaces, **{k: Space(k, k, "declared by crewlet import") for k in self.to_declare}}
            view = replace(self.company, spaces=spaces)
        return view

    def load_existing(self, nodes: list[_Node]) -> dict[str, dict[str, Any]]:
        rows: dict[str, dict[str, Any]] = {}
        with self.kb.node.lock:
            for container in sorted({n.container for n in nodes}):
                rows[container] = {r["address"]: r for r in reads.in_container(self.kb.conn, container)}
        return rows

    def resolve_parents(self, nodes: list[_Node], existing: dict[str, dict[str, Any]]) -> None:
        def existing_parent(n: _Node, address: str) -> tuple[str | None, str]:
            row = existing.get(n.container, {}).get(address)
            if row is not None and row["trashed_at"] is None:
                return row["id"], ""
            return None, ("is in the trash" if row is not None else "is published by no file and is not a page there")

        self.link_parents(nodes, existing_parent)

    # -- 5. against the pages that exist -----------------------------------------------------------
    def match(self, nodes: list[_Node], existing: dict[str, dict[str, Any]], view: Company) -> None:
        may_create: dict[str, Refused | None] = {}
        may_save: dict[str, Refused | None] = {}
        forbidden: dict[tuple[str, str], list[str]] = {}

        def ask(cache: dict[str, Refused | None], container: str, check: Any) -> Refused | None:
            if container not in cache:
                try:
                    check()
                    cache[container] = None
                except Refused as exc:
                    cache[container] = exc
            return cache[container]

        def refuse(exc: Refused, rel: str) -> None:
            forbidden.setdefault((exc.code, str(exc)), []).append(rel)

        declared = view.declared_containers()
        ids = new_ids()
        for n in nodes:
            row = existing.get(n.container, {}).get(_address(n.title))
            n.row = row
            page = PlannedPage(n.kind, n.rel, n.container, n.title, n.body, list(n.labels))
            n.page = page
            if n.container not in declared:            # already a problem, named once for the space
                page.page_id = row["id"] if row is not None else next(ids)
                continue
            if row is None:
                page.action, page.page_id = "create", next(ids)
                exc = ask(may_create, n.container, lambda c=n.container: rules.may_create(view, self.who, c))
                if exc is not None:
                    refuse(exc, n.rel)
                continue
            page.page_id = row["id"]
            if row["trashed_at"] is not None:
                self.problems.append(ImportProblem(
                    "trashed", f"its page {row['container']}/{row['title']} is in the trash",
                    f"restore it (`crewlet page restore {row['id']}`) or purge it, then run again", [n.rel]))
                continue
            if n.kind != "folder" and n.body != row["body"]:
                page.changes.append("body")
                page.base_revision = row["revision"]
            if n.title != row["title"]:
                page.changes.append("title")
                try:
                    rules.may_rename(view, self.who, row)
                except Refused as exc:
                    refuse(exc, n.rel)
            if n.labels:
                have = set(json.loads(row["labels"] or "[]"))
                page.new_labels = [lab for lab in n.labels if lab not in have]
                if page.new_labels:
                    page.changes.append("labels")
            if page.changes:
                page.action = "update"
                exc = ask(may_save, n.container, lambda r=row: rules.may_save(view, self.who, r))
                if exc is not None:
                    refuse(exc, n.rel)
            else:
                page.action = "unchanged"
        for (code, message), files in forbidden.items():
            self.problems.append(ImportProblem(
                code or "forbidden", f"{message} ({len(files)} file(s): {_listing(files)})",
                "import as an actor who may (global --as HANDLE), or leave those files out", files))

    # -- 6. order: parents first -------------------------------------------------------------------
    def order(self, nodes: list[_Node]) -> list[_Node]:
        out = self.parents_first(nodes)
        for n in out:
            assert n.page is not None
            if n.page.action == "create":
                if n.parent_node is not None and n.parent_node.page is not None:
                    n.page.parent_id = n.parent_node.page.page_id
                    n.page.parent_title = n.parent_node.title
                elif n.parent_id is not None:
                    n.page.parent_id = n.parent_id
                    n.page.parent_title = n.parent_title
        return out

    # -- all of it ------------------------------------------------------------------------------
    def plan(self) -> ImportReport:
        sources = self.read(self.walk())
        docs = [n for n in (self.interpret(s) for s in sources) if n is not None]
        if self.into:
            skills = [n for n in docs if n.kind == "skill"]
            nodes = self.build_tree([n for n in docs if n.kind != "skill"]) + skills
        else:
            nodes = docs
        self.check_duplicates(nodes)
        view = self.check_containers(nodes)
        existing = self.load_existing(nodes)
        for n in nodes:
            n.row = existing.get(n.container, {}).get(_address(n.title))
        self.resolve_parents(nodes, existing)
        self.match(nodes, existing, view)
        ordered = self.order(nodes)
        self.report.pages = [n.page for n in ordered if n.page is not None]
        for n in ordered:                              # an unchanged page's notes were told when it was written
            if n.page is not None and n.page.action != "unchanged":
                self.notes.extend(n.notes)
        self.report.declared = list(self.to_declare)
        return self.report
