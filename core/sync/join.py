"""`crewlet sync join DIR`: make a home a node of a shared directory.

Three cases, told apart by the home and by DIR:

- **first** — an existing home and an empty (or new) DIR: the home's logs (and everything beside them in
  `log/`) and its company.toml are copied into DIR and synced, node.toml is written naming DIR (the
  moment the home becomes a node), then the originals are removed. The home's own writers are held off
  by the logs' lock throughout, and one that waited for it finds the log moved and refuses (nothing is
  appended to a file left behind).
- **joined** — an existing home and a DIR that holds a log: allowed when the home has written nothing
  of its own. Either its logs are a byte-for-byte prefix of DIR's (a node restored from a backup, a
  join interrupted after the copy): it keeps its database and applies the rest; or its log holds only
  the container documents its configuration declared (a fresh `crewlet init`): its database is kept
  aside and the node applies DIR's log from the start. Anything else is refused, naming what it holds.
- **new** — a home that does not exist yet: node.toml, then a database — empty, or a checked snapshot
  (`--snapshot FILE`) — and the node applies the log after the snapshot's position.

A DIR whose filesystem does not carry flock between machines is refused before anything is written.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import config as config_mod
from ..errors import Refused
from ..log import FileLog, Record
from ..log.filelog import LogMismatch
from ..replica import engine
from ..paths import Home
from ..repair import aside_stamp, database_aside_path, home_logs
from ..store import connect
from ..store import replace as replace_db
from ..log import joining, locks
from . import snapshot as snapshot_mod
from .join_steps import logs_held, open_and_apply, running_here, whole_or_nothing
from .target import LogUrl, parse_target

SHARED_MARKERS = ("pages.log", "company.toml")
# this node's own rows a joining home keeps when it starts its database over: its agents' diaries (on no log)
DIARY_TABLES = ("agent_diary",)


@dataclass
class JoinResult:
    kind: str                       # first | joined | new | already
    shared: Path
    node_id: str
    applied: int = 0                # records this node applied while joining
    snapshot: snapshot_mod.SnapshotInfo | None = None
    moved: list[str] = field(default_factory=list)        # files now in DIR
    kept_aside: list[str] = field(default_factory=list)   # files of the home kept under another name
    removed: list[str] = field(default_factory=list)      # copies of bytes DIR holds, removed from the home

    def to_json(self) -> dict[str, Any]:
        return {"joined": self.kind, "shared": str(self.shared), "node_id": self.node_id, "applied": self.applied,
                "snapshot": self.snapshot.to_json() if self.snapshot else None, "moved": self.moved,
                "kept_aside": self.kept_aside, "removed": self.removed}




def _is_empty_dir(path: Path) -> bool:
    """Empty, or holding only what a killed lock probe left (core/log/locks.py: a file of that process's own) and the
    first-join lock a refused or undone first join left (core/log/joining.py)."""
    return path.is_dir() and not any(not child.name.startswith(".lock-probe.") and child.name != joining.FIRST_JOIN_LOCK
                                     for child in path.iterdir())


def join(home: Home, target: str | Path, *, snapshot: Path | None = None, operator: str | None = None,
         progress: Callable[[int], None] | None = None, replicas: int | None = None,
         prefix: str | None = None, creds: str | None = None, token_env: str | None = None,
         tls_ca: str | None = None) -> Any:
    """`target`: a shared directory, or NATS servers as `nats://HOST:4222` (a `scheme://` argument is never
    taken for a directory; an unknown scheme is refused)."""
    parsed = parse_target(target)
    home.require_directory()
    joining.finish(home)   # a join a killed process left half done: finished (or undone) before this one looks
    joining.sweep_half_notes(home)
    if isinstance(parsed, LogUrl):
        from . import nats_join

        return nats_join.join(home, parsed, snapshot=snapshot, operator=operator, replicas=replicas, prefix=prefix,
                              creds=creds, token_env=token_env, tls_ca=tls_ca, progress=progress)
    if replicas is not None or prefix is not None or creds is not None or token_env is not None or tls_ca is not None:
        raise Refused("--replicas, --prefix, --creds, --token-env and --tls-ca are settings of a log on NATS JetStream, not of a "
                      "shared directory", code="usage")
    directory = Path(parsed).expanduser().resolve()
    if directory.exists() and not directory.is_dir():
        raise Refused(f"{directory} is a file, not a directory — give the shared directory: an empty one (this "
                      "home becomes its first node) or one other nodes share", code="invalid_directory")
    if home.config_file.is_file() and config_mod.load(home.config_file).log.backend == "jetstream":
        raise Refused(f"{home.root}'s company is on NATS JetStream ({','.join(config_mod.load(home.config_file).log.url)}) "
                      f"— a home's logs are in one place; join {directory} with a new home", code="already_joined")
    settings = config_mod.load_node(home.node_file)
    if home.shared is not None:
        if home.shared.resolve() != directory:
            raise Refused(f"{home.root} is already a node of {home.shared} — a home shares one directory; "
                          f"join {directory} with a new home (`crewlet --home NEW sync join {directory}`)",
                          code="already_joined")
        if snapshot is not None:
            raise Refused(f"{home.root} is already a node of {directory}: to start it from a snapshot, "
                          "`crewlet sync adopt FILE`", code="already_joined")
        return JoinResult("already", directory, settings.node_id, applied=open_and_apply(home, progress))
    if directory == home.root or directory.is_relative_to(home.log_dir):
        raise Refused(f"{directory} is this home or inside its log directory — pick a directory outside the home",
                      code="invalid_directory")
    if home.config_file.is_file():
        if snapshot is not None:
            raise Refused(f"--snapshot starts a new node, and {home.root} is an existing home — give a new "
                          f"--home (`crewlet --home NEW sync join {directory} --snapshot {snapshot}`)",
                          code="home_exists")
        busy = running_here(home)
        if busy:
            raise Refused(f"{busy} is running on {home.root} — stop it (quit the app, stop `crewlet worker`) and "
                          "join again", code="busy")
        if not directory.exists() or _is_empty_dir(directory):
            return _first(home, directory, settings, progress)
        if (directory / "pages.log").is_file():
            return _join_existing(home, directory, settings, progress)
        raise Refused(f"{directory} holds files but no crewlet log — give an empty directory (the first node) or "
                      "one that other nodes share", code="invalid_directory")
    return _new_node(home, directory, snapshot, operator, progress)


def _log_names(home: Home) -> list[str]:
    """The home's logs, by their names in its own `log/` (and in DIR)."""
    return [str(spec.path.relative_to(home.root / "log")) for spec in home_logs(home)]


# -- the first node -----------------------------------------------------------------------------------------

def _first(home: Home, directory: Path, settings: config_mod.NodeSettings,
           progress: Callable[[int], None] | None) -> JoinResult:
    directory.mkdir(parents=True, exist_ok=True)
    locks.require(directory)
    company = config_mod.load(home.config_file)
    result = JoinResult("first", directory, settings.node_id or config_mod.new_node_id())
    plan = {"kind": "first", "shared": str(directory), "logs": _log_names(home),
            "node_toml": joining.node_toml(config_mod.NodeSettings(
                result.node_id, settings.operator or company.operator, str(directory),
                rerank_memory_mb=settings.rerank_memory_mb).to_toml())}
    with replace_db.held(home.db_file):
        joining.begin(home, plan)
        result.moved = joining.first_steps(home.root, plan)
    result.removed = [str(home.root / "log"), str(home.root / "company.toml")]
    result.applied = open_and_apply(Home(home.root), progress)
    return result


# -- joining a directory that holds a log ---------------------------------------------------------------------

def _is_prefix(own: Path, shared: Path) -> bool:
    """Are the bytes of `own`'s valid prefix the first bytes of `shared`?"""
    if not own.exists():
        return True
    with FileLog(own, readonly=True) as flog:
        end = flog.scan().end_offset
    return end == 0 or joining.begins_with(shared, own, end)


def _own_records(path: Path) -> list[Record]:
    if not path.exists():
        return []
    with FileLog(path, readonly=True) as flog:
        return [r for r, _ in flog.read()]


def _describe(records: list[Record]) -> str:
    kinds: dict[str, int] = {}
    for r in records:
        kinds[r.type] = kinds.get(r.type, 0) + 1
    return ", ".join(f"{n:,} {kind}" for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1]))


