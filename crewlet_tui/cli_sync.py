"""`crewlet sync …`: replication — homes (nodes) sharing one directory of logs, each applying them into
its own database. `join` makes a home a node (or creates one), `status` says how far this node and its
peers are, `snapshot` writes a consistent copy of this node's database, `adopt` starts this node over
from one."""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer


from .cli_common import (JSON_OPT, STATE, console, damage_line, emit_json, err_console, existing_home, fail,
                         handle_errors, warn)
from .fmt import plural
from .sanitize import markup_safe

if TYPE_CHECKING:
    from core.sync.status import SyncStatus
# the engine is imported by the commands that use it (start-up: every command imports this module)

app = typer.Typer()             # this module's commands (cli_root adds them to `crewlet`)
sync_app = typer.Typer(help="Replication: several homes share one directory of logs and converge on the same "
                            "knowledge base.", no_args_is_help=True)
app.add_typer(sync_app, name="sync")


class _Applying:
    """Counts records applied while joining or adopting, with a bar on a terminal."""

    def __init__(self, *, enabled: bool) -> None:
        from .progress_bars import ProgressBars

        self.bars = ProgressBars(err_console, enabled=enabled)
        self.done = 0

    def __call__(self, n: int) -> None:
        self.done += n
        self.bars("apply", self.done, 0, "applying the shared log")

    def close(self) -> None:
        self.bars.close()



@sync_app.command("join")
@handle_errors
def sync_join(
    target: str = typer.Argument(..., metavar="DIR|URL", help="The shared directory: empty (this home becomes its "
                                 "first node) or one other nodes share; or NATS servers, nats://HOST:4222."),
    snapshot: Path | None = typer.Option(None, "--snapshot", metavar="FILE", help="Start a NEW node from this snapshot "
                                                                      "(`crewlet sync snapshot` on a current node)."),
    operator: str | None = typer.Option(None, "--operator", metavar="HANDLE", help="A new node's operator (who it acts as by "
                                                                     "default); else company.toml's."),
    replicas: int | None = typer.Option(None, "--replicas", min=1, max=5, metavar="N", help="JetStream: copies of each stream "
                                           "(default 1 for one server, 3 for a cluster)."),
    prefix: str | None = typer.Option(None, "--prefix", metavar="PREFIX", help="JetStream: the streams' name prefix (default "
                                                                 "crewlet: crewlet-pages, crewlet-vectors)."),
    creds: str | None = typer.Option(None, "--creds", metavar="FILE", help="JetStream: a NATS credentials file, kept in \\[log] "
                                                               "creds (each node reads its own copy at that path)."),
    token_env: str | None = typer.Option(None, "--token-env", metavar="NAME", help="JetStream: the NAME of the environment "
                                                                       "variable holding the server's token."),
    tls_ca: str | None = typer.Option(None, "--tls-ca", metavar="FILE", help="JetStream: a CA file for tls:// servers whose "
                                                                 "certificate a private CA signed."),
    as_json: bool = JSON_OPT,
) -> None:
    """Make this home a node of a shared directory of logs or of NATS JetStream, or create a new node.

    NATS: an existing home moves its company onto JetStream (the streams are created, its records copied and checked there, then company.toml switched); a new --home is made from the servers alone.

    An existing home and an empty DIR: its logs and company.toml move into DIR. An existing home and a DIR that holds a log: it joins if it has written nothing of its own. A new --home: a node is made from DIR (or from --snapshot) and applies the log. Stop the app and any worker on the home first."""
    from core.sync import join as join_mod

    home = STATE.home
    applying = _Applying(enabled=not as_json and sys.stderr.isatty())
    started = time.perf_counter()
    try:
        result = join_mod.join(home, target, snapshot=snapshot, operator=operator, progress=applying,
                               replicas=replicas, prefix=prefix, creds=creds, token_env=token_env,
                               tls_ca=tls_ca)
    finally:
        applying.close()
    seconds = time.perf_counter() - started
    if as_json:
        emit_json(result.to_json() | {"home": str(home.root), "seconds": round(seconds, 3)})
        return
    if not hasattr(result, "shared"):
        _render_nats_join(home, result, seconds)
        return
    shared = markup_safe(str(result.shared))
    if result.kind == "first":
        console.print(f"{markup_safe(str(home.root))} is the first node of {shared} (node {result.node_id}): its logs "
                      "and company.toml are there now", soft_wrap=True)
    elif result.kind == "joined":
        console.print(f"{markup_safe(str(home.root))} joined {shared} as node {result.node_id}", soft_wrap=True)
    elif result.kind == "new":
        console.print(f"new node {result.node_id} at {markup_safe(str(home.root))}, sharing {shared}", soft_wrap=True)
    else:
        console.print(f"{markup_safe(str(home.root))} is already node {result.node_id} of {shared}", soft_wrap=True)
    if result.snapshot is not None:
        console.print(f"started from the snapshot {markup_safe(result.snapshot.line())}", soft_wrap=True)
    for kept in result.kept_aside:
        console.print(f"kept aside: {markup_safe(kept)}", soft_wrap=True)
    rate = f" in {seconds:.1f} s" if result.applied else ""
    console.print(f"applied {plural(result.applied, 'record')} of the shared log{rate}; `crewlet sync status` shows where "
                  "every node is")


