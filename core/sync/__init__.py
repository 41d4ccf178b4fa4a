"""Replication: several homes (nodes) share one directory holding the logs and company.toml, and each
applies the logs, in order, into its own database.

- `locks`: does the shared directory's filesystem honour the writers' lock between machines?
- `peers`: each node's position, published beside the logs (`nodes/<id>.json`).
- `join`: `crewlet sync join DIR` — the first node moves its logs and configuration into DIR; a home with
  nothing of its own joins DIR; a new home is created from DIR (optionally from a snapshot).
- `snapshot`: a consistent copy of a node's database with the positions it holds; checking one against
  the shared logs and adopting it.
- `status`: a node's position, the logs' ends, the peers seen and their lag.
- `digest`: the content digest every node that applied the same log must agree on.
- `watch`: wakes a node's background worker when another node appended.

Modules here import `core.node` lazily or not at all, so the node can use `locks` and `peers`.
"""
