"""Replication's engine: every ordered log of a home applied, in order, into its database.

- `backend.py`  the seam a log's storage implements (`LogBackend`; `core.log.FileLog` is the one today);
- `appliers.py` how a log's records are applied: records that decide (`DecidingApplier`, the pages log,
                outcomes in applied_ops) and records that file derived rows (`FilingApplier`, the vectors);
- `engine.py`   the engine itself (`catch_up`, positions) and `Stream`, one log as a node holds it;
- `shapes.py`   what a record kind's payload must hold;
- `kinds.py`    a record kind as one declaration (`RecordKind`), a log's kinds (`LogKinds`) and what is read
                off them; the tombstone every log declares.

The logs register here; nothing here knows a page or a vector.
"""
