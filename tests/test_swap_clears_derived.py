"""A database swapped in (a repair's replay, a join's start-over, an adopted snapshot) takes the derived files
with the old one: the keyword index and the code and vector files. A replay may give a vector's row id to
another source, and a vector file vouched by its position and a sample of rows could then score one page with
its neighbour's vector (a review of the merged change found the code and vector files left behind)."""
from __future__ import annotations

from core.node import Node
from core.pages.service import KnowledgeBase
from core.store import replace as replace_db


def test_a_rebuilt_database_takes_the_index_and_the_code_and_vector_files_with_it(home):
    with Node.open(home) as node:
        KnowledgeBase(node).create_page("ENG", "Kept", "a page\n")
    for derived in (home.index_dir, home.codes_dir):
        derived.mkdir(parents=True, exist_ok=True)
        (derived / "vectors-0123.bin").write_bytes(b"derived from the old rows")
    replace_db.rebuild(home.db_file, ".rebuilding", lambda conn: None, home.root / "crewlet.db.aside", [],
                       (home.index_dir, home.codes_dir))
    assert not home.index_dir.exists() and not home.codes_dir.exists()
    assert (home.root / "crewlet.db.aside").exists()
