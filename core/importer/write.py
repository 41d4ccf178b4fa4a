"""Writing a plan: the records KnowledgeBase would write, built here and submitted in batches.

One `KnowledgeBase.submit_batch` per batch is one log append with one fsync and one applier transaction, which is
what makes a tree of ten thousand pages import in seconds (`create_page` per file would pay an fsync
and a transaction per page). Records are in plan order — parents first — so a child's `parent_id`
may name a page created earlier in the same run. Every outcome is checked: a refused record (a title
a concurrent writer claimed first, a page saved since the plan read it) is a reported failure.

The plan is read from its file in order and each file read again for its body (the plan kept only a
digest of it): a file that no longer reads as planned is a failure, never a page written from something
nobody planned. A batch holds at most BATCH records and BATCH_BYTES of bodies, and the batches run
inside `KnowledgeBase.bulk_writes` (the database written once rather than through its WAL, when the
importer has it to itself); each is applied in one transaction.
"""
from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Iterator
from typing import Any

from ..config import Actor
from ..log import Record
from ..pages import records
from ..pages.service import KnowledgeBase
from .docs import read_ahead
from .model import ImportFailure, ImportNote, ImportReport, PlannedPage

Progress = Callable[[int, int], None]
# Records a batch holds at most, and the bytes of bodies: each batch is one transaction, and at a million
# pages a transaction of a thousand records rewrote the same index pages a thousand times (35 GB written
# for a 10 GB home). 20,000 records or 32 MiB of bodies holds a batch's memory to a few hundred MB.
BATCH = 20_000
BATCH_BYTES = 32 * 1024 * 1024
READ_AHEAD = 256                 # files asked of the kernel ahead of their reading


def records_for(page: PlannedPage, actor: str) -> list[Record]:
    """The records one planned page needs (none when it is unchanged), built by the same builders
    KnowledgeBase writes through."""
    if page.action not in ("create", "update"):
        return []
    page_id = page.page_id
    assert page_id is not None   # the plan gives every page it writes its id
    if page.action == "create":
        return [records.page_create(actor, page_id=page_id, container=page.container, title=page.title,
                                    body=page.body, parent_id=page.parent_id, labels=page.labels)]
    out = []
    if "body" in page.changes:
        assert page.base_revision is not None   # an update's plan row holds the revision it read
        out.append(records.page_save(actor, page_id=page_id, base_revision=page.base_revision, body=page.body))
    if "title" in page.changes:
        out.append(records.page_rename(actor, page_id=page_id, title=page.title))
    if "labels" in page.changes:
        out.append(records.page_labels(actor, page_id=page_id, labels=page.labels))
    return out


def write_plan(kb: KnowledgeBase, report: ImportReport, who: Actor, *,
               body_of: Callable[[PlannedPage, str | None], str | None],
               changed: Callable[[str, bytes], bool], progress: Progress | None = None, batch: int = BATCH,
               root: str | None = None) -> None:
    """Write the plan in `report` (its plan file). `body_of(page, cut)` reads a page's body again (None when
    its file no longer reads as a page; `cut` is where the plan found it) and `changed(body, digest)` says whether that is not what was planned."""
    assert report.plan is not None
    handle = who.handle
    store = report.plan
    total = store.one("SELECT coalesce(sum(CASE action WHEN 'create' THEN 1 WHEN 'update' THEN "
                      "json_array_length(changes) ELSE 0 END), 0) FROM plan")[0]
    if progress:
        progress(0, total)
    report.unchanged = report.count("unchanged")
    pending: list[tuple[Record, int]] = []         # (record, the index of its page in `pages`)
    pages: list[PlannedPage] = []
    size = 0
    done = 0

    def flush() -> None:
        nonlocal size, done
        if not pending:
            pages.clear()
            return
        outcomes = kb.submit_batch([rec for rec, _ in pending], sync=True, bulk=True)
        state: dict[int, list[bool]] = {}          # page index -> [created, changed, failed]
        for (rec, i), out in zip(pending, outcomes):
            page = pages[i]
            got = state.setdefault(i, [False, False, False])
            if out.status == "refused":
                got[2] = True
                report.failures.append(ImportFailure(page.source, page.container, page.title, rec.type,
                                                     out.code, out.reason))
                continue
            if out.status == "applied":
                got[0 if rec.type == "page.create" else 1] = True
            if out.result.get("warnings"):
                for w in out.warnings:
                    report.notes.append(ImportNote(w.get("code", "warning"), w.get("message", ""),
                                                   [page.source] if page.source else []))
        for created, changed_, failed in state.values():
            if created:
                report.created += 1
            elif changed_:
                report.updated += 1
            elif not failed:
                report.unchanged += 1
        done += len(pending)
        report.records += len(pending)
        pending.clear()
        pages.clear()
        size = 0
        if progress:
            progress(done, total)

    def ahead(rows: Iterator[Any]) -> Iterator[Any]:
        """The plan's rows, each run of READ_AHEAD files asked of the kernel before it is read (see docs.read_ahead)."""
        while True:
            run = list(itertools.islice(rows, READ_AHEAD))
            if not run:
                return
            if root is not None:
                read_ahead(os.path.join(root, r[1]) for r in run if r[0] != "folder" and r[1])
            yield from run

    with kb.bulk_writes():
        for row in ahead(store.rows("SELECT kind, source, container, title, labels, page_id, action, changes, "
                                    "parent_id, parent_title, base_revision, new_labels, digest, cut FROM plan "
                                    "WHERE action != 'unchanged' ORDER BY ord")):
            page = PlannedPage(kind=row[0], source=row[1], container=row[2], title=row[3], body="",
                               labels=json.loads(row[4]) if row[4] else [], page_id=row[5], action=row[6],
                               changes=json.loads(row[7]) if row[7] else [], parent_id=row[8], parent_title=row[9],
                               base_revision=row[10], new_labels=json.loads(row[11]) if row[11] else [])
            if page.action == "create" or "body" in page.changes:
                body = body_of(page, row[13])
                if body is None or changed(body, row[12]):
                    report.failures.append(ImportFailure(
                        page.source, page.container, page.title, "page.create" if page.action == "create" else
                        "page.save", "changed", "the file changed since the import planned it — run the import "
                        "again to publish it as it is now"))
                    done += len(records_for(page, handle))
                    continue
                page.body = body
                size += len(body)
            pages.append(page)
            for rec in records_for(page, handle):
                pending.append((rec, len(pages) - 1))
            if len(pending) >= batch or size >= BATCH_BYTES:
                flush()
        flush()

