"""The knowledge bank (spec 003; docs/entries.md): entries — one fact each, under a page, checked against the
code they cite — with their triage, decay and generated pages.

`EntryBank` (entries.py) adds, edits, supersedes, accepts, verifies, disputes and archives entries, sets a
page's entry policy and lists what a page holds; `trust.py` derives an entry's trust tier from its status and
its citations' last checks; `context.py` is what an agent gets for a work area (`load_context`); `settings.py` is the bank's part of [knowledge], each value with the layer it came
from. The records, their tables and the applier's decisions are the pages log's (core/pages/entry_*.py,
declared in core/pages/kinds.py; docs/entries.md, "Entries on the log"); the duties and tools join this package.
"""