def _render_nats_join(home, result, seconds: float) -> None:
    root, servers = markup_safe(str(home.root)), markup_safe(result.servers)
    if result.kind == "first":
        copied = ", ".join(plural(n, f"{log} record") for log, n in result.copied.items())
        console.print(f"{root} moved its company onto NATS JetStream at {servers} (node {result.node_id}): copied "
                      f"{copied}; a node applied from the streams holds the same content (digest {result.digest})",
                      soft_wrap=True)
    elif result.kind == "new":
        console.print(f"new node {result.node_id} at {root}, on NATS JetStream at {servers}", soft_wrap=True)
    else:
        console.print(f"{root} is already node {result.node_id} of the company on {servers}", soft_wrap=True)
    if result.snapshot is not None:
        console.print(f"started from the snapshot {markup_safe(result.snapshot.line())}", soft_wrap=True)
    for kept in result.kept_aside:
        console.print(f"kept aside: {markup_safe(kept)}", soft_wrap=True)
    rate = f" in {seconds:.1f} s" if result.applied else ""
    console.print(f"applied {plural(result.applied, 'record')} from the streams{rate}; `crewlet sync status` shows where "
                  "this node is and what the servers promise")


@sync_app.command("status")
@handle_errors
def sync_status_cmd(
    digest: bool = typer.Option(False, "--digest", help="Also print this node's content digest (every node at the "
                                                        "same position must print the same)."),
    as_json: bool = JSON_OPT,
) -> None:
    """Show this node's applied position, where each log ends, and the peers seen with their lag.

    Read as it is: nothing is applied first, so the lag shown is the lag there was."""
    from core.node import Node
    from core.store.digest import content_digest
    from core.sync.status import status as sync_status

    home = existing_home()
    with Node.open(home, sync_containers=False, catch_up=False) as node:
        st = sync_status(node, digest_now=True if digest else None)
        # the digest status just computed (a node of a shared directory), else computed here: once either way
        dig = (node.last_digest or content_digest(home.db_file)) if digest else None
    if st.damage is not None:
        warn(damage_line(st.damage))
    for d in st.disagree:
        warn(d.line())
    if as_json:
        emit_json(st.to_json() | ({"digest": dig.to_json()} if dig else {}))
        return
    _render_status(st)
    if dig is not None:
        console.print(f"content digest  {dig.content}  (positions {dig.positions})")
        console.print("                (agents' diaries are not in it: they are this node's own, on no log)")


