"""`crewlet import DIR`: publish a directory of Markdown files as pages, idempotently.

Plan everything in memory (read, parse, title, route, match against the pages that exist, check the
rules), stop with every problem named if there is any, and only then write the plan whole, in
batches of records. A re-run over an unchanged tree writes nothing; a run killed midway and run again
finds the pages it created (by address) and creates only the rest.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from .. import config as config_mod
from ..errors import Invalid
from ..replica.engine import gc_paused
from ..pages.service import KnowledgeBase
from .model import ImportFailure, ImportNote, ImportProblem, ImportProblems, ImportReport, PlannedPage
from .plan import Planner
from .write import BATCH, write_plan

__all__ = ["import_directory", "ImportReport", "ImportProblem", "ImportProblems", "ImportNote",
           "ImportFailure", "PlannedPage"]


def import_directory(kb: KnowledgeBase, root: Path, *, actor: str | None = None, into: str | None = None,
                     dry_run: bool = False, title_from_name: bool = False, declare_spaces: bool = False,
                     progress: Callable[[int, int], None] | None = None, batch: int = BATCH) -> ImportReport:
    """Import every .md file under `root` (dot-directories skipped).

    Raises ImportProblems (nothing written) when the plan has problems — on a dry run too, so a dry
    run is a check. `progress(done, total)` is called with records written, before and after each batch.
    """
    started = time.perf_counter()
    root = Path(root)
    if not root.is_dir():
        raise Invalid(f"{root} is not a directory — give the directory of Markdown files to import",
                      code="not_a_directory")
    if into is not None and not into.strip():
        raise Invalid("--into needs a space key (e.g. --into DOCS) — give one, or leave --into out",
                      code="invalid_space")
    kb.writer(actor)        # a company whose knowledge lives on a remote site is published there, not here
    who = kb.reader(actor)  # publishing pages is the knowledge app: refused once, not once per space
    # A plan holds a few objects per file (its text, node, planned page, record) that reference counting
    # frees; the cyclic collector, set off by their number, walked the growing heap again and again and
    # found nothing (about a tenth of a 14,000-file import). It runs again once the import is over.
    with gc_paused():
        return _import(kb, root, who, started, into=into, dry_run=dry_run, title_from_name=title_from_name,
                       declare_spaces=declare_spaces, progress=progress, batch=batch)


def _import(kb: KnowledgeBase, root: Path, who: config_mod.Actor, started: float, *, into: str | None,
            dry_run: bool, title_from_name: bool, declare_spaces: bool,
            progress: Callable[[int, int], None] | None, batch: int) -> ImportReport:
    planner = Planner(kb, root, who, into=into, title_from_name=title_from_name, declare_spaces=declare_spaces)
    report = planner.plan()
    report.dry_run = dry_run
    report.timings["plan"] = time.perf_counter() - started
    if report.problems:
        report.seconds = time.perf_counter() - started
        raise ImportProblems(report)
    if dry_run:
        report.created = report.count("create")
        report.updated = report.count("update")
        report.unchanged = report.count("unchanged")
        report.seconds = time.perf_counter() - started
        return report
    node = kb.node
    if report.declared:
        report.declared = config_mod.declare_spaces(node.home.config_file, report.declared)
        node.reload_config()
        node.sync_containers()
    write_started = time.perf_counter()
    write_plan(kb, report, who, progress=progress, batch=batch)
    report.timings["write"] = time.perf_counter() - write_started
    report.seconds = time.perf_counter() - started
    return report