def _join_existing(home: Home, directory: Path, settings: config_mod.NodeSettings,
                   progress: Callable[[int], None] | None) -> JoinResult:
    locks.require(directory)
    # the home's own paths, taken before node.toml names DIR (after that the same names lead there)
    own_logs = home.log_dir
    if not (directory / "company.toml").is_file():
        raise Refused(f"{directory} holds a log but no company.toml — it is not a shared directory crewlet made (or "
                      "another home's first join of it is still copying: try again once it is done)",
                      code="invalid_directory")
    specs = home_logs(home)
    prefix = all(_is_prefix(spec.path, directory / spec.path.relative_to(own_logs)) for spec in specs)
    rebuild = False
    if prefix and home.db_file.exists():
        conn = connect(home.db_file)
        try:
            for spec in specs:
                applied = engine.applied_position(conn, spec.position)
                with FileLog(directory / spec.path.relative_to(own_logs), readonly=True) as flog:
                    try:
                        flog.locate(applied)
                    except LogMismatch:
                        prefix = False  # the database is ahead of its own log: not a prefix after all
        finally:
            conn.close()
    if not prefix:
        own = [r for spec in specs for r in _own_records(spec.path)]
        of_its_own = [r for r in own if not (r.type == "container.declare" and r.actor == "crewlet")]
        if of_its_own:
            raise Refused(f"{home.root} has written {len(of_its_own):,} record(s) of its own that {directory}'s log "
                          f"does not hold ({_describe(of_its_own)}) — a home joins a shared log only with nothing of "
                          f"its own: publish its pages into the shared knowledge base (`crewlet import` on a node), "
                          f"or start a new node (`crewlet --home NEW sync join {directory}`)", code="has_own_records")
        rebuild = True  # only its configuration's container documents: DIR's log declares the shared ones
    result = JoinResult("joined", directory, settings.node_id or config_mod.new_node_id())
    stamp = aside_stamp()
    plan = {"kind": "joined", "shared": str(directory), "carry": list(DIARY_TABLES),
            "node_toml": joining.node_toml(config_mod.NodeSettings(result.node_id, settings.operator, str(directory),
                                                                   rerank_memory_mb=settings.rerank_memory_mb
                                                                   ).to_toml()),
            "company_aside": f"company.toml.before-join-{stamp}",
            "log_aside": f"log.before-join-{stamp}" if rebuild else None,
            "db_aside": database_aside_path(home, "before-join").name
            if rebuild and home.db_file.exists() else None}
    with logs_held(home), replace_db.held(home.db_file):
        joining.begin(home, plan)
        result.kept_aside, result.removed = joining.joined_steps(home.root, plan)
    result.applied = open_and_apply(Home(home.root), progress)
    return result


