"""`crewlet search floor`: the relevance floor of the configured model, and measuring one on this corpus.

Dispatched by the search command like `crewlet search eval` (cli_search.SearchCommand): `crewlet search
floor` shows the floors a search applies now and where they come from; `--measure` asks this corpus the
shipped questions that mean nothing (core/search/data/floor_probes.txt) with the configured provider, and
keeps the floor they give (core/search/floor.py) for every node sharing these logs; `--forget` drops it.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import typer

from .cli_common import JSON_OPT, console, emit_json, fail, handle_errors, open_node
from .sanitize import markup_safe as escape

if TYPE_CHECKING:
    from core.node import Node

floor_app = typer.Typer(add_completion=False)     # `crewlet search floor`: its one command


@floor_app.command("floor")
@handle_errors
def search_floor(
    measure: bool = typer.Option(False, "--measure", help="Measure the floor on this corpus with the configured "
                                 "model and keep it (every node sharing these logs reads it)."),
    forget: bool = typer.Option(False, "--forget", help="Drop the measured floor: the shipped one (or none) applies."),
    as_json: bool = JSON_OPT,
) -> None:
    """The relevance floor searches by meaning apply: how close a page must be to enter an answer on meaning alone.

    Two numbers per model: one for a question the pages hold every word of, one for a question whose words no page holds (lone stop words, punctuation, strings the corpus never saw); a question the pages hold part of meets the line between them, by the idf-weighted share they hold. The local model ships both; another model has none until `--measure` asks this corpus the shipped questions that mean nothing and keeps the level 97% of them stay under (the other number stays as shipped, or none).

    Exit 0 done, 1 when it cannot measure (vectors off, nothing embedded, the provider failed), 2 for usage."""
    if measure and forget:
        raise typer.BadParameter("give --measure or --forget, not both", param_hint="--measure")
    from core.search import floor as relevance

    with open_node() as node:
        company = node.company
        if not company.knowledge.vectors:
            fail(f"vectors are off (knowledge.vectors = false in {company.file}): nothing is ranked by meaning, "
                 "so no floor applies", as_json=as_json, payload={"error": "vectors_off"})
        from core.embed.registry import make_provider

        provider = make_provider(company)
        assert provider is not None
        space = provider.space.key()
        measured: dict[str, Any] | None = None
        if forget:
            if node.readonly:
                fail(f"{node.home.root} is read-only: the measured floor cannot be dropped here", as_json=as_json)
            relevance.forget_measured(node.home.floors_file, space)
        elif measure:
            if node.readonly:
                fail(f"{node.home.root} is read-only: a measured floor could not be kept", as_json=as_json)
            measured = _measure(node, provider, as_json)
            shipped = relevance.SHIPPED.get(space)
            relevance.save_measured(node.home.floors_file, space, {
                "unknown": measured["floor"], "known": shipped[0] if shipped else None, "sources": measured["pages"],
                "probes": len(measured["nearest"]), "quantile": relevance.PROBE_QUANTILE,
                "measured_at": time.time_ns() // 1_000_000, "model": provider.space.model})
        floor = relevance.floor_for(space, node.home.floors_file)
        provider.close()
    out = {"model": provider.space.model, "floor": floor.to_json()}
    if measured is not None:
        out["measured"] = {k: v for k, v in measured.items() if k != "nearest"} | {
            "nearest": [{"probe": p, "cosine": round(c, 4)} for p, c in measured["nearest"]]}
    if as_json:
        emit_json(out)
        return
    _render(provider.space.model, floor, measured)


def _measure(node: Node, provider: Any, as_json: bool) -> dict[str, Any]:
    """The shipped probes embedded by the configured provider, each one's nearest page with a body by exact
    cosine over every vector of the space, and the floor they give."""
    import numpy as np

    from core.embed.provider import ProviderError
    from core.search import floor as relevance

    space = provider.space.key()
    with node.lock:
        rows = node.conn.execute(
            "SELECT v.vector FROM vectors v JOIN pages p ON p.id = v.source_id WHERE v.space = ? AND "
            "p.trashed_at IS NULL AND trim(p.body) != ''", (space,)).fetchall()
    if not rows:
        fail(f"no page with a body has a vector in {provider.space.model} yet: `crewlet worker --once` embeds "
             "them, then measure", as_json=as_json, payload={"error": "nothing_embedded"})
    dims = provider.space.dimensions
    matrix = np.frombuffer(b"".join(r[0] for r in rows if len(r[0]) == 4 * dims), dtype="<f4").reshape(-1, dims)
    matrix = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    probes = relevance.probes()
    try:
        vectors = []
        for start in range(0, len(probes), provider.limits.max_batch_inputs):
            vectors += provider.embed(probes[start:start + provider.limits.max_batch_inputs], timeout=120)
    except ProviderError as exc:
        fail(f"{provider.space.model} could not embed the probes: {exc}", as_json=as_json,
             payload={"error": "provider_failed"})
    q = np.asarray(vectors, dtype=np.float32)
    q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
    best = (q @ matrix.T).max(axis=1)
    nearest = sorted(zip(probes, best.tolist()), key=lambda pc: -pc[1])
    return {"floor": relevance.measure_floor(best.tolist()), "pages": int(len(matrix)), "nearest": nearest}


def _render(model: str, floor: Any, measured: dict[str, Any] | None) -> None:
    def value(v: float | None) -> str:
        return f"{v:.2f}" if v is not None else "none (not cut)"

    lines = [("model", escape(model)),
             ("words held", f"{value(floor.known)}  for a question the pages hold every word of"),
             ("words not held", f"{value(floor.unknown)}  for a question whose words no page holds (in between: "
                                "by the share held)"),
             ("source", escape(f"{floor.source}: {floor.detail}" if floor.detail else floor.source))]
    if measured is not None:
        top = ", ".join(f"{p!r} {c:.2f}" for p, c in measured["nearest"][:3])
        lines.append(("measured", escape(f"{len(measured['nearest'])} probes over {measured['pages']:,} pages: "
                                         f"97% stay under {measured['floor']:.2f}; the nearest: {top}")))
    width = max(len(k) for k, _ in lines)
    for key, text in lines:
        console.print(f"{key:<{width}}  {text}", soft_wrap=True)

