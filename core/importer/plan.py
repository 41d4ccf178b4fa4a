"""Planning an import: every file read, routed, titled and matched against the pages that exist before
anything is written, so every problem is found (and named) at once — in a plan kept on disk (store.py),
so a tree of any size is planned in bounded memory.

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

The passes, each a walk over the plan's rows in order (nothing of the tree held in memory but the row at
hand and a few small caches):

1. scan — walk the tree, read each file, interpret it (docs.py), keep a row: kind, path, container,
   title, labels, `parent:`, a digest of its body (the body itself is read again when written);
   a folder row for each directory holding a file (the tree layout);
2. titles (the tree layout) — claim titles in path order, as described above;
3. duplicates and containers — two files publishing one page, a space that is not declared;
4. parents and the pages that exist — each row's existing page (by address), its parent (a row of this
   run, else an existing page), `parent:` cycles;
5. order and match — parents first; create, update or unchanged against the existing page; ids drawn in
   that order; the rules asked once per container. The result is the `plan` table, in write order.
"""
from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Iterator
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
from .docs import _MAX_LISTED, DocPlanner, _address, _listing, _Node
from .source import split
from .model import ImportNote, ImportProblem, ImportReport
from .store import PlanStore, key_of, rel_of, text

_new_ids = new_ids              # the bulk id source (a screenshot script fixes it)
FILES_KEPT = 1000               # files a grouped problem lists (its message counts them all)
_SKILL_POS = 1 << 40            # the tree layout plans skills after every node of the tree
_CACHE = 4096                   # rows of a small cache (folders, lookups) a pass keeps


