"""A home's logs moving — into a shared directory (`crewlet sync join DIR`), or onto NATS JetStream
(`crewlet sync join nats://…`) — written down before the first step and finished by the next open wherever a kill
left it (issue 34), the pattern of `core/store/replace.py`.

The join (core/sync/join.py, nats_join.py) decides everything first — the checks, the names things are kept
under, node.toml's text — and writes it down, durably, as `node.toml.joining` (`Home.join_note`); then it does the
steps below, each of them done or found done. `finish`, which `Node.open` calls before it reads anything else of
the home (and `sync join`, `sync adopt` before they look), does what is left the same way; a kill in `finish`
too leaves it to the next open. A new node is undone instead: it holds nothing of its own yet, and the home is
then as before the join (a second join starts it again). The lock is the home's swap lock (`replace.held`),
held from before the note is written until it is removed.

Here, below the node, because the node finishes a join before it opens: nothing here reads company.toml or
decides; it only does what the note says.
"""
from __future__ import annotations

import fcntl
import logging
import os
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from ..durable import fsync_dir, fsync_file, write_atomic
from ..errors import CrewletError, Refused
from ..paths import Home
from ..store import replace as replace_db
from .filelog import HOLDER_SUFFIX, FileLog
from .jetstream_company import convert_positions, set_activation

log = logging.getLogger("crewlet.join")

# beside the shared logs: held by a first node while it decides whether the directory is still empty and copies
# into it, so two homes joining one empty directory at once never copy over each other (`sync join` counts a
# directory holding only this file as empty)
FIRST_JOIN_LOCK = ".first-join.lock"


class DirectoryTaken(Refused):
    """The directory became another home's shared directory before this home's first join copied into it."""

    code = "directory_taken"


def begin(home: Home, plan: dict[str, Any]) -> None:
    """Write the join down (the caller holds `replace.held(home.db_file)`)."""
    replace_db.write_note(home.join_note, plan)


@contextmanager
def own_logs_held(root: Path, names: list[str]) -> Iterator[None]:
    """Hold the writers' lock of each of the home's own logs (`root/log/NAME`) that is there."""
    with ExitStack() as stack:
        for name in names:
            path = root / "log" / name
            if path.exists():
                flog = stack.enter_context(FileLog(path))
                stack.enter_context(flog.locked())
        yield


def copy_durably(src: Path, dest: Path) -> None:
    tmp = dest.with_name(f".{dest.name}.joining")
    # copy2 keeps the modification time: company.toml's is its activation instant, and a copy must not
    # look like a new activation (which would re-stamp every container document)
    shutil.copy2(src, tmp)
    fsync_file(tmp)
    os.replace(tmp, dest)


def node_toml(table: dict[str, Any]) -> str:
    """node.toml's text as `config.write_node` writes it (`NodeSettings.to_toml()`): a join's note carries it, and
    its steps write it as it is."""
    import tomli_w

    return tomli_w.dumps(table)


def _write_node(home: Home, text: str) -> None:
    write_atomic(home.node_file, text.encode("utf-8"))


@contextmanager
def directory_held(directory: Path) -> Iterator[None]:
    """Hold off every other home's first join of `directory` (a flock of FIRST_JOIN_LOCK in it: the directory passed
    `locks.require`, so the lock holds between machines too). Waits for one under way, saying so."""
    fd = os.open(directory / FIRST_JOIN_LOCK, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.warning("waiting for another home's `crewlet sync join` of %s to finish", directory)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)   # closing the descriptor releases the lock


def begins_with(whole: Path, prefix: Path, size: int | None = None) -> bool:
    """Are the first `size` bytes of `prefix` (all of them by default) the first bytes of `whole`?"""
    size = prefix.stat().st_size if size is None else size
    if not whole.is_file() or whole.stat().st_size < size:
        return False
    with open(prefix, "rb") as a, open(whole, "rb") as b:
        left = size
        while left:
            n = min(left, 1 << 20)
            if a.read(n) != b.read(n):
                return False
            left -= n
    return True


def _not_ours(root: Path, directory: Path, plan: dict[str, Any]) -> str | None:
    """Why the shared directory's logs and company.toml are not this home's copies (None when they are: a join
    killed after it copied them). The copies are byte for byte; a log may only have grown since (other nodes
    write to it once company.toml is there)."""
    own_config = root / "company.toml"
    for name in plan["logs"]:
        own = root / "log" / name
        if own.is_file() and not begins_with(directory / name, own):
            return f"{directory / name} does not begin with this home's {name}"
    if not own_config.is_file() or own_config.read_bytes() != (directory / "company.toml").read_bytes():
        return f"{directory / 'company.toml'} is not this home's company.toml"
    return None


