"""An agent's own memory: its private diary, and the marker that says it has read its onboarding.

- `notes.py`: what a note may be — one declarative fact, within a bound, holding no credential.
- `diary.py`: `Diary` — remember, forget, read (the agent its own; a person any agent's), and recall:
  the union of the vector top-50 and the recency top-50, fused by rank.
- `core/duties/diary_fill.py`: the diary-fill duty — notes written without a vector, or under another
  model, embedded on the one duty runner.
- `onboarding.py`: the chain an agent's onboarding depends on, its hash, the marker, and the pass lease
  that keeps two sessions from onboarding one agent at once.
- `overview.py`: every configured agent with its space, onboarding state and diary size (`crewlet agents`).

A diary is this node's own (docs/architecture.md, "An agent's own memory"): its rows are written to the
database of the node the agent runs on and never travel on a log. Onboarding markers do travel: they are
`onboarding.mark` records every node applies.
"""
