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
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..config import KEY_RE, Actor, Company, Space
from ..errors import Invalid, Refused
from ..pages import rules
from ..pages.model import MAX_TITLE, clean_title, normalise_title
from ..pages import reads
from ..pages.records import new_ids
from ..pages.service import KnowledgeBase, check_title
from . import titles
from .model import ImportNote, ImportProblem, ImportReport, PlannedPage
from .source import Source, decode, split

# a title's address, computed once per distinct title (a plan asks for each title's several times over)
_address = lru_cache(maxsize=1 << 16)(normalise_title)
_MAX_LISTED = 5                                    # files named in one grouped problem before "and N more"


def _listing(files: list[str]) -> str:
    shown = ", ".join(files[:_MAX_LISTED])
    return shown + (f" and {len(files) - _MAX_LISTED} more" if len(files) > _MAX_LISTED else "")


@dataclass(eq=False, slots=True)
class _Node:
    kind: str                                      # doc | skill | folder
    rel: str                                       # '/'-separated, relative to the root
    parts: tuple[str, ...]
    container: str = ""
    title: str = ""
    body: str = ""
    labels: list[str] = field(default_factory=list)
    parent_title: str | None = None                # frontmatter parent: (spaces layout, skills)
    folder: "_Node | None" = None                  # its directory's folder page (tree layout)
    parent_node: "_Node | None" = None             # a parent published by this run
    parent_id: str | None = None                   # a parent that already exists
    row: Any = None                                # the existing page at its address
    page: PlannedPage | None = None
    notes: list[ImportNote] = field(default_factory=list)   # told when the page is created or updated