def finish(home: Home) -> str | None:
    """Finish a join a killed process left written down in the home (`Home.join_note`), before anything else of
    the home is read: each step of it is done or found done, so a kill in this too leaves the next open to
    finish it. A new node is undone instead (it holds nothing of its own yet: the home is as before the join).
    Returns what was found ("first", "joined", "new", "nats-first"; "undone": a first node's join whose directory
    another home made its own meanwhile), None when no join was under way (one stat)."""
    if not home.join_note.exists():
        return None
    with replace_db.held(home.db_file):
        try:
            plan = replace_db.read_note(home.join_note, "a `crewlet sync join`",
                                        f"move it aside once {home.root}'s node.toml names what it should join")
        except OSError as exc:
            raise CrewletError(str(exc), code="join_unfinished") from None
        if plan is None:
            return None   # finished meanwhile by whoever held the lock before us
        kind = str(plan.get("kind"))
        try:
            if kind == "first":
                try:
                    first_steps(home.root, plan)
                except DirectoryTaken as exc:
                    log.warning("a `crewlet sync join` a stopped process left on %s was not finished: %s",
                                home.root, exc)
                    return "undone"
            elif kind == "joined":
                joined_steps(home.root, plan)
            elif kind == "new":
                undo_new(home, plan)
            elif kind == "nats-first":
                nats_first_steps(home.root, plan)
            else:
                raise OSError(f"{home.join_note} names no join crewlet makes ({kind!r}) — move it aside once "
                              f"{home.root}'s node.toml names what it should join")
        except (KeyError, TypeError) as exc:
            raise CrewletError(f"{home.join_note} cannot be read (no {exc}) — move it aside once {home.root}'s "
                               "node.toml names what it should join", code="join_unfinished") from None
        except (OSError, sqlite3.Error) as exc:
            raise CrewletError(f"a `crewlet sync join` was under way on {home.root} when that process stopped, and it "
                               f"cannot be finished now ({exc}) — fix the cause and run the command again; nothing was "
                               "lost", code="join_unfinished") from None
    log.warning("finished a `crewlet sync join` (%s) a stopped process left half done on %s", kind, home.root)
    return kind


def sweep_half_notes(home: Home) -> None:
    """A join killed while writing its note left a temporary file that never became the note (write_atomic renames
    it into place only once whole): nothing was done after it, so it is only removed."""
    if home.root.is_dir():
        for half in home.root.glob(f".{home.join_note.name}.*.tmp"):
            half.unlink(missing_ok=True)


def undo_new(home: Home, plan: dict[str, Any]) -> None:
    """A new node killed before it was whole: what the join made is removed, the note last."""
    for child in list(home.root.iterdir()):
        if child != home.join_note:
            shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink(missing_ok=True)
    done(home)
    if plan.get("created"):
        try:
            home.root.rmdir()
        except OSError:
            pass   # something else is in it now: left as it is


def first_steps(root: Path, plan: dict[str, Any]) -> list[str]:
    """The first node's join from its note, each step done or found done: the logs and company.toml copied into
    DIR (company.toml last: a directory becomes one other homes may join only once it is there, so until then
    the copies are made again over any half-made one), node.toml naming DIR (the moment the home becomes a
    node), then the originals removed (byte for byte in DIR). Whether DIR is still empty and the copying are
    decided under DIR's first-join lock; a company.toml found there is this join's own copy only when DIR's logs
    begin with the home's and its company.toml is byte for byte the home's — else DIR is another home's, and
    this join is undone (`DirectoryTaken`), the home's logs untouched. Returns the files copied."""
    home, directory = Home(root), Path(plan["shared"])
    own_logs, own_config = root / "log", root / "company.toml"
    moved: list[str] = []
    if home.shared is None:
        directory.mkdir(parents=True, exist_ok=True)
        with directory_held(directory):
            if (directory / "company.toml").is_file():
                # copied already by this join (killed after), or the directory of another home that joined it
                # first meanwhile: only the first is done; the other leaves this home as it was, its logs whole
                problem = _not_ours(root, directory, plan)
                if problem is not None:
                    done(home)
                    raise DirectoryTaken(
                        f"{directory} became another home's shared directory while this home was joining it "
                        f"({problem}): {root} is as it was, its logs kept — to share its pages, join another "
                        f"empty directory, or publish them into that one from a node of it")
            else:
                with own_logs_held(root, plan["logs"]):
                    sources = sorted(p for p in own_logs.rglob("*")
                                     if p.is_file() and not p.name.endswith(HOLDER_SUFFIX)) if own_logs.is_dir() else []
                    for src in sources:
                        dest = directory / src.relative_to(own_logs)
                        dest.parent.mkdir(parents=True, exist_ok=True)
                        copy_durably(src, dest)
                        moved.append(str(dest))
                    for name in plan["logs"]:  # a log the home never wrote is created empty, as `init` creates it
                        shared_log = directory / name
                        if not shared_log.exists():
                            FileLog(shared_log).close()
                    fsync_dir(directory)   # every log in place before company.toml says the directory is one
                    copy_durably(own_config, directory / "company.toml")
                    moved.append(str(directory / "company.toml"))
                    fsync_dir(directory)
        _write_node(home, plan["node_toml"])
    shutil.rmtree(own_logs, ignore_errors=True)
    own_config.unlink(missing_ok=True)
    done(home)
    return moved


