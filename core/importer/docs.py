"""Reading a directory of Markdown docs into a plan: what every importer shares, whichever backend it
publishes to (the native knowledge base, Confluence, Plane).

The walk (every .md file, dot-directories skipped, nothing skipped silently), each file read and its
frontmatter split off, its kind (a `trigger:` makes a tool skill, published to the skills container),
title (frontmatter `title:`, else the first `# ` H1, stripped from the body), labels and container (the
parent directory's name, frontmatter `space:` overriding it), the problems that stop a run before
anything is written (no title, two files publishing as one page, a `parent:` cycle, a file that is not
UTF-8 text…), the parents a run publishes itself, and the order (parents first). The backend's part —
which containers exist, which pages already do, what to write — is the caller's.
"""
from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..config import Actor, Company
from ..errors import Invalid
from ..pages.model import clean_title, normalise_title
from ..pages.service import check_title
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
    folder: _Node | None = None                  # its directory's folder page (tree layout)
    parent_node: _Node | None = None             # a parent published by this run
    parent_id: str | None = None                   # a parent that already exists
    row: Any = None                                # the existing page at its address
    page: PlannedPage | None = None
    notes: list[ImportNote] = field(default_factory=list)   # told when the page is created or updated
    cut: tuple[int, int] | None = None             # the H1 line stripped from the file's body (its span there)


# (node, the parent's address) -> (the existing parent's id, or None and why it cannot be the parent)
ParentLookup = Callable[[_Node, str], "tuple[str | None, str]"]


