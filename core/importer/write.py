"""Writing a plan: the records KnowledgeBase would write, built here and submitted in batches.

One `KnowledgeBase.submit_batch` per batch is one log append with one fsync and one applier transaction, which is
what makes a tree of ten thousand pages import in seconds (`create_page` per file would pay an fsync
and a transaction per page). Records are in plan order — parents first — so a child's `parent_id`
may name a page created earlier in the same run. Every outcome is checked: a refused record (a title
a concurrent writer claimed first, a page saved since the plan read it) is a reported failure.
"""
from __future__ import annotations

from collections.abc import Callable

from ..config import Actor
from ..log import Record
from ..pages import records
from ..pages.service import KnowledgeBase
from .model import ImportFailure, ImportNote, ImportReport, PlannedPage

Progress = Callable[[int, int], None]
BATCH = 1000


def records_for(page: PlannedPage, actor: str) -> list[Record]:
    """The records one planned page needs (none when it is unchanged), built by the same builders
    KnowledgeBase writes through."""
    if page.action == "create":
        return [records.page_create(actor, page_id=page.page_id, container=page.container, title=page.title,
                                    body=page.body, parent_id=page.parent_id, labels=page.labels)]
    if page.action != "update":
        return []
    out = []
    if "body" in page.changes:
        out.append(records.page_save(actor, page_id=page.page_id, base_revision=page.base_revision, body=page.body))
    if "title" in page.changes:
        out.append(records.page_rename(actor, page_id=page.page_id, title=page.title))
    if "labels" in page.changes:
        out.append(records.page_labels(actor, page_id=page.page_id, labels=page.labels))
    return out


def write_plan(kb: KnowledgeBase, report: ImportReport, who: Actor, *, progress: Progress | None = None,
               batch: int = BATCH) -> None:
    handle = who.handle
    stream: list[tuple[Record, PlannedPage]] = []
    for page in report.pages:
        if page.action == "unchanged":
            continue
        for rec in records_for(page, handle):
            stream.append((rec, page))
    total = len(stream)
    if progress:
        progress(0, total)
    created: set[int] = set()                     # id(page) of pages a page.create was applied for
    changed: set[int] = set()                     # ... and of pages another record was applied for
    failed: set[int] = set()
    done = 0
    for start in range(0, total, batch):
        chunk = stream[start:start + batch]
        outcomes = kb.submit_batch([rec for rec, _ in chunk], sync=True)
        for (rec, page), out in zip(chunk, outcomes):
            status = out.status
            if status == "refused":
                failed.add(id(page))
                report.failures.append(ImportFailure(page.source, page.container, page.title, rec.type,
                                                     out.code, out.reason))
                continue
            if status == "applied":
                (created if rec.type == "page.create" else changed).add(id(page))
            if out.result.get("warnings"):
                for w in out.warnings:
                    report.notes.append(ImportNote(w.get("code", "warning"), w.get("message", ""),
                                                   [page.source] if page.source else []))
        done += len(chunk)
        report.records += len(chunk)
        if progress:
            progress(done, total)
    for page in report.pages:
        key = id(page)
        if key in created:
            report.created += 1
        elif key in changed:
            report.updated += 1
        elif key not in failed:
            report.unchanged += 1
