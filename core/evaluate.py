"""`crewlet search eval`: against a store's own vectors, does the two-stage search recover the exact ranking?

It reads a file, not a running node (a copy inside a backup works with nothing stopped), and measures
with the index's own method (core/search/ivf/measure.py): 25 documents sampled from the corpus by a hash
of their id — the same 25 the index's training keeps out of its k-means and measures on, so an index is
never installed where this command would fail on the corpus it was trained on — each searched with its
own vector and never counted as its own answer, against the exact scan's own top 150 — through the semantic index when the store has one (what searches actually run) and
again with the full scan as the first stage, in every shape: unfiltered, narrowed to each source kind
(crewlet has one: the page, which is the whole corpus) and narrowed to the query's own container, each
against the floor at the size of the corpus it searches. It passes when every shape meets its floor and
none drops a document of the exact top ten.

The last lines say what a search by meaning cannot see: per source kind, the sources whose title and
whole body (whitespace collapsed) run past the opening the embedding duty sends, and how much of the
text lies past it. That reads every body, which is why this is a command and not a gauge.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .embed.provider import MAX_INPUT_BYTES
from .embed.text import embed_text
from .errors import CrewletError
from .search import semantic
from .vectors import records as vectors
from .search.ivf import measure, training
from .vectors import index as store
from .vectors.index_row import IndexRow
from .store import connect

NEEDS = measure.QUERIES + measure.DEPTH     # sources a measurement needs: its queries and a full depth


@dataclass
class PastWindow:
    kind: str
    sources: int
    past: int
    text_bytes: int
    past_bytes: int


@dataclass
class EvalReport:
    store: str
    spaces: dict[str, int]
    space: str
    sources: int
    queries: int
    index: IndexRow | None
    probes: int | None                      # lists read through the index (None: no index)
    through: measure.Measurement | None     # the search as it runs (through the index)
    scan: measure.Measurement               # the same search, the full scan as its first stage
    window: int
    past_window: list[PastWindow] = field(default_factory=list)
    lists_alone: bool = False               # --probes: those lists alone, without the codes a search reads at least
    index_served: bool = True               # searches read through the installed index now (see evaluate)

    @property
    def measured(self) -> measure.Measurement:
        return self.through if self.through is not None else self.scan

    @property
    def failures(self) -> list[str]:
        out = []
        for name, shape in self.measured.shapes.items():
            if shape.recall < shape.floor:
                out.append(f"{name} recall {shape.recall:.4f} is below its {shape.floor:.4f} floor")
            if shape.head_misses:
                out.append(f"{name} dropped {shape.head_misses} document(s) of the exact top ten")
            if shape.below:
                out.append(f"{name}: {shape.below} quer{'ies' if shape.below != 1 else 'y'} below the "
                           f"{shape.worst_floor:.2f} worst-query floor (worst {shape.worst:.4f})")
        return out

    @property
    def passed(self) -> bool:
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        return {"store": self.store, "spaces": self.spaces, "space": self.space, "sources": self.sources,
                "queries": self.queries, "depth": measure.DEPTH, "candidates": semantic.STAGE_ONE,
                "index": self.index.summary() | {"centroids": None} if self.index else None,
                "probes": self.probes, "through_index": self.through.to_json() if self.through else None,
                "index_served": self.index_served if self.index else None,
                "scan": self.scan.to_json(), "passed": self.passed, "failures": self.failures,
                "window": self.window, "past_window": [pw.__dict__ for pw in self.past_window]}


def space_label(space: str) -> str:
    """`provider:model:dims[:tokenizer]` as a person reads it: 'model at N dimensions'."""
    parts = space.split(":")
    if len(parts) >= 3 and parts[2].isdigit():
        return f"{parts[1]} at {parts[2]} dimensions"
    return space


DEFAULT_WINDOW = MAX_INPUT_BYTES   # the opening the duty sends at most: the window, unless --window says less
#   (eval reads a store file, not a home's configuration: an endpoint set to a smaller max_input_tokens
#   is given as --window)


def past_window(conn: Any, space: str, window: int) -> list[PastWindow]:
    """Per source kind: the sources whose text runs past the opening the duty sends, and how much."""
    total = past = text_bytes = past_bytes = 0
    for title, body in conn.execute(
            "SELECT p.title, p.body FROM pages p JOIN vectors v ON v.source_id = p.id AND v.space = ? "
            "WHERE p.trashed_at IS NULL", (space,)):
        whole = len(" ".join(f"{title} {body}".split()).encode("utf-8", "replace"))
        opening = len(embed_text(title, body, window)[0].encode("utf-8"))
        total += 1
        text_bytes += whole
        if whole > opening:
            past += 1
            past_bytes += whole - opening
    return [PastWindow("page", total, past, text_bytes, past_bytes)]


def evaluate(path: Path, *, probes: int | None = None, window: int | None = None,
             progress: Callable[[int, int, str], None] | None = None) -> EvalReport:
    """Measure the store at `path` (read-only). Raises CrewletError (one line) when it cannot."""
    if not path.is_file():
        raise CrewletError(f"{path}: no such file — pass the crewlet.db to measure with --store FILE", code="no_store")
    if probes is not None and probes < 1:
        raise CrewletError(f"--probes {probes}: give a number of lists of at least 1", code="usage")
    if window is not None and window < 1:
        raise CrewletError(f"--window {window}: give a byte count of at least 1", code="usage")
    conn = connect(path, readonly=True)
    lock = threading.RLock()
    try:
        try:
            spaces = vectors.spaces(conn)
        except Exception as exc:
            raise CrewletError(f"{path} is not a crewlet store with vectors ({exc})", code="no_vectors") from None
        if not spaces:
            raise CrewletError(f"{path} holds no vectors: nothing to measure (`crewlet worker --once` embeds the "
                               "pages)", code="no_vectors")
        space = max(spaces, key=lambda s: (spaces[s], s))
        if spaces[space] < NEEDS:
            raise CrewletError(f"{path} holds {spaces[space]:,} embedded pages ({space_label(space)}): a measurement "
                               f"needs at least {NEEDS} ({measure.QUERIES} queries and a depth of {measure.DEPTH}) — "
                               f"it checks corpora of thousands of pages (below {semantic.STAGE_ONE:,} a search by "
                               "meaning already reranks every page exactly); import more (`crewlet import DIR`), "
                               "run `crewlet worker --once` to embed them, and measure again", code="too_few")
        table = semantic.load_table(conn, space, 0)
        rows = training.held_out(table)   # the documents a training keeps out of its k-means
        done = [0]

        def step(k: int) -> None:
            done[0] += k
            if progress:
                progress(done[0], table.live, "scoring the query documents exactly")

        cases = training.cases_for(conn, lock, table, rows, progress=step)
        index = store.read_index(conn, space)
        used = None
        through = None
        # searches read through the index only while its latest measurement covers the corpus as it is
        # (store.SERVE_GROWTH): past that they scan, and so does this measurement, unless --probes asks
        served = index is not None and store.serves(store.measured_sources(index), table.live)
        if table.index is not None and index is not None and (served or probes is not None):
            used = probes or index.probes
            # --probes N: what N lists alone recall; else the search as it runs (at least READ_FACTOR ×
            # STAGE_ONE codes, however few lists the index asks for)
            through = measure.measure(table, cases, used, min_rows=0 if probes else None)
        scan = measure.measure(table, cases, None)
        bound = window or DEFAULT_WINDOW
        if progress:
            progress(table.live, table.live, "reading every body for the window")
        return EvalReport(str(path), spaces, space, table.live, len(cases), index, used, through, scan, bound,
                          past_window(conn, space, bound), index_served=served, lists_alone=probes is not None)
    finally:
        conn.close()


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MiB"


def render(report: EvalReport) -> list[str]:
    """The report laid out as the spec's sample lays it out."""
    lines = []
    # every source crewlet embeds is a page: counted as pages (the --json keeps the spec's "sources")
    others = [f"{n} in {space_label(s)}" for s, n in report.spaces.items() if s != report.space]
    corpus = f"{report.sources} pages, {space_label(report.space)}"
    if others:
        corpus += f" (also {', '.join(others)}: not measured)"
    lines.append(("corpus", corpus))
    lines.append(("measured", f"{report.queries} queries at depth {measure.DEPTH} from {semantic.STAGE_ONE} candidates"))
    ix = report.index
    if ix is not None and report.through is not None:
        probed = f"{report.probes} of {ix.lists} lists probed (generation {ix.generation})"
        if report.lists_alone:
            probed += f" — --probes, those lists alone; the index reads {ix.probes}"
        else:
            probed += (f", and at least {semantic.READ_FACTOR * semantic.STAGE_ONE:,} codes "
                       f"({semantic.READ_FACTOR}× the {semantic.STAGE_ONE:,} candidates)")
        if ix.refiling:
            probed += f"; re-filing, {ix.refiled} of {ix.batches} batches applied"
        lines.append(("first stage", f"the semantic index: {probed}"))
        m = ix.measured
        lines.append(("index", f"measured on {m.get('sources', ix.trained_sources)} pages: "
                               f"{m.get('worst_recall', 0):.4f} against a {m.get('worst_floor', 0):.4f} floor in its "
                               f"worst shape ({m.get('worst_shape', '—')}), {m.get('head_misses', 0)} head miss(es)"))
    elif ix is not None:
        measured_on = store.measured_sources(ix)
        lines.append(("first stage", f"the full scan: the index (generation {ix.generation}) was last measured on "
                                     f"{measured_on:,} sources and the corpus is now {report.sources:,} — searches "
                                     "read it again once the duty measures it on the corpus as it is"))
        lines.append(("index", f"not served: the corpus grew past {store.SERVE_GROWTH:g} times its latest measurement "
                               "(`--probes N` measures it anyway)"))
    else:
        why = (f"below the {training.MIN_SOURCES:,} pages an index needs" if report.sources < training.MIN_SOURCES
               else "no index is installed (a training that needed more than half its lists installs none)")
        lines.append(("first stage", f"the full scan: {why}"))
        lines.append(("index", "none"))
    measured = report.measured
    main = measured.shapes["unfiltered"]
    scan_main = report.scan.shapes["unfiltered"]
    lines.append(("recall", f"{main.recall:.4f}  (floor {main.floor:.4f} for this corpus size)"))
    lines.append(("worst query", f"{main.worst:.4f}  (floor {main.worst_floor:.2f} — or the full scan's own recall for a "
                                 f"query the codes cannot reach it on; {main.below} below; scan {scan_main.worst:.4f})"))
    lines.append(("head misses", f"{main.head_misses}  (documents dropped from the exact top ten)"))
    lines.append(("scan recall", f"{scan_main.recall:.4f} with {scan_main.head_misses} head miss(es) — the same "
                                 "search with the full scan as its first stage"))
    for name in measure.SHAPES[1:]:
        s, sc = measured.shapes[name], report.scan.shapes[name]
        lines.append(("narrowed", f"{name:<16} recall {s.recall:.4f}  floor {s.floor:.4f}  head misses "
                                  f"{s.head_misses}  ({s.scanned} of {s.queries} scanned)  — scan {sc.recall:.4f}, "
                                  f"{sc.head_misses} head miss(es)"))
    if report.passed:
        lines.append(("verdict", "the two-stage search recovers the exact ranking at the shipped depth, in every shape"))
    else:
        lines.append(("verdict", "FAILS: " + "; ".join(report.failures)))
    lines.append(("window", f"{report.window} bytes a page (the corpus's opening): a semantic search sees each "
                            "page's title and body up to it, a keyword search the whole body"))
    for pw in report.past_window:
        share = 100 * pw.past / pw.sources if pw.sources else 0.0
        text_share = 100 * pw.past_bytes / pw.text_bytes if pw.text_bytes else 0.0
        lines.append(("past window", f"{pw.kind}  {pw.past} of {pw.sources} pages ({share:.1f}%), "
                                     f"{_mib(pw.past_bytes)} of {_mib(pw.text_bytes)} of text ({text_share:.1f}%)"))
    return [f"{k:<12} {v}" for k, v in lines]
