"""Where a search stands: the applied position of the pages log, the pages' version and the vector log's
position, read once, together, at the start of a search and handed to every step that keys a cache on
one of them (the access policy's excluded pages, the embedding coverage, the code table, the pages a
search by meaning passes over) and to the coverage the answer reports.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..pages import reads

if TYPE_CHECKING:
    from ..node import Node


@dataclass(frozen=True)
class Stamp:
    applied: int       # the last pages-log record this node applied
    version: int       # the pages' version: the last record that changed a page row
    vectors: int       # the last vector-log record this node applied


def read_stamp(node: Node) -> Stamp:
    """The stamp of this node's database now (one look, under the node's lock)."""
    with node.lock:
        conn = node.conn
        return Stamp(node.pages.position(conn)[0], reads.version(conn), node.vectors.position(conn)[0])
