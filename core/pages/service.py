"""The knowledge base as callers use it: commands become records, queries read rows.

The CLI, the app and the importer all go through this one class, so a rule holds everywhere.
"""
from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
from dataclasses import dataclass
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..config import Actor, remote_site
from ..errors import CrewletError, Invalid, NoPage, NotFound, Refused, StaleRevision
from ..log import LogDamage, Record
from ..clock import now_ms
from . import reads, records, rules
from .records import REAPER, new_id
from ..replica.appliers import Decision
from .applier import parent_problem
from .containers import container_key, unknown_container
from ..sections.pages import sizes_in_words
from .model import (LINE_BREAK_RE, MAX_BODY_BYTES, MAX_TITLE, WINDOW_MAX, Comment, Page, Revision, Window, clean_title,
                    line_diff, normalise_title, title_problem)

if TYPE_CHECKING:
    from ..paths import Home

TRASH_TERM_MS = 30 * 24 * 3600 * 1000
REAP_PASS_MAX = 1000
# the current revision's body lives in the page row (see handlers._add_revision)
REVISION_SQL = ("SELECT r.page_id, r.revision, r.title, COALESCE(r.body, p.body) AS body, r.author, r.at, r.kind, "
                "r.message FROM revisions r JOIN pages p ON p.id = r.page_id")


def check_title(title: str) -> str:
    """The title a page will have (cleaned), or the one-line refusal of one no page may have: empty, too
    long, holding a line break, or holding a character no title may hold. The importer plans by this same rule."""
    inner = title.strip()
    if LINE_BREAK_RE.search(inner):    # cleaning would fold it into a space: said, not silently changed
        raise Invalid(title_problem(inner) or "a title is one line — remove the line break", code="invalid_title")
    cleaned = clean_title(title)
    if not cleaned:
        raise Invalid("a page needs a title — give it one", code="invalid_title")
    if len(cleaned) > MAX_TITLE:
        raise Invalid(f"a title is at most {MAX_TITLE} characters (this one has {len(cleaned)}) — shorten it",
                      code="invalid_title")
    problem = title_problem(cleaned)
    if problem:
        raise Invalid(problem, code="invalid_title")
    return cleaned


def _check_size(text: str, limit: int, *, what: str, setting: str, fix: str, code: str) -> None:
    """Refuse a text past its bound ([limits] in company.toml), naming the bound and the setting. Counted in
    UTF-8 bytes, what the log and the database hold; a text of no more characters than the bound has
    bytes is under it, so the common case costs no encoding."""
    if len(text) <= limit // 4:
        return
    size = len(text.encode("utf-8"))
    if size > limit:
        said, bound = sizes_in_words(size, limit)
        raise Invalid(f"{what} is at most {bound} (limits.{setting}); this one is {said} — {fix}",
                      code=code, limit=limit, size=size)


def _check_body(body: str, limit: int = MAX_BODY_BYTES) -> None:
    _check_size(body, min(limit, MAX_BODY_BYTES), what="a page body", setting="page_body_bytes",
                fix="split it into several pages", code="body_too_large")


def _check_comment(text: str, limit: int) -> None:
    _check_size(text, limit, what="a comment", setting="comment_bytes",
                fix="shorten it, or put the detail in a page and link it", code="comment_too_large")


def _require_trashed(row: Any, fix: str) -> None:
    """Restore and purge act on a page in the trash: refused before anything is appended otherwise (the
    applier decides again from the log, for a trash or restore that lands in between)."""
    if row["trashed_at"] is None:
        raise Refused(f"{row['container']}/{row['title']} is not in the trash — {fix}", code="not_trashed")