def done(home: Home) -> None:
    home.join_note.unlink(missing_ok=True)
    fsync_dir(home.root)


def joined_steps(root: Path, plan: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Joining a directory that holds a log, from its note, each step done or found done: node.toml naming DIR,
    the home's company.toml kept aside, its database started over (`rebuild`: the shared log declares what its
    own log held; its diaries carried) and its logs kept aside — or removed when they are byte for byte a prefix
    of DIR's. Nothing here reads DIR: a kill anywhere is finished by the next open. Returns (kept aside,
    removed)."""
    home = Home(root)
    kept, removed = [], []
    if home.shared is None:
        _write_node(home, plan["node_toml"])
    own_config, own_logs = root / "company.toml", root / "log"
    company_aside = root / plan["company_aside"]
    if own_config.is_file():
        os.replace(own_config, company_aside)
    if company_aside.exists():
        kept.append(str(company_aside))
    if plan["db_aside"]:
        db_aside = root / plan["db_aside"]
        replace_db.finish_held(home.db_file)   # the swap below, killed halfway: finished
        if not db_aside.exists():
            start_over(home, db_aside, plan["carry"])
        kept.append(str(db_aside))
    if plan["log_aside"]:
        log_aside = root / plan["log_aside"]
        if own_logs.exists():
            os.replace(own_logs, log_aside)
        kept.append(str(log_aside))
    else:
        removed.append(str(own_logs))  # byte for byte a prefix of DIR's logs
        shutil.rmtree(own_logs, ignore_errors=True)
    done(home)
    return kept, removed


def start_over(home: Home, aside: Path, carry: list[str]) -> None:
    """The home's database replaced by an empty one (the node then applies the shared log from the start), the
    old one kept as `aside` and its agents' diaries — on no log — carried into the new file, through the swap a
    killed join leaves the next open to finish (core/store/replace.py)."""
    # every table the migrations make, no row
    replace_db.rebuild(home.db_file, ".joining", lambda conn: None, aside, carry,
                      (home.index_dir, home.codes_dir))


def nats_first_steps(root: Path, plan: dict[str, Any]) -> list[str]:
    """The switch of the first node onto JetStream, from its note (the streams hold every record, verified), each
    step done or found done — so a kill anywhere is finished by the next open: the database's positions become
    stream positions, company.toml says `backend = "jetstream"` (in the shared directory too, where the other nodes
    read it and follow), node.toml forgets the directory, the file logs are kept aside (renamed: a writer that
    still held one refuses rather than append to it). Returns the files kept aside."""
    home = Home(root)
    if home.db_file.exists():
        convert_positions(home.db_file)   # (seq, seq - 1) whatever they were: done twice is done once
    text, activated_at = str(plan["text"]), int(plan["activated_at"] or 0)
    own_config = root / "company.toml"
    write_atomic(own_config, text.encode("utf-8"))
    set_activation(own_config, activated_at)
    shared = Path(plan["shared"]) if plan["shared"] else None
    if shared is not None:
        # the other nodes of the directory read the switch there and follow at their next open
        write_atomic(shared / "company.toml", text.encode("utf-8"))
        set_activation(shared / "company.toml", activated_at)
        _write_node(home, plan["node_toml"])
    elif not plan["had_node_id"]:
        _write_node(home, plan["node_toml"])
    kept = []
    for path, aside_name in plan["logs"].items():
        src = Path(path)
        aside = src.with_name(aside_name)
        if src.exists():
            os.replace(src, aside)   # a writer still holding the file refuses (LogMoved)
        if aside.exists():
            kept.append(str(aside))
        fsync_dir(src.parent)
    home.join_note.unlink(missing_ok=True)
    fsync_dir(root)
    return kept


__all__ = ["FIRST_JOIN_LOCK", "DirectoryTaken", "directory_held", "begin", "node_toml", "finish", "sweep_half_notes",
           "first_steps", "joined_steps", "undo_new", "nats_first_steps", "start_over", "done", "own_logs_held",
           "copy_durably"]
