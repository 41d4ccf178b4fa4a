"""What the search duties report, read from rows alone: the embedding coverage and the pages a provider
refused, the semantic index installed, the duties' last passes and a training in progress. Neither numpy
nor a model is loaded here, so `crewlet index status` (and the app's status) costs what `crewlet spaces`
does, at any size. The embedding duty counts its own coverage with `coverage` from here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..diagnostics import Diagnostics
from ..embed.registry import make_provider
from ..search.ivf import MIN_SOURCES
from ..vectors import records as vectors
from ..vectors.index_row import read_index
from . import EMBEDDING, SEMANTIC_INDEX
from .runner import read_duty_records

if TYPE_CHECKING:
    from ..node import Node


@dataclass
class EmbeddingCoverage:
    """The share of live pages with a current vector in the configured space."""

    space: str
    covered: int
    total: int
    held: int

    @property
    def share(self) -> float:
        return self.covered / self.total if self.total else 1.0

    def to_json(self) -> dict[str, Any]:
        return {"space": self.space, "covered": self.covered, "total": self.total, "held": self.held,
                "coverage": round(self.share, 4), "behind": self.total - self.covered}


def coverage(conn: Any, space: str, fingerprint: str | None = None) -> EmbeddingCoverage:
    covered, total = vectors.coverage(conn, space)
    held = conn.execute("SELECT count(*) FROM embed_holds h JOIN pages p ON p.id = h.source_id "
                        "WHERE p.trashed_at IS NULL AND h.revision = p.revision"
                        + (" AND h.fingerprint = ?" if fingerprint else ""),
                        (fingerprint,) if fingerprint else ()).fetchone()[0]
    return EmbeddingCoverage(space, covered, total, held)


COVERAGE_WARNING = 0.95


def last_pass(record: Any) -> dict[str, Any]:
    """A duty's last pass as the status reports show it."""
    return {"at": record.last_run_at, "summary": record.last_summary, "error": record.last_error,
            "holder": record.holder}


def semantic_status(node: Node) -> dict[str, Any]:
    """How much of the knowledge base can be searched by meaning, for `crewlet index status` and the app:
    the configured space and its coverage, every space the stored vectors are in, the embedding duty's last
    pass and the latest of each embedding event. Reads rows only: nothing is loaded or called."""
    company = node.company
    out: dict[str, Any] = {"vectors": bool(company.knowledge.vectors)}
    with node.lock:
        out["spaces"] = vectors.spaces(node.conn)
        record = read_duty_records(node.conn).get(EMBEDDING)
    if record is not None:
        out["last_pass"] = last_pass(record)
    out["events"] = Diagnostics(node.home.diagnostics_file).latest("search_embed_")
    if not company.knowledge.vectors:
        return out
    provider = make_provider(company, threads=1)
    assert provider is not None
    with node.lock:
        cov = coverage(node.conn, provider.space.key(), provider.fingerprint)
    out |= {"provider": provider.space.provider, "model": provider.space.model,
            "dimensions": provider.space.dimensions} | cov.to_json()
    out["warning"] = cov.share < COVERAGE_WARNING
    out["held_pages"] = held_pages(node, provider.fingerprint) if cov.held else []
    return out


HELD_LISTED = 20   # held pages named by `index status` (--json lists as many)


def held_pages(node: Node, fingerprint: str | None = None, limit: int = HELD_LISTED) -> list[dict[str, Any]]:
    """The pages the provider refused, by name: what `crewlet index status` shows of them (the events name
    only the latest, by id)."""
    with node.lock:
        rows = node.conn.execute(
            "SELECT p.id, p.container, p.title, h.reason, h.refused_at, h.held_until, h.bytes FROM embed_holds h "
            "JOIN pages p ON p.id = h.source_id WHERE p.trashed_at IS NULL AND h.revision = p.revision"
            + (" AND h.fingerprint = ?" if fingerprint else "") + " ORDER BY p.container, p.title LIMIT ?",
            ((fingerprint, limit) if fingerprint else (limit,))).fetchall()
    return [{"page_id": r["id"], "container": r["container"], "title": r["title"], "reason": r["reason"],
             "refused_at": r["refused_at"], "held_until": r["held_until"], "bytes": r["bytes"]} for r in rows]


def index_status(node: Node, space: str | None) -> dict[str, Any]:
    """The semantic index for `crewlet index status` and the app: what is installed, the duty's last pass,
    and a training or re-measurement in progress (written by the duty about once a second)."""
    with node.lock:
        row = read_index(node.conn, space) if space else None
        record = read_duty_records(node.conn).get(SEMANTIC_INDEX)
        sources = vectors.sources(node.conn, space) if space else 0
    out: dict[str, Any] = {"space": space, "sources": sources, "installed": row is not None,
                           "min_sources": MIN_SOURCES}
    if row is not None:
        out |= {k: v for k, v in row.summary().items() if k != "space"}
    if record is not None:
        out["last_pass"] = last_pass(record)
        running = record.status.get("running")
        if running and record.last_run_at is not None and running.get("since", 0) > record.last_run_at:
            out["running"] = running
        if record.status.get("declined_at") and row is None:
            out["declined_at"] = record.status["declined_at"]
    return out