def body_digest(body: str) -> bytes:
    """What the plan keeps of a body: the writer publishes a file only if it still reads as planned."""
    return hashlib.blake2b(body.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class _Lru(OrderedDict):
    def __init__(self, size: int | None = None) -> None:
        super().__init__()
        self.size = size or _CACHE

    def put(self, key: Any, value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        if len(self) > self.size:
            self.popitem(last=False)


class Planner(DocPlanner):
    """The native knowledge base's import plan: the tree layout (--into), declared spaces, the pages that
    exist (by address) and the rules that say who may write where."""

    read_ahead = True            # each file is read twice (planned, then written): both reads queue ahead

    def __init__(self, kb: KnowledgeBase, root: Path, who: Actor, *, into: str | None = None,
                 title_from_name: bool = False, declare_spaces: bool = False) -> None:
        super().__init__(kb.company, root, who, into=into, title_from_name=title_from_name)
        self.kb = kb
        self.declare_spaces = declare_spaces
        self.to_declare: list[str] = []
        self.store = PlanStore(kb.node.home.root)
        self.report.keep_plan(self.store)
        self._n = 0
        self._folders = _Lru()

    # -- reads of the home's pages (under the node's lock) -------------------------------------------
    def _home(self, sql: str, args: tuple[Any, ...]) -> Any:
        with self.kb.node.lock:
            return self.kb.conn.execute(sql, args).fetchone()

    def _at_address(self, container: str, address: str) -> Any:
        return self._home("SELECT id, trashed_at FROM pages WHERE container = ? AND address = ?", (container, address))

    # -- 1. the files ------------------------------------------------------------------------------
    def _add(self, node: _Node, *, folder: int | None, digest: bytes, pos: int | None, cut: str | None = None) -> int:
        self._n += 1
        n = self._n
        address = None if (self.into and node.kind != "skill") else _address(node.title)
        self.store.later(
            "INSERT INTO node (n, kind, key, depth, folder, container, title, address, labels, parent_title, digest, "
            "cut, pos) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (n, node.kind, key_of(node.rel), len(node.parts), folder, text(node.container), text(node.title), address,
             json.dumps(node.labels) if node.labels else None,
             text(node.parent_title) if node.parent_title is not None else None, digest, cut,
             pos if pos is not None else (_SKILL_POS + n if self.into else n)))
        for note in node.notes:
            self._note(n, note)
        return n

    def _note(self, n: int, note: ImportNote) -> None:
        self.store.execute("INSERT INTO note (n, code, message, files) VALUES (?,?,?,?)",
                           (n, note.code, text(note.message), json.dumps(note.files)))

    def _folder(self, parts: tuple[str, ...]) -> int | None:
        """The folder row of a directory (made, with its parents', the first time a file in it is met)."""
        if not parts:
            return None
        got = self._folders.get(parts)
        if got is not None:
            return got
        row = self.store.one("SELECT n FROM folder WHERE key = ?", (key_of("/".join(parts)),))
        if row is not None:
            self._folders.put(parts, row[0])
            return row[0]
        parent = self._folder(parts[:-1])
        rel = "/".join(parts)
        folder = _Node("folder", rel, parts, container=self.into or "", title=clean_title(parts[-1]))
        if not self._title_ok(folder.title, rel + "/"):
            folder.title = folder.title[:MAX_TITLE] or "(unnamed)"
        n = self._add(folder, folder=parent, digest=body_digest(""), pos=0)
        self.store.execute("INSERT INTO folder (key, n) VALUES (?, ?)", (key_of(rel), n))
        self._folders.put(parts, n)
        return n

    def scan(self) -> None:
        files = 0
        for rel, path in self.iter_files():
            files += 1
            file_text = self.read_text(rel, path)
            if file_text is None:
                continue
            src, problem = split(rel, file_text)
            if problem is not None:
                self.problems.append(problem)
                continue
            assert src is not None
            node = self.interpret(src)
            if node is None:
                continue
            folder = self._folder(node.parts[:-1]) if self.into and node.kind != "skill" else None
            # how the writer cuts the body out of the file again without parsing it (a skill's is rebuilt)
            cut = None
            if node.kind == "doc":
                at = len(file_text) - len(src.body)
                cut = json.dumps([at, *node.cut] if node.cut else [at])
            self._add(node, folder=folder, digest=body_digest(node.body), cut=cut,
                      pos=0 if self.into and node.kind != "skill" else None)
        self.store.flush()
        self.report.files = files
        self.no_markdown_note()

    def reread(self, rel: str, cut: str | None = None) -> str | None:
        """A file's body as the plan read it (None when it no longer reads as a page): what is written. With
        the plan's `cut` the body is cut out of the text where it was (the writer checks its digest); a
        skill's is read as at first."""
        problems, self.problems = self.problems, []
        try:
            if cut is not None:
                file_text = self.read_text(rel, str(self.root / rel))
                if file_text is None:
                    return None
                at, *h1 = json.loads(cut)
                body = file_text[at:]
                return titles.strip_line(body, h1[0], h1[1]) if h1 else body
            src = self.read_one(rel, str(self.root / rel))
            node = self.interpret(src) if src is not None else None
            return node.body if node is not None else None
        finally:
            self.problems = problems

    # -- 2. the tree layout: unique titles ---------------------------------------------------------------
    def _candidates(self, natural: str, rel: str, parts: tuple[str, ...],
                    held: Callable[[str], bool] | None = None) -> Iterator[str]:
        """The titles a node may take, in the order it tries them. With `held` (is an address held under
        its folder), the numbered ones are offered only while they are held: a gap ends the run, so a
        folder of thousands costs a handful of tries per file, not thousands."""
        parent_path = "/".join(parts[:-1])
        yield natural
        if parent_path:
            yield titles.fit(natural, f"({parent_path})")
        yield titles.fit(natural, f"({rel})")
        if held is None:
            return
        k = 2
        while True:
            numbered = titles.fit(natural, f"({rel}) {k}")
            if not held(_address(numbered)):
                return
            yield numbered
            k += 1

    def _claimed(self, address: str) -> bool:
        return self.store.one("SELECT 1 FROM claimed WHERE address = ?", (address,)) is not None

    def _claim(self, address: str) -> None:
        self.store.execute("INSERT OR IGNORE INTO claimed (address) VALUES (?)", (address,))

    def _unclaimed(self, title: str, rel: str) -> str:
        """The first of a node's candidate titles no node claimed yet, claimed now."""
        final = title
        if self._claimed(_address(title)):
            final = next((c for c in self._candidates(title, rel, tuple(rel.split("/")))
                          if not self._claimed(_address(c))), "")
            k = 2
            while not final:
                c = titles.fit(title, f"({rel}) {k}")
                final = c if not self._claimed(_address(c)) else ""
                k += 1
        self._claim(_address(final))
        return final

    def build_tree(self) -> None:
        """Titles unique across the space, claimed in path order (shallower first): first the nodes whose
        candidate title is held by an existing page under their own folder, then the rest."""
        # the order of the tree (shallower first, then by path); a pass updates rows, never this index
        self.store.execute("CREATE INDEX node_order ON node(depth, key)")
        into = self.into
        here_of = _Lru()                                    # folder n -> the existing page it claimed
        has_children = _Lru()                               # existing parent id -> does it hold pages

        def under(parent: str | None) -> bool:
            got = has_children.get(parent)
            if got is None:
                got = self._home("SELECT 1 FROM pages WHERE container = ? AND parent_id IS ? LIMIT 1",
                                 (into, parent)) is not None
                has_children.put(parent, got)
            return got

        def child(parent: str | None, address: str) -> str | None:
            row = self._home("SELECT id FROM pages WHERE container = ? AND parent_id IS ? AND address = ?",
                             (into, parent, address))
            return row[0] if row else None

        pos = 0
        # a space holding no page at all (a first import): no node can hold an existing page, so every one
        # claims its title in path order at once (the rest pass below, in the same walk)
        empty = self._home("SELECT 1 FROM pages WHERE container = ? LIMIT 1", (into,)) is None
        for n, key, folder, title in self.store.rows("SELECT n, key, folder, title FROM node WHERE kind != 'skill' "
                                                     "ORDER BY depth, key"):
            pos += 1
            rel = rel_of(key)
            if empty:
                final = self._unclaimed(title, rel)
                self.store.later("UPDATE node SET pos = ?, title = ?, natural = ?, address = ? WHERE n = ?",
                                 (pos, final, title if final != title else None, _address(final), n))
                continue
            parts = tuple(rel.split("/"))
            if folder is None:
                parent, known = None, True
            else:
                parent = here_of.get(folder)
                if parent is None:
                    parent = self.store.one("SELECT here FROM node WHERE n = ?", (folder,))[0] or ""
                    here_of.put(folder, parent)
                parent = parent or None
                known = parent is not None
            held = None
            if known and under(parent):
                for c in self._candidates(title, rel, parts, lambda a: child(parent, a) is not None):  # noqa: B023  called in this pass
                    address = _address(c)
                    page = child(parent, address)
                    if page is not None and not self._claimed(address):
                        held = (c, page)
                        break
            if held is None:
                self.store.later("UPDATE node SET pos = ?, state = 1 WHERE n = ?", (pos, n))
                continue
            self._claim(_address(held[0]))
            self.store.execute("UPDATE node SET pos = ?, title = ?, natural = ?, address = ?, here = ? WHERE n = ?",
                               (pos, held[0], title if held[0] != title else None, _address(held[0]), held[1], n))
        self.store.flush()
        self.store.execute("DROP INDEX node_order")
        self.store.execute("CREATE INDEX node_pos ON node(pos)")
        for n, key, title in self.store.rows("SELECT n, key, title FROM node WHERE state = 1 ORDER BY pos"):
            final = self._unclaimed(title, rel_of(key))
            self.store.later("UPDATE node SET title = ?, natural = ?, address = ?, state = 0 WHERE n = ?",
                             (final, title if final != title else None, _address(final), n))
        self.store.flush()
        for n, kind, key, natural, title in self.store.rows(
                "SELECT n, kind, key, natural, title FROM node WHERE natural IS NOT NULL ORDER BY pos"):
            self._note(n, ImportNote(
                "title_disambiguated", f"'{natural}' is already a title in {into} (titles are unique per "
                f"space): published as '{title}'", [rel_of(key) + ("/" if kind == "folder" else "")]))

    # -- 3. two files, one page; containers ------------------------------------------------------------
    def _files(self, sql: str, args: tuple[Any, ...]) -> tuple[list[str], int]:
        files = [rel_of(r[0]) for r in self.store.rows(sql + f" LIMIT {FILES_KEPT}", args)]
        return files, len(files)

    def check_duplicates(self, nodes: Any = None) -> None:
        for container, address, count in list(self.store.rows(
                "SELECT container, address, count(*) FROM node GROUP BY container, address HAVING count(*) > 1")):
            files, _ = self._files("SELECT key FROM node WHERE container = ? AND address = ? ORDER BY pos",
                                   (container, address))
            title = self.store.one("SELECT title FROM node WHERE container = ? AND address = ? ORDER BY pos LIMIT 1",
                                   (container, address))[0]
            self.problems.append(ImportProblem(
                "duplicate", f"{count} files would publish as the same page {container}/{title}: "
                f"{_listing_of(files, count)}",
                "give all but one a different `title:` (or H1), or a different `space:`"
                + ("" if self.into or not self.TREE_LAYOUT else
                   ", or import the tree with --into KEY to keep each directory apart"),
                files))

    def check_containers(self) -> Company:
        """Every container declared (or to be declared); returns the company as it will be when writing."""
        declared = self.company.declared_containers()
        view = self.company
        for key, count in list(self.store.rows("SELECT container, count(*) FROM node GROUP BY container "
                                               "ORDER BY container")):
            if key in declared:
                continue
            if not KEY_RE.match(key):
                files, _ = self._files("SELECT key FROM node WHERE container = ? ORDER BY pos", (key,))
                self.problems.append(ImportProblem(
                    "invalid_space", f"'{key}' is not a valid space key (letters, digits, '_', '-', '.'; "
                    f"at most 64) — needed by {count} file(s): {_listing_of(files, count)}",
                    "rename the directory, set `space:` in those files' frontmatter, or import with --into KEY",
                    files))
            elif self.declare_spaces:
                self.to_declare.append(key)
            else:
                files, _ = self._files("SELECT key FROM node WHERE container = ? ORDER BY pos", (key,))
                self.problems.append(ImportProblem(
                    "not_declared",
                    f"space '{key}' is not declared — needed by {count} file(s): {_listing_of(files, count)}",
                    f"declare it in {self.company.file} as [spaces.{key}] (name = \"…\"), or pass --declare-spaces "
                    "to declare every space the tree needs", files))
        if self.to_declare:
            spaces = {**self.company.spaces, **{k: Space(k, k, "declared by crewlet import") for k in self.to_declare}}
            view = replace(self.company, spaces=spaces)
        return view

    # -- 4. parents, and the pages that exist ----------------------------------------------------------
    def resolve_parents(self) -> None:
        """Each row's existing page (by address) and its parent: a folder's (the tree layout), a row of this
        run (`parent:` by title in the same container, the first in planning order), else an existing page
        (a note, and the page lands at the top, when there is none to be had). Then `parent:` cycles."""
        linked = 0
        empty: dict[str, bool] = {}                    # containers holding no page at all: nothing to look up
        for n, kind, container, address, parent_title, folder in self.store.rows(
                "SELECT n, kind, container, address, parent_title, folder FROM node ORDER BY pos"):
            if container not in empty:
                empty[container] = self._home("SELECT 1 FROM pages WHERE container = ? LIMIT 1", (container,)) is None
            row = None if empty[container] else self._at_address(container, address)
            sets: dict[str, Any] = {}
            if row is not None:
                sets["row_id"] = row[0]
            if kind != "folder" and folder is None and parent_title is not None:
                paddress = _address(parent_title)
                run_parent = self.store.one("SELECT n FROM node WHERE container = ? AND address = ? ORDER BY pos "
                                            "LIMIT 1", (container, paddress))
                if run_parent is not None:
                    sets["parent_n"] = run_parent[0]
                    self.store.execute("UPDATE node SET is_parent = 1 WHERE n = ?", (run_parent[0],))
                    linked += 1
                else:
                    prow = self._at_address(container, paddress)
                    if prow is not None and prow[1] is None:
                        sets["parent_id"] = prow[0]
                    elif row is None:
                        why = ("is in the trash" if prow is not None
                               else "is published by no file and is not a page there")
                        rel = rel_of(self.store.one("SELECT key FROM node WHERE n = ?", (n,))[0])
                        self._note(n, ImportNote(
                            "parent_missing", f"parent '{parent_title}' {why}: the page lands at the top of "
                            f"{container}", [rel]))
            if sets:
                self.store.execute(f"UPDATE node SET {', '.join(k + ' = ?' for k in sets)} WHERE n = ?",
                                   (*sets.values(), n))
        if linked:
            self._cycles()

    def _cycles(self) -> None:
        """A cycle of `parent:` fields (a self-parent included) stops the run; each row has one parent, so one
        walk up from every row not yet seen finds every cycle in linear time (state 2: seen)."""
        on_cycle: list[int] = []
        for (start,) in self.store.rows("SELECT n FROM node WHERE parent_n IS NOT NULL ORDER BY pos"):
            path: list[int] = []
            on_path: set[int] = set()
            cur: int | None = start
            while cur is not None and cur not in on_path:
                row = self.store.one("SELECT state, parent_n FROM node WHERE n = ?", (cur,))
                if row[0] == 2:
                    break
                on_path.add(cur)
                path.append(cur)
                cur = row[1]
            if cur is not None and cur in on_path:
                cycle = path[path.index(cur):]
                members = [self.store.one("SELECT key, parent_title FROM node WHERE n = ?", (c,)) for c in cycle]
                chain = " → ".join(f"{rel_of(k)} (parent: {pt})" for k, pt in members)
                self.problems.append(ImportProblem(
                    "parent_cycle", f"`parent:` fields make a cycle: {chain}",
                    "remove `parent:` from one of them (or point it elsewhere)", [rel_of(k) for k, _ in members]))
                on_cycle.extend(cycle)
            self.store.executemany("UPDATE node SET state = 2 WHERE n = ?", ((p,) for p in path))
        # a node on a cycle has no run parent to wait for
        self.store.executemany("UPDATE node SET parent_n = NULL WHERE n = ?", ((c,) for c in on_cycle))
        self.store.execute("UPDATE node SET state = 0 WHERE state = 2")

    # -- 5. order (parents first) and the match against the pages that exist -------------------------------
    _ROW = ("n, pos, kind, key, container, title, labels, digest, row_id, parent_n, folder, parent_id, parent_title, "
            "is_parent, cut")

    def _order(self) -> Iterator[tuple[Any, ...]]:
        """Every row (its _ROW columns), parents before their children: in planning order, a row whose parent
        comes later is preceded by its chain of parents not yet given (marked state 3, so they are not given
        twice)."""
        pulled_to = 0                                   # the latest planning position given early
        columns = ", ".join(f"c.{c.strip()}" for c in self._ROW.split(","))
        for row in self.store.rows(f"SELECT {columns}, p.pos FROM node c "
                                   "LEFT JOIN node p ON p.n = coalesce(c.parent_n, c.folder) ORDER BY c.pos"):
            n, pos, parent_pos = row[0], row[1], row[-1]
            if pos <= pulled_to and self.store.one("SELECT state FROM node WHERE n = ?", (n,))[0] == 3:
                continue
            if parent_pos is None or parent_pos < pos:
                yield row[:-1]
                continue
            chain = [row[:-1]]
            cur = row[9] if row[9] is not None else row[10]
            while cur is not None:
                got = self.store.one(f"SELECT {self._ROW}, state FROM node WHERE n = ?", (cur,))
                if got[-1] == 3 or got[1] < pos:
                    break
                chain.append(got[:-1])
                self.store.execute("UPDATE node SET state = 3 WHERE n = ?", (cur,))
                pulled_to = max(pulled_to, got[1])
                cur = got[9] if got[9] is not None else got[10]
            yield from reversed(chain)

    def match(self, view: Company) -> None:
        declared = view.declared_containers()
        may_create: dict[str, Refused | None] = {}
        may_save: dict[str, Refused | None] = {}
        forbidden: dict[tuple[str, str], list[Any]] = {}     # (code, message) -> [first files, count]

        def ask(cache: dict[str, Refused | None], container: str, check: Any) -> Refused | None:
            if container not in cache:
                try:
                    check()
                    cache[container] = None
                except Refused as exc:
                    cache[container] = exc
            return cache[container]

        def refuse(exc: Refused, rel: str) -> None:
            got = forbidden.setdefault((exc.code, str(exc)), [[], 0])
            if len(got[0]) < FILES_KEPT:
                got[0].append(rel)
            got[1] += 1

        ids = _new_ids()
        parents = _Lru()                                  # n -> (page id, title) of rows others hang under
        insert = ("INSERT INTO plan (ord, n, kind, source, container, title, labels, page_id, action, changes, "
                  "parent_id, parent_title, base_revision, new_labels, digest, cut) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")
        for ordinal, (n, _pos, kind, key, container, title, labels_json, digest, row_id, parent_n, folder, parent_id,
                      parent_title, is_parent, cut) in enumerate(self._order(), start=1):
            rel = rel_of(key)
            labels = json.loads(labels_json) if labels_json else []
            row = None
            if row_id is not None:
                with self.kb.node.lock:
                    row = reads.by_id(self.kb.conn, [row_id], reads.PLAN_COLUMNS).get(row_id)
            action, page_id, changes, base, new_labels = "create", None, [], None, []
            up_id = up_title = None
            if container not in declared:             # already a problem, named once for the space
                page_id = row["id"] if row is not None else next(ids)
            elif row is None:
                page_id = next(ids)
                refusal = ask(may_create, container, lambda c=container: rules.may_create(view, self.who, c))
                if refusal is not None:
                    refuse(refusal, rel)
                up = parent_n if parent_n is not None else folder
                if up is not None:
                    got = parents.get(up) or self.store.one("SELECT here, title FROM node WHERE n = ?", (up,))
                    up_id, up_title = got
                elif parent_id is not None:
                    up_id, up_title = parent_id, parent_title
            else:
                page_id = row["id"]
                if row["trashed_at"] is not None:
                    self.problems.append(ImportProblem(
                        "trashed", f"its page {row['container']}/{row['title']} is in the trash",
                        f"restore it (`crewlet page restore {row['id']}`) or purge it, then run again", [rel]))
                else:
                    if kind != "folder" and body_digest(row["body"]) != digest:
                        changes.append("body")
                        base = row["revision"]
                    if title != row["title"]:
                        changes.append("title")
                        try:
                            rules.may_rename(view, self.who, row)
                        except Refused as exc:
                            refuse(exc, rel)
                    if labels:
                        have = set(json.loads(row["labels"] or "[]"))
                        new_labels = [lab for lab in labels if lab not in have]
                        if new_labels:
                            changes.append("labels")
                    if changes:
                        action = "update"
                        refusal = ask(may_save, container, lambda r=row: rules.may_save(view, self.who, r))
                        if refusal is not None:
                            refuse(refusal, rel)
                    else:
                        action = "unchanged"
            if kind == "folder" or is_parent:
                # a row others hang under: its page id, for theirs (a folder's is kept on its row)
                parents.put(n, (page_id, title))
                self.store.execute("UPDATE node SET here = ? WHERE n = ?", (page_id, n))
            self.store.later(insert, (ordinal, n, kind, rel, container, title, labels_json, page_id, action,
                                        json.dumps(changes) if changes else None, up_id, up_title, base,
                                        json.dumps(new_labels) if new_labels else None, digest, cut))
            if action != "unchanged":
                for code, message, files in self.store.rows(
                        "SELECT code, message, files FROM note WHERE n = ? ORDER BY rowid", (n,)):
                    self.notes.append(ImportNote(code, message, json.loads(files)))
        self.store.flush()
        for (code, message), (files, count) in forbidden.items():
            self.problems.append(ImportProblem(
                code or "forbidden", f"{message} ({count} file(s): {_listing_of(files, count)})",
                "import as an actor who may (global --as HANDLE), or leave those files out", files))

    # -- all of it ------------------------------------------------------------------------------
    def plan(self) -> ImportReport:
        timings = self.report.timings
        started = _clock()
        self.scan()
        timings["plan.scan"] = _clock() - started
        if self.into:
            self.build_tree()
        else:
            self.store.execute("CREATE INDEX node_pos ON node(pos)")
        self.store.execute("CREATE INDEX node_address ON node(container, address)")
        timings["plan.titles"] = _clock() - started - timings["plan.scan"]
        self.check_duplicates()
        view = self.check_containers()
        self.resolve_parents()
        self.match(view)
        timings["plan.match"] = _clock() - started - timings["plan.scan"] - timings["plan.titles"]
        self.report.declared = list(self.to_declare)
        return self.report


def _listing_of(files: list[str], count: int) -> str:
    """`_listing` of a group whose first FILES_KEPT files are kept: the first few named, the rest counted."""
    if count == len(files):
        return _listing(files)
    shown = files[:_MAX_LISTED]
    return ", ".join(shown) + f" and {count - len(shown)} more"


def _clock() -> float:
    import time

    return time.perf_counter()