# -- a new node ---------------------------------------------------------------------------------------------

def _new_node(home: Home, directory: Path, snapshot: Path | None, operator: str | None,
              progress: Callable[[int], None] | None) -> JoinResult:
    if home.root.exists() and not _is_empty_dir(home.root):
        raise Refused(f"{home.root} is not a crewlet home and not empty — give a new (or empty) directory as --home",
                      code="invalid_home")
    missing = [name for name in SHARED_MARKERS if not (directory / name).is_file()]
    if missing:
        raise Refused(f"{directory} holds no {' and no '.join(missing)}: it is not a shared directory yet — join it "
                      f"from an existing home first (`crewlet --home HOME sync join {directory}`)",
                      code="invalid_directory")
    locks.require(directory)
    company = config_mod.load(directory / "company.toml")
    if operator is not None and operator not in company.actors:
        raise Refused(f"--operator {operator} is not an actor of {directory / 'company.toml'} — name one of: "
                      f"{', '.join(sorted(company.actors)) or 'none'}", code="unknown_actor")
    result = JoinResult("new", directory, config_mod.new_node_id())
    created = not home.root.exists()
    with whole_or_nothing(home.root), replace_db.held(home.db_file):
        # a new node killed before it is whole is undone by the next open (it holds nothing of its own yet)
        joining.begin(home, {"kind": "new", "shared": str(directory), "created": created})
        config_mod.write_node(home.node_file, config_mod.NodeSettings(result.node_id, operator, str(directory)))
        joined = Home(home.root)  # points at DIR now: the snapshot is checked against the shared logs
        if snapshot is not None:
            result.snapshot = snapshot_mod.check(joined, snapshot)
            snapshot_mod.install(joined, result.snapshot)
        joining.done(home)
    result.applied = open_and_apply(Home(home.root), progress)
    return result


# -- adopting a snapshot on an existing node ------------------------------------------------------------------

@dataclass
class AdoptResult:
    snapshot: snapshot_mod.SnapshotInfo
    kept_aside: str | None
    applied: int

    def to_json(self) -> dict[str, Any]:
        return {"snapshot": self.snapshot.to_json(), "database_kept_as": self.kept_aside, "applied": self.applied}


def adopt(home: Home, file: Path, *, progress: Callable[[int], None] | None = None) -> AdoptResult:
    """Replace this node's database with a checked snapshot (the old one kept aside) and apply the log
    after the snapshot's position: the fix for a node whose log no longer holds the position it needs."""
    busy = running_here(home)
    if busy:
        raise Refused(f"{busy} is running on {home.root} — stop it (quit the app, stop `crewlet worker`) and adopt "
                      "again", code="busy")
    joining.finish(home)
    replace_db.finish(home.db_file)   # an adoption a killed process left half done: finished before this one is checked
    info = snapshot_mod.check(home, file)
    kept = snapshot_mod.install(home, info)
    return AdoptResult(info, str(kept) if kept else None, open_and_apply(Home(home.root), progress))
