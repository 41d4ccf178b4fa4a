"""A SciFact home for `crewlet search eval`: the 5,183 abstracts as pages (four spaces by document id), for
`crewlet worker --once` to embed with the configured model and train the semantic index over.

    .venv/bin/python bench/scifact_home.py DIR      # then: CREWLET_HOME=DIR/home crewlet worker --once
"""
from __future__ import annotations

import argparse
from pathlib import Path

from _common import Doc, load_pages, new_home, read_jsonl

CORPUS = Path("/work/shared/ir/scifact/corpus.jsonl")
SPACES = ("SCIA", "SCIB", "SCIC", "SCID")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", nargs="?", default="bench/.out/scifact", help="where the home goes (DIR/home)")
    root = Path(ap.parse_args().dir)
    docs = [Doc(d["_id"], d.get("title") or d["_id"], d.get("text") or "", SPACES[int(d["_id"]) % len(SPACES)])
            for d in read_jsonl(CORPUS)]
    root.mkdir(parents=True, exist_ok=True)
    home = new_home(SPACES, root)
    from core.node import Node

    with Node.open(home) as node:
        load_pages(node, docs)
    print(f"{len(docs):,} pages in {home.root}")


if __name__ == "__main__":
    main()