class Planner:
    def __init__(self, kb: KnowledgeBase, root: Path, who: Actor, *, into: str | None = None,
                 title_from_name: bool = False, declare_spaces: bool = False) -> None:
        self.kb = kb
        self.company: Company = kb.company
        self.root = root
        self.who = who
        self.into = into
        self.title_from_name = title_from_name
        self.declare_spaces = declare_spaces
        self.report = ImportReport(root=str(root), mode="tree" if into else "spaces", into=into)
        self.problems = self.report.problems
        self.notes = self.report.notes
        self.nodes: list[_Node] = []
        self.to_declare: list[str] = []
        self.skills = self.company.knowledge.skills_container
        self.root_name = root.resolve().name

    # -- 1. the files -------------------------------------------------------------------------
    def walk(self) -> list[tuple[str, str]]:
        """(relative path, absolute path) of every .md file, dot-directories skipped, in path order.

        Nothing is skipped silently: a directory that cannot be listed is an `unreadable` problem, and a
        symlinked directory is not followed (a link can loop, or lead out of the tree) but named in a note."""
        found: list[tuple[str, str]] = []
        root = str(self.root)

        def rel_of(path: str) -> str:
            rel = os.path.relpath(path, root)
            return "." if rel == "." else rel.replace(os.sep, "/")

        def unlisted(exc: OSError) -> None:
            where = rel_of(exc.filename) if exc.filename else "."
            self.problems.append(ImportProblem(
                "unreadable", f"directory cannot be read: {exc.strerror or exc}",
                "check the directory's permissions, or remove it from the tree", [where + "/"]))

        for dirpath, dirnames, filenames in os.walk(root, onerror=unlisted):
            reldir = os.path.relpath(dirpath, root)
            prefix = "" if reldir == "." else reldir.replace(os.sep, "/") + "/"
            kept = []
            for d in sorted(dirnames):
                if d.startswith("."):
                    continue
                if os.path.islink(os.path.join(dirpath, d)):
                    self.notes.append(ImportNote(
                        "symlink_skipped", "is a symbolic link to a directory: not followed (import the directory "
                        "it points to on its own, or copy it into the tree)", [prefix + d + "/"]))
                    continue
                kept.append(d)
            dirnames[:] = kept
            for name in sorted(filenames):
                if name.lower().endswith(".md"):
                    found.append((prefix + name, os.path.join(dirpath, name)))
        return found

    def read(self, files: list[tuple[str, str]]) -> list[Source]:
        sources: list[Source] = []
        for rel, path in files:
            try:
                data = _read_regular(path)
                if data is None:
                    self.problems.append(ImportProblem(
                        "not_a_file", "is not a regular file (a FIFO, socket or device named .md)",
                        "remove it from the tree, or rename it so it does not end in .md", [rel]))
                    continue
            except OSError as exc:
                self.problems.append(ImportProblem("unreadable", f"cannot be read: {exc.strerror or exc}",
                                                   "check the file's permissions, or remove it from the tree", [rel]))
                continue
            text, problem = decode(rel, data)
            if problem is not None:
                self.problems.append(problem)
                continue
            assert text is not None
            src, problem = split(rel, text)
            if problem is not None:
                self.problems.append(problem)
                continue
            assert src is not None
            sources.append(src)
        self.report.files = len(files)
        if not files and not self.problems:
            self.notes.append(ImportNote("no_markdown", f"no .md files under {self.root} (dot-directories are "
                                         "skipped): nothing to import"))
        return sources

    # -- 2. one file: kind, title, body, labels, container ------------------------------------------
    def _scalar(self, src: Source, key: str) -> str | None:
        value = src.frontmatter.get(key)
        if value is None or isinstance(value, (list, dict)):
            if isinstance(value, (list, dict)):
                self.problems.append(ImportProblem(
                    "bad_frontmatter", f"frontmatter `{key}:` is a {type(value).__name__}, not text",
                    f"write `{key}:` as a single value", [src.rel]))
            return None
        text = str(value).strip()
        return text or None

    def _labels(self, src: Source, node: _Node) -> list[str]:
        raw = src.frontmatter.get("labels")
        if raw is None:
            return []
        items: list[Any]
        if isinstance(raw, str):
            items = raw.split(",")
        elif isinstance(raw, list):
            items = raw
        else:
            node.notes.append(ImportNote("label_ignored", f"`labels:` is a {type(raw).__name__}, not a list: "
                                         "no labels attached", [src.rel]))
            return []
        out: set[str] = set()
        for item in items:
            if isinstance(item, (list, dict)) or item is None:
                node.notes.append(ImportNote("label_ignored", f"label {item!r} is not a word: not attached", [src.rel]))
                continue
            label = str(item).strip().lower()
            if label:
                out.add(label)
        return sorted(out)

    def interpret(self, src: Source) -> _Node | None:
        parts = tuple(src.rel.split("/"))
        skill = "trigger" in src.frontmatter
        node = _Node("skill" if skill else "doc", src.rel, parts)
        fm_title = self._scalar(src, "title")
        space = self._scalar(src, "space")
        node.parent_title = self._scalar(src, "parent")
        node.labels = self._labels(src, node)
        body = src.body
        h1 = titles.find_h1(body)
        if fm_title is not None:
            node.title = clean_title(fm_title)
            if h1 is not None:
                if _address(h1[0]) == _address(node.title):
                    body = titles.strip_line(body, h1[1], h1[2])     # it would repeat the title on the page
                elif _address(titles.inline_to_plain(node.title)) == _address(h1[0]):
                    # the same title, the frontmatter's still holding Markdown escapes (`WM\_PALETTECHANGED`):
                    # they agree, and the page is titled as a reader sees it (find_h1's titles are clean)
                    node.title = h1[0]
                    body = titles.strip_line(body, h1[1], h1[2])
                else:
                    node.notes.append(ImportNote(
                        "title_h1_differ", f"frontmatter title '{node.title}' and H1 '{h1[0]}' differ: the page is "
                        "titled by the frontmatter and the H1 stays in the body", [src.rel]))
        elif h1 is not None:
            node.title = h1[0]
            body = titles.strip_line(body, h1[1], h1[2])
        elif self.title_from_name:
            node.title = clean_title(parts[-1][:-3])
        else:
            self.problems.append(ImportProblem(
                "no_title", "has no title: no frontmatter `title:` and no `# ` H1",
                "add a `# Title` line (or `title:` to its frontmatter), or pass --title-from-name to use the file name",
                [src.rel]))
            return None
        if not self._title_ok(node.title, src.rel):    # every title above is clean_title's already
            return None
        if skill:
            node.container = self.skills
            if space is not None and space != self.skills:
                node.notes.append(ImportNote("space_ignored", f"a tool skill (it has `trigger:`) is published to "
                                             f"{self.skills}; `space: {space}` is ignored", [src.rel]))
            node.body = _skill_body(src.fm_text or "", body)
        else:
            node.body = body
            if self.into:
                node.container = self.into
                if space is not None:
                    node.notes.append(ImportNote("space_ignored", f"--into {self.into} keeps the tree in one space: "
                                                 f"`space: {space}` is ignored", [src.rel]))
                if node.parent_title is not None:
                    node.notes.append(ImportNote("parent_ignored", f"--into {self.into} nests a page under its "
                                                 f"directory: `parent: {node.parent_title}` is ignored", [src.rel]))
                    node.parent_title = None
            else:
                node.container = space if space is not None else (parts[-2] if len(parts) > 1 else self.root_name)
        return node

    def _title_ok(self, title: str, rel: str) -> bool:
        """The engine's own rule (`check_title`), so the importer and the engine never disagree."""
        try:
            check_title(title)
        except Invalid as exc:
            message, _, fix = str(exc).partition(" — ")
            self.problems.append(ImportProblem("invalid_title", message, fix or "correct the title", [rel]))
            return False
        return True

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

    # -- 4. duplicates, containers, parents ------------------------------------------------------
    def check_duplicates(self, nodes: list[_Node]) -> None:
        seen: dict[tuple[str, str], list[_Node]] = {}
        for n in nodes:
            seen.setdefault((n.container, _address(n.title)), []).append(n)
        for (container, _), group in seen.items():
            if len(group) > 1:
                files = [g.rel for g in group]
                self.problems.append(ImportProblem(
                    "duplicate", f"{len(group)} files would publish as the same page {container}/{group[0].title}: "
                    f"{_listing(files)}",
                    "give all but one a different `title:` (or H1), or a different `space:`"
                    + ("" if self.into else ", or import the tree with --into KEY to keep each directory apart"),
                    files))

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
        by_address: dict[tuple[str, str], _Node] = {}
        for n in nodes:
            by_address.setdefault((n.container, _address(n.title)), n)
        for n in nodes:
            if n.kind == "folder" or (n.folder is not None):
                n.parent_node = n.folder
                continue
            if n.parent_title is None:
                continue
            address = _address(n.parent_title)
            run_parent = by_address.get((n.container, address))
            if run_parent is not None:
                n.parent_node = run_parent
                continue
            row = existing.get(n.container, {}).get(address)
            if row is not None and row["trashed_at"] is None:
                n.parent_id = row["id"]
            elif n.row is None:
                why = "is in the trash" if row is not None else "is published by no file and is not a page there"
                n.notes.append(ImportNote(
                    "parent_missing", f"parent '{n.parent_title}' {why}: the page lands at the top of {n.container}",
                    [n.rel]))
        # a cycle of parent: fields (a self-parent included) stops the run; each page has one parent, so one
        # walk up from every page not yet seen finds every cycle in linear time
        reported: set[frozenset[str]] = set()
        state: dict[int, int] = {}                     # 1: on the walk being made, 2: seen
        for n in nodes:
            path: list[_Node] = []
            cur: _Node | None = n
            while cur is not None and id(cur) not in state:
                state[id(cur)] = 1
                path.append(cur)
                cur = cur.parent_node
            if cur is not None and state[id(cur)] == 1:
                cycle = path[path.index(cur):]
                reported.add(frozenset(c.rel for c in cycle))
                chain = " → ".join(f"{c.rel} (parent: {c.parent_title})" for c in cycle)
                self.problems.append(ImportProblem(
                    "parent_cycle", f"`parent:` fields make a cycle: {chain}",
                    "remove `parent:` from one of them (or point it elsewhere)", [c.rel for c in cycle]))
            for p in path:
                state[id(p)] = 2
        on_cycle = set().union(*reported) if reported else set()
        for n in nodes:                                # a node on a cycle has no run parent to wait for
            if n.rel in on_cycle:
                n.parent_node = None

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
        out: list[_Node] = []
        done: set[int] = set()
        for n in nodes:
            chain: list[_Node] = []
            cur: _Node | None = n
            while cur is not None and id(cur) not in done:
                chain.append(cur)
                done.add(id(cur))
                cur = cur.parent_node
            out.extend(reversed(chain))
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


# O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then says what was opened
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)


def _read_regular(path: str) -> bytes | None:
    """The bytes of a regular file, None for anything else. Plain descriptor calls: a file object (its
    buffer, its own fstat and a second read to find the end) costs more than the read of a page; a read
    of the size fstat gave, plus one byte, ends it unless the file changed size meanwhile."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        size = st.st_size
        data = os.read(fd, size + 1)
        if len(data) != size:                          # grown, shrunk or a short read: read to the end
            chunks = [data]
            while data:
                data = os.read(fd, max(size, 1 << 16))
                chunks.append(data)
            data = b"".join(chunks)
        return data
    finally:
        os.close(fd)


def _skill_body(fm_text: str, body: str) -> str:
    """A tool skill's page keeps its binding metadata: the frontmatter as a ```yaml block, then the body."""
    fence = "```"
    while fence in fm_text:
        fence += "`"
    meta = fm_text if fm_text.endswith("\n") or not fm_text else fm_text + "\n"
    return f"{fence}yaml\n{meta}{fence}\n\n{body}"