def _render_status(st: SyncStatus) -> None:
    console.print(f"node      {st.node_id or '(no id yet)'} — {markup_safe(st.home)}"
                  + (f", operator {markup_safe(st.operator)}" if st.operator else ""), soft_wrap=True)
    if st.jetstream is not None:
        js = st.jetstream
        console.print(f"log       NATS JetStream at {markup_safe(', '.join(js['servers']))} (streams {markup_safe(js['stream_prefix'])}-*, "
                      f"{js['replicas']} replica(s))", soft_wrap=True)
        if js["offline"]:
            console.print(f"[yellow]{markup_safe(js['offline'])}[/]", soft_wrap=True)
        for line, d in zip(js["durability_lines"], js["durability"]):
            style = "green" if not d["lazy"] and not d["error"] else "yellow"
            console.print(f"durability [{style}]{markup_safe(line)}[/]", soft_wrap=True)
    elif st.shared is None:
        console.print("shared    not joined: this home's logs are its own (`crewlet sync join DIR` shares them)",
                      soft_wrap=True)
    else:
        lock = st.locks
        verdict = f"[green]{markup_safe(lock.why)}[/]" if lock and lock.ok else f"[red]{markup_safe(lock.why if lock else '?')}[/]"
        console.print(f"shared    {markup_safe(st.shared)} — {verdict}", soft_wrap=True)
    damaged_log = str(st.damage.path) if st.damage is not None else None
    for line in st.logs:
        lag = "current" if not line.behind else f"[yellow]{line.behind:,} behind[/]"
        if damaged_log is not None and not line.behind:
            lag = "nothing behind it"   # this log is whole, but the node is not current while another is damaged
        if damaged_log == line.path:
            good = st.damage.good_through
            lag = "[red]damaged" + (f" past record {good:,}" if good is not None else "") + "[/] — `crewlet log check`"
        console.print(f"{line.name:<9} applied through seq {line.applied_seq:,} of {line.log_seq:,} — {lag}", soft_wrap=True)
    console.print(f"diaries   {markup_safe(st.diary_line())}", soft_wrap=True)
    if st.jetstream is not None and st.jetstream["lazy"]:
        err_console.print("crewlet: warning: a server of this company's log does not fsync every write (or does not "
                          "say): an acknowledged write can be lost with its machine — see `durability` above", soft_wrap=True)
    if st.shared is None and (st.jetstream is None or st.jetstream["offline"]):
        return
    if not st.peers:
        console.print("peers     none has said where it is yet")
        return
    for d in st.disagree:
        console.print(f"[red]digests   {markup_safe(d.line())}[/] — a node that applied the same records holds other "
                      "content: check it (`crewlet sync status --digest` there), or start it over from a snapshot of "
                      "a node that agrees", soft_wrap=True)
    if st.digest is not None and not st.disagree:
        console.print(f"digests   {plural(st.agree, 'peer')} at this node's position hold the same content", soft_wrap=True)
    elif st.digest_note:
        console.print(f"digests   {markup_safe(st.digest_note)}", soft_wrap=True)
    console.print(f"peers     {len(st.peers)} seen:")
    for p in st.peers:
        behind = ", ".join(f"{name} {n:,} behind" if n else f"{name} current" for name, n in p.behind.items())
        me = " (this node)" if p.this_node else ""
        console.print(f"  {p.peer.node_id}{me}  {markup_safe(p.peer.host)}:{markup_safe(p.peer.home)}  "
                      f"pages seq {p.peer.seq('applier'):,}  {behind}  seen {_ago(p.age_s)}", soft_wrap=True)


def _ago(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.0f} h ago"
    return f"{seconds / 86400:.0f} days ago"


@sync_app.command("snapshot")
@handle_errors
def sync_snapshot(
    out: Path = typer.Argument(..., metavar="FILE", help="The file to write (must not exist)."),
    as_json: bool = JSON_OPT,
) -> None:
    """Write a consistent copy of this node's database, with the log positions it holds.

    A new node starts from it (`crewlet --home NEW sync join DIR --snapshot FILE`) and applies only the log after those positions."""
    from core.node import Node
    from core.sync import snapshot as snapshot_mod

    home = existing_home()
    with Node.open(home, sync_containers=False) as node:
        info = snapshot_mod.take(node, out)
    if as_json:
        emit_json(info.to_json())
    else:
        console.print(f"snapshot written: {markup_safe(info.line())}", soft_wrap=True)


@sync_app.command("adopt")
@handle_errors
def sync_adopt(
    file: Path = typer.Argument(..., metavar="FILE", help="A snapshot `crewlet sync snapshot` wrote on a node of the same log."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Adopt without asking (for scripts)."),
    as_json: bool = JSON_OPT,
) -> None:
    """Start this node over from a snapshot of the same log.

    Its database is replaced (the old one kept aside) and the log after the snapshot's position is applied: the fix when this node's log no longer holds the position it needs. Stop the app and any worker on this home first."""
    from core.sync import join as join_mod, snapshot as snapshot_mod

    home = existing_home()
    info = snapshot_mod.check(home, file)  # refused with the reason before anything is asked or changed
    if not yes:
        if as_json or not sys.stdin.isatty():
            fail("adopting replaces this node's database: run it in a terminal to be asked, or pass --yes",
                 as_json=as_json, payload={"error": "confirm", "message": "pass --yes to adopt without asking"})
        console.print(f"adopt {markup_safe(info.line())}", soft_wrap=True)
        if not typer.confirm("Replace this node's database with it (the old one is kept aside)?", default=False):
            fail("not adopted: nothing was changed")
    applying = _Applying(enabled=not as_json and sys.stderr.isatty())
    try:
        result = join_mod.adopt(home, file, progress=applying)
    finally:
        applying.close()
    if as_json:
        emit_json(result.to_json())
        return
    console.print(f"adopted {markup_safe(result.snapshot.line())}", soft_wrap=True)
    if result.kept_aside:
        console.print(f"the database it replaced is kept as {markup_safe(result.kept_aside)}", soft_wrap=True)
    console.print(f"applied {plural(result.applied, 'record')} of the log after it; the search index is built again by the "
                  "next `crewlet worker` pass (or search)")