class DocPlanner:
    """The backend-independent half of an import plan (see the module's docstring)."""

    TREE_LAYOUT = True           # the importer offers --into KEY and --title-from-name (fixes a problem may name)
    read_ahead = False           # ask the kernel for a directory's files before reading them one by one

    def __init__(self, company: Company, root: Path, who: Actor, *, into: str | None = None,
                 title_from_name: bool = False, skills: str | None = None, mode: str | None = None) -> None:
        self.company = company
        self.root = root
        self.who = who
        self.into = into
        self.title_from_name = title_from_name
        self.report = ImportReport(root=str(root), mode=mode or ("tree" if into else "spaces"), into=into)
        self.problems = self.report.problems
        self.notes = self.report.notes
        self.nodes: list[_Node] = []
        self.skills = skills if skills is not None else company.knowledge.skills_container
        self.root_name = root.resolve().name

    # -- 1. the files -------------------------------------------------------------------------
    def walk(self) -> list[tuple[str, str]]:
        """(relative path, absolute path) of every .md file, dot-directories skipped, in path order."""
        return list(self.iter_files())

    def iter_files(self) -> Iterator[tuple[str, str]]:
        """`walk()`'s files one at a time, as the directories are listed (a plan that streams never holds
        the list). Nothing is skipped silently: a directory that cannot be listed is an `unreadable`
        problem, and a symlinked directory is not followed (a link can loop, or lead out of the tree) but
        named in a note."""
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
            found = [name for name in sorted(filenames) if name.lower().endswith(".md")]
            if self.read_ahead:
                read_ahead(os.path.join(dirpath, name) for name in found)
            for name in found:
                yield prefix + name, os.path.join(dirpath, name)

    def read(self, files: list[tuple[str, str]]) -> list[Source]:
        sources = [src for src in (self.read_one(rel, path) for rel, path in files) if src is not None]
        self.report.files = len(files)
        self.no_markdown_note()
        return sources

    def no_markdown_note(self) -> None:
        if not self.report.files and not self.problems:
            self.notes.append(ImportNote("no_markdown", f"no .md files under {self.root} (dot-directories are "
                                         "skipped): nothing to import"))

    def read_one(self, rel: str, path: str) -> Source | None:
        """One file read, decoded and its frontmatter split off; None (and the problem recorded) when it
        cannot be."""
        text = self.read_text(rel, path)
        if text is None:
            return None
        src, problem = split(rel, text)
        if problem is not None:
            self.problems.append(problem)
            return None
        return src

    def read_text(self, rel: str, path: str) -> str | None:
        """One file's text (UTF-8, line endings normalised); None (and the problem recorded) when it is not."""
        try:
            data = _read_regular(path)
            if data is None:
                self.problems.append(ImportProblem(
                    "not_a_file", "is not a regular file (a FIFO, socket or device named .md)",
                    "remove it from the tree, or rename it so it does not end in .md", [rel]))
                return None
        except OSError as exc:
            self.problems.append(ImportProblem("unreadable", f"cannot be read: {exc.strerror or exc}",
                                               "check the file's permissions, or remove it from the tree", [rel]))
            return None
        text, problem = decode(rel, data, self.company.limits.page_body_bytes)
        if problem is not None:
            self.problems.append(problem)
            return None
        return text

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
                    node.cut = (h1[1], h1[2])
                elif _address(titles.inline_to_plain(node.title)) == _address(h1[0]):
                    # the same title, the frontmatter's still holding Markdown escapes (`WM\_PALETTECHANGED`):
                    # they agree, and the page is titled as a reader sees it (find_h1's titles are clean)
                    node.title = h1[0]
                    body = titles.strip_line(body, h1[1], h1[2])
                    node.cut = (h1[1], h1[2])
                else:
                    node.notes.append(ImportNote(
                        "title_h1_differ", f"frontmatter title '{node.title}' and H1 '{h1[0]}' differ: the page is "
                        "titled by the frontmatter and the H1 stays in the body", [src.rel]))
        elif h1 is not None:
            node.title = h1[0]
            body = titles.strip_line(body, h1[1], h1[2])
            node.cut = (h1[1], h1[2])
        elif self.title_from_name:
            node.title = clean_title(parts[-1][:-3])
        else:
            self.problems.append(ImportProblem(
                "no_title", "has no title: no frontmatter `title:` and no `# ` H1",
                "add a `# Title` line (or `title:` to its frontmatter)"
                + (", or pass --title-from-name to use the file name" if self.TREE_LAYOUT else ""),
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

    # -- 3. two files, one page ------------------------------------------------------------------
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
                    + ("" if self.into or not self.TREE_LAYOUT else
                       ", or import the tree with --into KEY to keep each directory apart"),
                    files))

    # -- 4. parents ---------------------------------------------------------------------------------
    def link_parents(self, nodes: list[_Node], existing_parent: ParentLookup) -> None:
        """Each node's parent: a folder's (tree layout), a page the same run publishes (`parent:` by title
        in the same container), else the backend's existing page (`existing_parent(node, address)` answers
        its id, or None and why not — a note, and the page lands at the top, when it is to be created).
        A cycle of `parent:` fields is a problem naming the files."""
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
            found, why = existing_parent(n, address)
            if found is not None:
                n.parent_id = found
            elif n.row is None:
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

    # -- 5. order: parents first -------------------------------------------------------------------
    def parents_first(self, nodes: list[_Node]) -> list[_Node]:
        """The nodes with every run parent before its children (a cycle's nodes were unlinked)."""
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
        return out

    def docs(self) -> list[_Node]:
        """Walk, read and interpret: every file that makes a page (each problem recorded on the way)."""
        return [n for n in (self.interpret(s) for s in self.read(self.walk())) if n is not None]


def read_ahead(paths: Iterable[str]) -> None:
    """Ask the kernel to start reading these files now (posix_fadvise WILLNEED: it queues the reads and
    returns), so reading them one by one after finds them in memory: a tree on a disk that serves many
    reads at once is read at its speed, not one file's latency at a time. Best effort."""
    advise = getattr(os, "posix_fadvise", None)
    if advise is None:
        return
    for path in paths:
        try:
            fd = os.open(path, _OPEN_FLAGS)
        except OSError:
            continue
        try:
            advise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
        except OSError:
            pass
        finally:
            os.close(fd)


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