def _encode_cursor(address: str, page_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([address, page_id]).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[str, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        address, page_id = json.loads(base64.urlsafe_b64decode(padded.encode()))
        return str(address), str(page_id)
    except Exception:
        raise Invalid(f"cursor '{cursor}' is not one a listing gave — pass the next_cursor of the previous window",
                      code="invalid_cursor") from None


@dataclass
class ReapReport:
    purged: int
    refused: int
    passes: int


class Writer(Protocol):
    """What the knowledge base needs of a node (core.node.Node is the one): its home (for rescued texts),
    its configuration, its database under its lock, and `submit`, which appends records to the pages log
    and returns what the applier decided for each."""

    home: Home
    company: Any
    conn: Any
    lock: Any

    def refresh_config(self) -> None: ...

    # the importer's, after it declared the spaces it brings: company.toml read again, a container per space
    def reload_config(self) -> None: ...

    def sync_containers(self) -> int: ...

    def submit(self, records: Sequence[Record], *, sync: bool = True, bulk: bool = False) -> list[Decision]: ...

    def submit_one(self, record: Record) -> Decision: ...


class KnowledgeBase:
    def __init__(self, node: Writer) -> None:
        self.node = node

    @property
    def conn(self) -> Any:
        return self.node.conn

    @property
    def company(self) -> Any:
        """The configuration current at each write: a long-running app sees an edited company.toml."""
        self.node.refresh_config()
        return self.node.company

    def actor(self, handle: str | None) -> Actor:
        """Who writes (`handle`, else the operator): `rules.acting`, against the configuration current now."""
        return rules.acting(self.company, handle)

    def writer(self, handle: str | None) -> Actor:
        """Who writes a page or a comment (`actor`), refused first when the company's knowledge lives on a
        remote site (knowledge.backend): a page written here would be kept where no search reads it."""
        site = remote_site(self.company)
        if site is not None:
            raise site.refusal(write=True)
        return self.actor(handle)

    def reader(self, handle: str | None) -> Actor:
        """Who reads (`handle`, else the operator), refused unless they hold the knowledge app. Every
        read of pages asks this itself, so no caller (CLI, app, agent runtime) can forget to."""
        return rules.acting(self.company, handle, knowledge=True)

    # -- resolving pages ---------------------------------------------------------------------
    def _row(self, ref: str, *, allow_trashed: bool = True) -> Any:
        with self.node.lock:
            row = self.conn.execute("SELECT * FROM pages WHERE id = ?", (ref,)).fetchone()
            if row is None and "/" in ref:
                container, title = ref.split("/", 1)
                container = container_key(self.conn, self.company, container)   # `eng/…` is ENG's, as `ENG/…` is
                row = self.conn.execute("SELECT * FROM pages WHERE container = ? AND address = ?",
                                        (container, normalise_title(title))).fetchone()
            if row is None:
                marker = self.conn.execute("SELECT * FROM deleted_pages WHERE page_id = ?", (ref,)).fetchone()
                if marker:
                    raise NotFound(f"page {ref} ('{marker['title']}') was purged by {marker['purged_by']}", code="purged")
                # the fact: each surface adds where to look (its own command or tool)
                missing: CrewletError = NoPage.of(ref)
                if "/" in ref and unknown_container(self.conn, self.company, container) is not None:
                    # the space is the typo, not the title: listing its pages would only say there is no space
                    missing = missing.with_note(f": there is no space '{container}'", space_unknown=True)
                raise missing
        if row["trashed_at"] is not None and not allow_trashed:
            raise Refused(f"{row['container']}/{row['title']} is in the trash — restore it first", code="trashed")
        return row

    def container_key(self, key: str) -> str:
        """The container a key names, its case folded to the declared key's (`eng` is ENG): containers.container_key."""
        with self.node.lock:
            return container_key(self.conn, self.company, key)

    def _parent_id(self, parent: str, fix: str) -> str:
        try:
            return self._row(parent)["id"]
        except NotFound:
            raise Refused(f"parent_id {parent} names no page — {fix}", code="invalid_parent", field="parent_id",
                          parent=parent) from None

    def ancestors(self, parent_id: str | None) -> list[dict[str, str]]:
        """The pages above a page whose parent is `parent_id`, outermost first ({"id", "title"}): the one
        walk up the outline (the hit assembly places each hit by it)."""
        with self.node.lock:
            return reads.ancestors(self.conn, parent_id)

    def _page(self, row: Any) -> Page:
        page = Page.from_row(row, child_count=reads.live_children(self.conn, row["container"], row["id"]))
        page.ancestors = reads.ancestors(self.conn, row["parent_id"])
        return page

    def _resolve(self, ref: str) -> Page:
        """The page as it is now, unchecked: what a write returns once its actor has been checked."""
        with self.node.lock:
            return self._page(self._row(ref))

    def resolve(self, ref: str, *, actor: str | None = None) -> Page:
        """Find one page by id or CONTAINER/Title (a read: it holds the body). Never recorded as a read."""
        self.reader(actor)
        return self._resolve(ref)

    def get_page(self, ref: str, *, actor: str | None = None, record_read: bool = True) -> Page:
        """Read one page. An agent's read is recorded as one knowledge_read event (via get_page)."""
        who = self.reader(actor)
        page = self._resolve(ref)
        if record_read and who.is_agent:
            self.record_read(who.handle, "get_page", [page], query=None)
        return page

    def record_read(self, handle: str, via: str, pages: list[Any], query: str | None, *,
                    turn: str | None = None, phase: str | None = None, backend: str = "native") -> None:
        """One event per act, listing its pages; nothing recorded for nothing. `turn` and `phase` are the
        agent runtime's, when it has them (a read before the first phase has none); `backend` the one the
        pages' ids are addresses in (a remote site's, when the company's knowledge lives there)."""
        if not pages:
            return
        listed = [{"id": p.id if hasattr(p, "id") else p["id"],
                   "container": p.container if hasattr(p, "container") else p["container"],
                   "title": p.title if hasattr(p, "title") else p["title"], "rank": i + 1}
                  for i, p in enumerate(pages)]
        if query is not None:
            # a label a reader recognises the search by: at most 200 bytes, the ellipsis included
            encoded = query.encode("utf-8")
            if len(encoded) > 200:
                query = encoded[:197].decode("utf-8", errors="ignore") + "…"
        # Appended without waiting for the disk flush: it is an audit of a read, on the path of the answer
        # the agent waits for (the flush was most of an MCP search's tail under load). A process killed now
        # loses nothing (the bytes are the kernel's); a power cut can lose the newest reads, never a page,
        # and the next flushed write makes them durable with it, in order.
        self.node.submit([records.knowledge_read(handle, via=via, query=query, pages=listed, backend=backend,
                                                 turn=turn, phase=phase)], sync=False)

    # -- commands ---------------------------------------------------------------------------
    def submit_batch(self, batch: Sequence[Record], *, sync: bool = True, bulk: bool = False) -> list[Decision]:
        """Records a writer built and checked itself (the importer: every rule asked when it planned, each
        record by `records`' builders), submitted at once — one log append and one applier transaction —
        with what the applier decided for each, in order. A refusal is an outcome here, not an error.
        `bulk`: the batch is applied in one transaction however long it takes (the writer bounds it)."""
        if bulk:
            return self.node.submit(batch, sync=sync, bulk=True)
        return self.node.submit(batch, sync=sync)

    def bulk_writes(self) -> Any:
        """A context for a bulk of batches (the importer's): see `core.store.bulk_writes`. Yields whether
        the database is written without its WAL (False when another connection has it open)."""
        bulk = getattr(self.node, "bulk_writes", None)
        return bulk() if bulk is not None else contextlib.nullcontext(False)

    def _submit(self, rec: Record) -> Decision:
        out = self.node.submit_one(rec)
        if out.status == "refused":
            cls = NotFound if out.code in ("not_found", "purged") else Refused
            raise cls(out.reason or "refused", code=out.code or "refused")
        return out

    def create_page(self, container: str, title: str, body: str = "", *, actor: str | None = None,
                    parent: str | None = None, message: str | None = None, labels: list[str] | None = None,
                    page_id: str | None = None, op_id: str | None = None) -> Page:
        who = self.writer(actor)
        title = check_title(title)
        _check_body(body, self.company.limits.page_body_bytes)
        container = self.container_key(container)
        rules.may_create(self.company, who, container)
        parent_id = None
        if parent:
            parent_id = self._parent_id(parent, f"pick a live page in {container} as parent, or none for the top")
            with self.node.lock:
                problem = parent_problem(self.conn, container, parent_id, None)
            if problem:
                raise Refused(f"{problem} — pick a live page in {container} as parent, or none for the top",
                              code="invalid_parent", field="parent_id", parent=parent)
        out = self._submit(records.page_create(who.handle, page_id=page_id or new_id(), container=container,
                                               title=title, body=body, parent_id=parent_id, message=message,
                                               labels=labels or (), op_id=op_id))
        page = self._resolve(out.result["page_id"])
        page_warnings = out.warnings
        if page_warnings:   # this answer's, not a field of Page (its to_json leaves them out)
            setattr(page, "warnings", page_warnings)  # noqa: B010
        return page

    def save_page(self, ref: str, body: str, *, base_revision: int, actor: str | None = None,
                  message: str | None = None, rescue: bool = True) -> Page:
        """Save against the revision the writer edited. A stale base is refused by the applier and
        the writer's text is kept (returned on the error and written under the home's rescued/). `rescue`
        False: a caller that holds its own text (a model over MCP) gets the refusal alone, no file written.
        A reference that names no page was never a page to keep a text for: refused with nothing written."""
        _check_body(body, self.company.limits.page_body_bytes)
        try:
            who = self.writer(actor)
            row = self._row(ref, allow_trashed=False)
            rules.may_save(self.company, who, row)
        except NoPage:
            raise                      # a typo of the address: the caller's text is where it came from
        except (Refused, NotFound) as exc:
            # any refusal keeps the writer's text, not only a stale one
            if not rescue:
                raise
            self._refuse_keeping(exc, ref, int(base_revision), body)
        try:
            out = self.node.submit_one(records.page_save(who.handle, page_id=row["id"],
                                                         base_revision=int(base_revision), body=body, message=message))
        except CrewletError as exc:
            # not saved, or on the log but not applied yet: either way the writer's text is kept
            if not rescue:
                raise
            self._fail_keeping(exc, row["id"], int(base_revision), body)
        if out.status == "refused":
            if out.code == "stale_revision":
                current = self._row(row["id"])["revision"]
                if not rescue:
                    raise StaleRevision(out.reason or "stale", base_revision=int(base_revision),
                                        current_revision=current, your_body=body)
                try:
                    rescued = self._rescue(row["id"], int(base_revision), body)
                except (OSError, Refused) as why:
                    refused = StaleRevision(f"{out.reason} (your text was kept nowhere — {self.node.home.rescue_dir} "
                                            f"could not take it: {why}; it is printed instead)",
                                            base_revision=int(base_revision), current_revision=current, your_body=body)
                    refused.details["kept_nowhere"] = True
                    raise refused from None
                raise StaleRevision(f"{out.reason} (your text is kept in {rescued})", base_revision=int(base_revision),
                                    current_revision=current, your_body=body, rescued_to=str(rescued))
            cls = NotFound if out.code in ("not_found", "purged") else Refused
            if not rescue:
                raise cls(out.reason or "refused", code=out.code)
            self._refuse_keeping(cls(out.reason or "refused", code=out.code), row["id"], int(base_revision), body)
        return self._resolve(row["id"])

    def _refuse_keeping(self, exc: Refused | NotFound, ref: str, base: int, body: str) -> None:
        try:
            rescued = self._rescue(ref, base, body)
        except (OSError, Refused) as why:
            raise exc.with_note(f" (your text was kept nowhere — {self.node.home.rescue_dir} could not take it: {why}; "
                                "it is printed instead)", kept_nowhere=True, your_body=body) from None
        raise exc.with_note(f" (your text is kept in {rescued})", rescued_to=str(rescued)) from None

    def _fail_keeping(self, exc: CrewletError, page_id: str, base: int, body: str) -> None:
        try:
            rescued = self._rescue(page_id, base, body)
        except (OSError, Refused) as why:  # a full or read-only disk may refuse the rescue too
            if isinstance(exc, LogDamage):
                exc.kept_nowhere = body  # the CLI prints it, the app keeps it
                raise exc from None
            # nothing half-written is left under rescued/: the text goes back to the caller whole, to print
            raise exc.with_note(f" (your text was kept nowhere — {self.node.home.rescue_dir} could not take it: {why}; "
                                "it is printed instead)", kept_nowhere=True, your_body=body) from None
        if isinstance(exc, LogDamage):
            exc.rescued_to = str(rescued)  # the damage is what is said; the text is kept all the same
            raise exc
        raise exc.with_note(f" (your text is kept in {rescued})", rescued_to=str(rescued)) from None

    def _rescue(self, page_id: str, base: int, body: str) -> Any:
        """Keep a refused text under rescued/, whole or not at all: it is written under a hidden name, synced,
        and only then given its own (a full disk used to leave 0-byte or cut-off copies that looked kept).
        Raises OSError when the text could not be kept."""
        rescue = self.node.home.rescue_dir
        rescue.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", page_id)[:80]
        data = body.encode("utf-8")
        # a file per refusal: two writers refused in the same millisecond must not share one, so the
        # name carries the text's digest, and a link that must not replace counts up past any name taken
        stem = f"{safe}-from-r{base}-{now_ms()}-{hashlib.sha256(data).hexdigest()[:8]}"
        partial = rescue / f".{stem}.{os.getpid()}.{os.urandom(4).hex()}.partial"
        try:
            with open(partial, "xb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            for n in range(1, 1000):
                path = rescue / (f"{stem}.md" if n == 1 else f"{stem}-{n}.md")
                try:
                    os.link(partial, path)   # never over another rescued text
                    return path
                except FileExistsError:
                    continue
                except OSError:              # a filesystem without hard links
                    if path.exists():
                        continue
                    os.rename(partial, path)
                    return path
        finally:
            partial.unlink(missing_ok=True)
        raise Refused(f"could not keep the text under {rescue}: too many rescued files share one name", code="io")

    def rename_page(self, ref: str, new_title: str, *, actor: str | None = None) -> Page:
        who = self.writer(actor)
        title = check_title(new_title)
        row = self._row(ref, allow_trashed=False)
        rules.may_rename(self.company, who, row)
        self._submit(records.page_rename(who.handle, page_id=row["id"], title=title))
        return self._resolve(row["id"])

    def move_page(self, ref: str, parent: str | None, *, actor: str | None = None) -> Page:
        who = self.writer(actor)
        row = self._row(ref, allow_trashed=False)
        rules.may_move(self.company, who, row)
        parent_id = self._parent_id(parent, f"pick a live page in {row['container']}, or --top") if parent else None
        with self.node.lock:
            problem = parent_problem(self.conn, row["container"], parent_id, row["id"])
        if problem:
            raise Refused(f"{problem} — pick a live page in {row['container']} that is not beneath this one, "
                          "or --top", code="invalid_parent", field="parent_id", parent=parent)
        out = self._submit(records.page_move(who.handle, page_id=row["id"], parent_id=parent_id))
        page = self._resolve(row["id"])
        if out.warnings:
            setattr(page, "warnings", out.warnings)  # noqa: B010  this answer's, not a field of Page
        return page

    def trash_page(self, ref: str, *, actor: str | None = None) -> Page:
        who = self.writer(actor)
        row = self._row(ref)
        rules.may_trash(self.company, who, row, "trash")
        self._submit(records.page_trash(who.handle, page_id=row["id"]))
        return self._resolve(row["id"])

    def restore_page(self, ref: str, *, actor: str | None = None) -> Page:
        who = self.writer(actor)
        row = self._row(ref)
        rules.may_trash(self.company, who, row, "restore")
        _require_trashed(row, "nothing to restore")
        self._submit(records.page_restore(who.handle, page_id=row["id"]))
        return self._resolve(row["id"])

    def purge_page(self, ref: str, *, actor: str | None = None, reason: str = "") -> dict[str, Any]:
        who = self.writer(actor)
        row = self._row(ref)
        rules.may_purge(self.company, who, row)
        _require_trashed(row, "trash it first")
        self._submit(records.page_purge(who.handle, page_id=row["id"], reason=reason or "purged by an admin"))
        return {"page_id": row["id"], "container": row["container"], "title": row["title"], "purged": True}

    def set_labels(self, ref: str, labels: list[str], *, actor: str | None = None, op_id: str | None = None) -> Decision:
        who = self.writer(actor)
        row = self._row(ref)
        rules.may_save(self.company, who, row)
        return self._submit(records.page_labels(who.handle, page_id=row["id"], labels=labels, op_id=op_id))

    # -- comments ---------------------------------------------------------------------------
    def add_comment(self, ref: str, text: str, *, actor: str | None = None) -> Comment:
        who = self.writer(actor)
        if not text.strip():
            raise Invalid("a comment needs some text", code="invalid_comment")
        _check_comment(text, self.company.limits.comment_bytes)
        row = self._row(ref, allow_trashed=False)
        rules.may_comment(self.company, who, row)
        out = self._submit(records.comment_add(who.handle, comment_id=new_id(), page_id=row["id"], body=text))
        return self._comment(out.result["comment_id"])

    def _comment_row(self, comment_id: str) -> Any:
        with self.node.lock:
            c = self.conn.execute("SELECT * FROM comments WHERE id = ?", (comment_id,)).fetchone()
        if c is None:
            raise NotFound(f"no comment '{comment_id}' — `crewlet page show REF` lists a page's comments")
        return c

    def _comment(self, comment_id: str) -> Comment:
        c = self._comment_row(comment_id)
        return Comment(c["id"], c["page_id"], c["author"], c["body"], c["created_at"], c["edited_at"])

    def edit_comment(self, comment_id: str, text: str, *, actor: str | None = None) -> Comment:
        who = self.writer(actor)
        if not text.strip():
            raise Invalid("a comment needs some text — to take it back, remove it", code="invalid_comment")
        _check_comment(text, self.company.limits.comment_bytes)
        c = self._comment_row(comment_id)
        rules.may_edit_comment(self.company, who, c, self._row(c["page_id"]))
        self._submit(records.comment_edit(who.handle, comment_id=comment_id, body=text))
        return self._comment(comment_id)

    def remove_comment(self, comment_id: str, *, actor: str | None = None) -> None:
        who = self.writer(actor)
        c = self._comment_row(comment_id)
        rules.may_remove_comment(self.company, who, c, self._row(c["page_id"]))
        self._submit(records.comment_remove(who.handle, comment_id=comment_id))

    def comments(self, ref: str, *, actor: str | None = None) -> list[Comment]:
        self.reader(actor)
        row = self._row(ref)
        with self.node.lock:
            rows = self.conn.execute("SELECT * FROM comments WHERE page_id = ? ORDER BY created_at, rowid", (row["id"],)).fetchall()
        return [Comment(c["id"], c["page_id"], c["author"], c["body"], c["created_at"], c["edited_at"]) for c in rows]

    # -- listings ---------------------------------------------------------------------------
    def spaces(self, *, actor: str | None = None) -> list[dict[str, Any]]:
        """Declared containers with their page counts, then containers that hold pages but were
        never declared (reachable by address and search, shown apart)."""
        self.reader(actor)
        with self.node.lock:
            counts = reads.live_by_container(self.conn)
            docs = {r["key"]: r for r in self.conn.execute("SELECT * FROM containers")}
        out = []
        declared = self.company.declared_containers()
        for key in sorted(declared):
            space = declared[key]
            out.append({"key": key, "name": space.name, "purpose": space.purpose, "lead": space.lead,
                        "pages": counts.get(key, 0), "declared": True, "has_document": key in docs,
                        "reserved": key in (self.company.knowledge.root_space, self.company.knowledge.skills_container)})
        for key in sorted(set(counts) - set(declared)):
            out.append({"key": key, "name": key, "purpose": "", "lead": None, "pages": counts[key],
                        "declared": False, "has_document": key in docs, "reserved": False})
        return out

    def list_pages(self, container: str, *, parent: str | None = None, after: str | None = None,
                   limit: int = WINDOW_MAX, actor: str | None = None) -> Window:
        """One level of a container's outline, in windows of at most 500, ordered by address."""
        self.reader(actor)
        if not 1 <= limit <= WINDOW_MAX:
            raise Invalid(f"the limit must be between 1 and {WINDOW_MAX} (got {limit})", code="invalid_limit")
        container = self.container_key(container)
        parent_id = None
        if parent:
            prow = self._row(parent)
            if prow["container"] != container:
                raise Invalid(f"the parent {parent} is in {prow['container']}, not {container}", code="invalid_parent",
                              parent=parent, parent_container=prow["container"])   # each surface says where to look
            parent_id = prow["id"]
        where = "container = ? AND parent_id IS ? AND trashed_at IS NULL"
        args: list[Any] = [container, parent_id]
        with self.node.lock:
            total = reads.live_children(self.conn, container, parent_id)
            unknown = unknown_container(self.conn, self.company, container) if total == 0 else None
            if unknown:
                raise unknown
            if after:
                address, page_id = _decode_cursor(after)
                where += " AND (address, id) > (?, ?)"
                args += [address, page_id]
            rows = self.conn.execute(
                "SELECT id, container, address, title, '' AS body, revision, parent_id, created_by, created_at, "
                "saved_by, saved_at, updated_at, trashed_at, trashed_by, version, labels, "
                f"({reads.IS_FOLDER_SQL}) AS is_folder, "
                "coalesce((SELECT live FROM page_levels l WHERE l.parent = p.id AND l.container = p.container), 0) "
                "AS child_count "
                # pages_level (container, parent_id, address) holds a level in order: without the hint SQLite
                # chose pages_address and filtered a whole container's rows (1.2 s at 250,000 pages)
                f"FROM pages p INDEXED BY pages_level WHERE {where} ORDER BY address, id LIMIT ?",
                [*args, limit + 1]).fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        pages = [Page.from_row(r) for r in rows]
        cursor = _encode_cursor(rows[-1]["address"], rows[-1]["id"]) if more and rows else None
        return Window(container, parent_id, pages, total, cursor)

    def trash(self, *, actor: str | None = None) -> list[Page]:
        self.reader(actor)
        with self.node.lock:
            rows = self.conn.execute("SELECT * FROM pages WHERE trashed_at IS NOT NULL ORDER BY trashed_at DESC").fetchall()
        return [Page.from_row(r) for r in rows]

    # -- history ------------------------------------------------------------------------------
    def history(self, ref: str, *, actor: str | None = None) -> list[Revision]:
        self.reader(actor)
        row = self._row(ref)
        with self.node.lock:
            rows = self.conn.execute(f"{REVISION_SQL} WHERE r.page_id = ? ORDER BY r.revision DESC", (row["id"],)).fetchall()
        return [Revision(r["page_id"], r["revision"], r["title"], r["body"], r["author"], r["at"], r["kind"], r["message"])
                for r in rows]

    def revision(self, ref: str, n: int, *, actor: str | None = None) -> Revision:
        self.reader(actor)
        return self._revision(ref, n)

    def _revision(self, ref: str, n: int) -> Revision:
        row = self._row(ref)
        with self.node.lock:
            r = self.conn.execute(f"{REVISION_SQL} WHERE r.page_id = ? AND r.revision = ?", (row["id"], n)).fetchone()
        if r is None:
            raise NotFound(f"{row['container']}/{row['title']} has no revision {n} (it is at {row['revision']}) — "
                           "`crewlet page history REF` lists them", code="no_revision")
        return Revision(r["page_id"], r["revision"], r["title"], r["body"], r["author"], r["at"], r["kind"], r["message"])

    def diff(self, ref: str, a: int, b: int | None = None, *, actor: str | None = None) -> list[str]:
        """The line diff from revision a to b. With b omitted: what save a changed (a-1 → a)."""
        self.reader(actor)
        if b is None:
            a, b = a - 1, a
        # the revision asked for is read first, so one that is not there is the one named (`diff REF 99`
        # asks what save 99 changed: "no revision 99", never the 98 it would be compared with)
        new = self._revision(ref, b)
        if a < 1:
            return line_diff("", new.body, "(nothing)", f"revision {b}")
        old = self._revision(ref, a)
        lines = line_diff(old.body, new.body, f"revision {a}", f"revision {b}")
        if old.title != new.title:
            lines = [f"title: {old.title!r} → {new.title!r}", *lines]
        return lines

    def backlinks(self, ref: str, *, actor: str | None = None) -> list[Page]:
        self.reader(actor)
        row = self._row(ref)
        with self.node.lock:
            rows = self.conn.execute(
                "SELECT p.* FROM page_links l JOIN pages p ON p.id = l.src WHERE l.dst = ? AND p.trashed_at IS NULL "
                "ORDER BY p.container, p.address", (row["id"],)).fetchall()
        return [Page.from_row(r) for r in rows]

    # -- the trash reaper -------------------------------------------------------------------------
    def reap(self, *, now: int | None = None) -> ReapReport:
        """Purge pages trashed more than 30 days ago, oldest first, at most 1,000 a pass; the next pass
        runs at once when one stops at the bound. Each purge is decided again at apply time (cutoff)."""
        now = now if now is not None else now_ms()
        cutoff = now - TRASH_TERM_MS
        purged = refused = passes = 0
        while True:
            with self.node.lock:
                due = self.conn.execute(
                    "SELECT id, trashed_at FROM pages WHERE trashed_at IS NOT NULL AND trashed_at < ? "
                    "ORDER BY trashed_at, id LIMIT ?", (cutoff, REAP_PASS_MAX)).fetchall()
            if not due:
                break
            passes += 1
            # the op id is fixed by the page and the trash it was reaped from, so a retried purge is harmless
            purges = [records.page_purge(REAPER, page_id=r["id"], cutoff=cutoff, reason=f"in the trash since before {cutoff}",
                                         op_id=f"reap-{r['id']}-{r['trashed_at']}") for r in due]
            for out in self.node.submit(purges):
                if out.status == "applied":
                    purged += 1
                else:
                    refused += 1
            if len(due) < REAP_PASS_MAX:
                break
        return ReapReport(purged, refused, passes)

    # -- onboarding markers -------------------------------------------------------------------------
    def mark_onboarded(self, agent: str, chain_hash: str) -> None:
        self.node.submit_one(records.onboarding_mark(agent, chain_hash=chain_hash))

    def is_onboarded(self, agent: str, chain_hash: str) -> bool:
        with self.node.lock:
            row = self.conn.execute("SELECT chain_hash FROM agent_onboarding_markers WHERE agent_id = ?", (agent,)).fetchone()
        return row is not None and row["chain_hash"] == chain_hash

    def reads(self, limit: int = 100, *, actor: str | None = None) -> list[dict[str, Any]]:
        """The latest knowledge_read events (which pages agents were shown): a read of pages too."""
        self.reader(actor)
        with self.node.lock:
            rows = self.conn.execute("SELECT * FROM knowledge_reads ORDER BY at DESC LIMIT ?", (limit,)).fetchall()
        return [{"op_id": r["op_id"], "actor": r["actor"], "at": r["at"], "via": r["via"], "query": r["query"],
                 "pages": json.loads(r["pages"]), "backend": r["backend"], "turn": r["turn"], "phase": r["phase"]}
                for r in rows]

    # -- who read a page, and every page at once -----------------------------------------------------
    def page_reads(self, ref: str, *, limit: int = 100, actor: str | None = None) -> list[dict[str, Any]]:
        """The knowledge_read events that listed this page, newest first: who, how (`via`), when, the
        page's rank in that act and the search's query."""
        self.reader(actor)
        return self.reads_of(self._row(ref)["id"], limit=limit, actor=actor)

    def reads_of(self, page_id: str, *, backend: str = "native", limit: int = 100,
                 actor: str | None = None) -> list[dict[str, Any]]:
        """The knowledge_read events that listed the page `page_id` of `backend` (a remote site's pages are
        read there, and their reads recorded here), newest first."""
        self.reader(actor)
        needle = json.dumps(page_id)
        with self.node.lock:
            rows = self.conn.execute(
                "SELECT k.*, json_extract(j.value, '$.rank') AS page_rank FROM knowledge_reads k, json_each(k.pages) j "
                "WHERE instr(k.pages, ?) > 0 AND json_extract(j.value, '$.id') = ? AND k.backend = ? "
                "ORDER BY k.at DESC, k.op_id LIMIT ?", (needle, page_id, backend, limit)).fetchall()
        return [{"op_id": r["op_id"], "actor": r["actor"], "at": r["at"], "via": r["via"], "query": r["query"],
                 "rank": r["page_rank"], "of": len(json.loads(r["pages"])), "backend": r["backend"],
                 "turn": r["turn"], "phase": r["phase"]} for r in rows]

    def catalogue(self, *, after: str | None = None, limit: int = WINDOW_MAX,
                  actor: str | None = None) -> tuple[list[Page], str | None]:
        """Every live page, space by space (ordered by container, then address), without bodies, in
        windows of at most 500 with a cursor: what a browser of every page (MCP resources) reads."""
        self.reader(actor)
        if not 1 <= limit <= WINDOW_MAX:
            raise Invalid(f"limit must be between 1 and {WINDOW_MAX} (got {limit})", code="invalid_limit")
        where, args = "trashed_at IS NULL", []
        if after:
            address, page_id = _decode_cursor(after)
            container, _, address = address.partition("/")
            where += " AND (container, address, id) > (?, ?, ?)"
            args = [container, address, page_id]
        with self.node.lock:
            rows = self.conn.execute(
                "SELECT id, container, address, title, '' AS body, revision, parent_id, created_by, created_at, "
                "saved_by, saved_at, updated_at, trashed_at, trashed_by, version, labels, "
                f"({reads.IS_FOLDER_SQL}) AS is_folder "
                f"FROM pages WHERE {where} ORDER BY container, address, id LIMIT ?", [*args, limit + 1]).fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        cursor = (_encode_cursor(f"{rows[-1]['container']}/{rows[-1]['address']}", rows[-1]["id"])
                  if more and rows else None)
        return [Page.from_row(r) for r in rows], cursor
