"""Reading the company's git repositories: what an entry's code citations are checked against.

`Repository` (one long-lived cat-file process each, git.py), modules and scopes (modules.py), citations
checked at write (citations.py), citations carried to a newer commit (anchor.py). See docs/entries.md.
"""
from core.repos.anchor import (CHANGED, GONE, HELD, MOVED, NOT_READ_YET, SHIFTED, Anchor, recheck,
                               recheck_all)
from core.repos.citations import (FAILS, HOLDS, MAX_CITATIONS, CitationCheck, CodeCitation, LinkCitation,
                                  ShapeError, check_citations, check_code, first_failure, parse_citation)
from core.repos.git import CatFile, Unreadable
from core.repos.modules import Scope, find_modules, modules_reached, parse_scope, scope_matches
from core.repos.repositories import Repositories
from core.repos.repository import Repository

__all__ = [
    "Anchor", "CHANGED", "CatFile", "CitationCheck", "CodeCitation", "FAILS", "GONE", "HELD", "HOLDS",
    "LinkCitation", "MAX_CITATIONS", "MOVED", "NOT_READ_YET", "Repositories", "Repository", "SHIFTED",
    "Scope", "ShapeError", "Unreadable", "check_citations", "check_code", "find_modules", "first_failure",
    "modules_reached", "parse_citation", "parse_scope", "recheck", "recheck_all", "scope_matches",
]
