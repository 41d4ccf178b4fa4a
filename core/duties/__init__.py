"""The node's background duties and the one runner that runs them.

- `runner.py`         the runner: `Duty`, `DutyRunner` (passes, cursors and status in the `duties` table,
                      leases), `PassContext` (progress, status, lease renewal, the stop);
- `roster.py`         the node's duties in tick order (`default_duties`), the two small ones (apply, trash
                      reaper), and `run_duties`: what the app and `crewlet worker` both call;
- `keyword_index.py`, `embedding.py`, `semantic_index.py`, `diary_fill.py` (agents' notes: core/agents),
  `entry_recheck.py`, `entry_decay.py`, `triage.py`, `upkeep.py` (the knowledge bank's entries: core/bank): a duty each.

The duties by name, as the runner's table and every screen name them (this module imports nothing: the
app reads these names at launch without loading a duty).
"""
APPLY = "apply"
KEYWORD_INDEX = "keyword-index"
TRASH_REAPER = "trash-reaper"
EMBEDDING = "embedding"
SEMANTIC_INDEX = "semantic-index"
DIARY_FILL = "diary-fill"
ENTRY_RECHECK = "entry-recheck"
ENTRY_DECAY = "entry-decay"
TRIAGE = "triage"
UPKEEP = "upkeep"
PAGE_REFRESH = "page-refresh"
