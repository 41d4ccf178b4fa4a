"""What every CLI command shares: finding the home, acting as an actor, errors and --json output, and the
helpers more than one command module uses (the search's catch-up, an import plan's sections, the words under
`crewlet search`). A command module imports only public names from here, never another module's `_private`
ones (tests/test_cli_style.py).

Exit codes: 0 done, 1 refused or failed (one line on stderr), 2 usage (typer/click's own).

Start-up: `crewlet --help` and every command import this module and the CLI modules, so none of them
imports the engine at the top — a command imports what it uses when it runs (tests/test_startup.py
holds `--help` and `page show` to that).
"""
from __future__ import annotations

import importlib
import logging
import os
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import wraps
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, TypeVar

import typer
from rich.console import Console, ConsoleDimensions
from typer.core import TyperCommand
from typer.exceptions import TyperException

from core.errors import CrewletError, Description, describe
from core.paths import Home, resolve_home

from .fmt import when  # noqa: F401  (re-exported for the CLI modules)
from .sanitize import json_text, markup_safe

if TYPE_CHECKING:
    # typer 0.28 runs its own copy of click (typer._click): its commands take that copy's Context
    from typer import _click as click
    from rich.table import Table

    from core.importer import ImportReport
    from core.log import LogDamage
    from core.node import Node
    from core.pages.service import KnowledgeBase
    from core.search.indexer import IndexPass

# how wide plain output is where nothing sets a width: a line, whatever its length, stays one line
UNWRAPPED_WIDTH = 100_000


class PlainConsole(Console):
    """Rich's console, except that output going to a pipe or a file (not a terminal) is not wrapped: Rich
    would take 80 columns (or the width of whichever terminal it finds on another stream), and cut every
    longer sentence, title or table row into pieces a script or a reader of the file has to join again.
    COLUMNS, when set, still decides."""

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        if self._width is None and not self.is_terminal and not (self._environ.get("COLUMNS") or "").isdigit():
            return ConsoleDimensions(UNWRAPPED_WIDTH, size.height)
        return size

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]

    def on_broken_pipe(self) -> None:
        """Rich's own exits 1; a reader that stopped reading stdout (`| head -1`) is no failure (closed_pipe).
        A closed stderr keeps Rich's exit 1: the line it could not say may have been a refusal."""
        if self.stderr:
            super().on_broken_pipe()
        else:
            closed_pipe()


console = PlainConsole(highlight=False)
err_console = PlainConsole(stderr=True, highlight=False)

F = TypeVar("F", bound=Callable[..., Any])

JSON_OPT = typer.Option(False, "--json", help="Print JSON for scripts instead of a table.")


@dataclass
class Globals:
    home_arg: str | None = None
    actor: str | None = None
    actor_from_env: bool = False      # the actor was named by CREWLET_AS alone, not by --as

    @property
    def home(self) -> Home:
        return resolve_home(self.home_arg)


STATE = Globals()


def fail(message: str, *, as_json: bool = False, payload: dict[str, Any] | None = None, code: int = 1) -> None:
    """One line on stderr (and the JSON error on stdout for scripts), then exit 1. The message may
    carry a title, a handle or a config value: it is made inert like everything else printed."""
    if as_json:
        print(json_text(payload or {"error": "failed", "message": message}, indent=None))
    err_console.print(f"[bold red]crewlet:[/] {markup_safe(message)}", soft_wrap=True)
    raise typer.Exit(code)


def warn(message: str) -> None:
    """One line on stderr that does not fail the command."""
    err_console.print(f"[yellow]warning:[/] {markup_safe(message)}", soft_wrap=True)


class _SaidSafely(logging.Handler):
    """What the engine logs at WARNING and above — an embedding endpoint's error text among it — reaches
    stderr through the one sanitiser, one line each, whether stderr is a terminal or not (Python's last-resort
    handler wrote it raw: ESC, OSC, BEL and all)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
        except Exception:  # noqa: BLE001 - a record that does not format says nothing rather than crash
            return
        warn(text)


def say_warnings_safely() -> None:
    """Route the engine's warnings through `_SaidSafely` (once per process)."""
    root = logging.getLogger()
    if not any(isinstance(h, _SaidSafely) for h in root.handlers):
        root.addHandler(_SaidSafely(level=logging.WARNING))


def damage_line(exc: LogDamage) -> str:
    """The one line every command says over a damaged log: past which record, what, and what to run."""
    kept = f" (your text is kept in {exc.rescued_to})" if exc.rescued_to else ""
    return exc.line() + kept


def damage_json(exc: LogDamage | None) -> dict[str, Any] | None:
    """What `--json` answers carry of a damaged log (None when it is sound)."""
    if exc is None:
        return None
    return {"kind": exc.kind, "good_through": getattr(exc, "good_through", None), "offset": exc.offset,
            "seq": exc.seq, "path": str(exc.path), "message": damage_line(exc)}


def print_kept_nowhere(body: str) -> None:
    """A refused text that could not be kept under rescued/ (a full disk): it goes to stdout, so nothing typed
    is lost (made inert like every output; `--json` carries it exactly, as `your_body`)."""
    from .sanitize import clean_text

    text = clean_text(body)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def advice(said: Description) -> str:
    """The CLI's own next step after a refusal whose core words state the fact alone (MCP says its
    tools instead: core/mcp/session.py; the app its keys: crewlet_tui/screens/base.py)."""
    details = said.details
    if said.code == "knowledge_elsewhere":
        if details.get("write"):
            return (f" (`crewlet {details.get('backend')} import DIR` publishes a directory of Markdown files there)")
        return " — `crewlet search WORDS` searches it, `crewlet page show ID` reads a page"
    if said.code == "not_found" and details.get("space_unknown"):   # an address whose space does not exist
        return " — `crewlet spaces` lists the spaces there are"
    if said.code == "not_found" and "ref" in details and "container" in details:   # a reference naming no page
        container = details.get("container")
        return (f" — check the container and title (`crewlet pages {container}` lists its pages)" if container
                else " — give a page id or CONTAINER/Title")
    if said.code == "invalid_parent" and details.get("parent_container"):
        return f" — list `crewlet pages {details['parent_container']} --parent {details.get('parent')}`"
    return ""


# the engine names a refused argument by its field (the spec's `parent_id`); the CLI says the option a person typed
OPTION_OF_FIELD = {"parent_id": "--parent"}


def in_cli_words(said: Description) -> str:
    """A refusal's line with the field it names (details["field"]) said as the CLI's option for it."""
    text = said.message
    field = str(said.details.get("field") or "")
    option = OPTION_OF_FIELD.get(field)
    return text.replace(field, option) if option else text


def closed_pipe() -> NoReturn:
    """stdout's reader has gone (`crewlet search deploy | head -1`): what is left unprinted is not wanted, and
    that is no failure — exit 0, quietly. Whatever is still buffered goes to devnull (the recipe in Python's
    `signal` docs), so the interpreter's last flush does not fail on the closed pipe either."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):   # no stdout file descriptor to point elsewhere: nothing more is written
        pass
    raise SystemExit(0)


def handle_errors(fn: F) -> F:
    """Turn the engine's refusals and failures (core.errors.describe) into exit code 1 with one line, never a
    traceback; anything describe() calls internal is a real bug, shown as one."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        as_json = bool(kwargs.get("as_json"))
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, TyperException):
            raise
        except BrokenPipeError:
            closed_pipe()
        except Exception as exc:
            said = describe(exc, home=_home_or_none())
            if said.internal:
                raise
            if said.details.get("kept_nowhere") and not as_json:
                print_kept_nowhere(str(said.details.get("your_body", "")))
            message = in_cli_words(said) + advice(said)
            fail(message, as_json=as_json, payload=said.to_json(message))

    return wrapper  # type: ignore[return-value]


def _home_or_none() -> Home | None:
    """The home a failure of storage names when its error names no file (None: --home names none)."""
    try:
        return STATE.home
    except Exception:  # noqa: BLE001 - the failure being said matters more than the home's
        return None


def existing_home() -> Home:
    """The home this command names, refused with the fix when there is none there: the `init` it advises makes
    the home this command looked at (--home or CREWLET_HOME carried into it, so another home is not made)."""
    home = STATE.home
    home.require_directory()
    if not home.exists():
        fix = (f"run `crewlet --home {shlex.quote(str(home.root))} init --example`" if STATE.home_arg
               else "run `crewlet init --example` (or pass --home DIR)")
        raise CrewletError(f"no crewlet home at {home.root}", fix=fix, code="no_home")
    return home


def unknown_actor(company: Any, handle: str) -> CrewletError:
    """An --as (or CREWLET_AS) that names no configured actor: the value typed is the fault, not the file."""
    known = sorted(company.actors)
    named = f"CREWLET_AS={handle}" if STATE.actor_from_env else f"--as {handle}"
    return CrewletError(f"{named}: no actor '{handle}' is configured",
                        fix=(f"act as one of: {', '.join(known)}" if known else "no actor is configured")
                        + f" (a new one is added as [actors.{handle}] in {company.file})",
                        code="unknown_actor", actor=handle, actors=known, file=str(company.file))


@contextmanager
def open_node(*, sync_containers: bool = True) -> Iterator[Node]:
    from core.node import Node

    node = Node.open(existing_home(), sync_containers=sync_containers)
    try:
        if STATE.actor:   # an unknown --as is refused by every command, those acting on nobody's behalf too
            from core.pages.service import KnowledgeBase
            from core.settings import ConfigError

            try:
                KnowledgeBase(node).actor(STATE.actor)
            except ConfigError as exc:
                if exc.key != f"actors.{STATE.actor}":
                    raise
                raise unknown_actor(node.company, STATE.actor) from None
        try:
            yield node
        except CrewletError as exc:
            # a node that lost its servers answers from what it applied: a read it cannot answer ("no page …")
            # may only be behind, and its one line says so (a refused write says it is offline itself)
            if node.offline is not None and node.damage is None and exc.code != "offline":
                raise exc.with_note(f" (this node may be behind: {node.offline.line()})") from exc
            raise
        # a command that read what it needed still says the home cannot be written to
        if node.damage is not None:
            warn(damage_line(node.damage))
        elif node.apply_error is not None:
            warn(f"records on the log are not applied yet: {node.apply_error}")
        elif node.offline is not None:
            warn(node.offline.line())
        elif getattr(node.conn, "readonly_reason", ""):
            warn(f"{node.conn.readonly_reason}: this command read the home as it stands; writes are refused until "
                 "there is room again")
    finally:
        node.close()


@contextmanager
def open_kb(*, local: str | None = None) -> Iterator[KnowledgeBase]:
    """The knowledge base, for the actor of --as (or the operator). Every read and write checks that
    actor itself (the knowledge app included); an unknown --as is refused by open_node. `local`: what of
    this node's own copy the command lists ("spaces", "trash"…), refused in one line when the company's
    knowledge lives on a remote site (a write is refused by the knowledge base itself)."""
    from core.pages.service import KnowledgeBase

    with open_node() as node:
        if local is not None:
            refuse_elsewhere(node, local)
        yield KnowledgeBase(node)


def refuse_elsewhere(node: Node, what: str) -> None:
    """Refuse a command that lists this node's own copy (`what` of it) of knowledge kept on a remote site."""
    from core.knowledge import elsewhere

    refusal = elsewhere(node.company, what)
    if refusal is not None:
        raise refusal


def actor() -> str | None:
    return STATE.actor


def emit_json(data: Any) -> None:
    print(json_text(data))




def read_body(body_file: str | None) -> str:
    """--body-file F, or - for standard input. Refuses a file that is not UTF-8 text."""
    if body_file is None:
        return ""
    if body_file == "-":
        data = sys.stdin.buffer.read()
        name = "standard input"
    else:
        if os.path.isdir(body_file):
            raise CrewletError(f"--body-file {body_file} is a directory — give a file holding the body (or - to "
                               "read standard input)", code="invalid_body")
        with open(body_file, "rb") as fh:
            data = fh.read()
        name = body_file
    if b"\x00" in data:
        raise CrewletError(f"{name} is not text (it holds NUL bytes) — give a Markdown file", code="invalid_body")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CrewletError(f"{name} is not UTF-8 (byte {exc.start}) — save it as UTF-8", code="invalid_body") from None


# -- the search's catch-up (crewlet search, crewlet ask) ------------------------------------------------

def catch_up_index(node: Node, *, show_progress: bool) -> IndexPass | None:
    """The small pass a search runs before answering (core.search.indexer.catch_up_for_search, the one
    `crewlet mcp` runs too), with its progress bar; a pass that could not run is said as a warning."""
    from core.search.indexer import catch_up_for_search

    from .progress_bars import ProgressBars

    progress = ProgressBars(err_console, enabled=show_progress)
    try:
        return catch_up_for_search(node.home, progress=progress.bar("building the index"))
    finally:
        progress.close()


@contextmanager
def outcome_speaks() -> Iterator[None]:
    """The search's own warning (the reason it could not run) is what its outcome says, and the CLI
    prints the outcome: meanwhile the warning does not reach stderr a second time through the log."""
    logger = logging.getLogger("crewlet.search")
    propagate = logger.propagate
    logger.propagate = False
    quiet = logging.NullHandler()
    logger.addHandler(quiet)
    try:
        yield
    finally:
        logger.removeHandler(quiet)
        logger.propagate = propagate


# -- an import's plan, printed (crewlet import, crewlet confluence|plane import) -----------------------

LISTED = 100          # lines per section of a printed plan; --json lists everything


class Listing(list):
    """The first LISTED lines of a section, and how many it has in all (a plan of a million pages is
    counted, never turned into a million lines)."""

    total: int = 0


def section(title: str, lines: list[str]) -> None:
    """A titled section of a plan: its count, its first LISTED lines and how many more there are."""
    total = getattr(lines, "total", len(lines))
    if not total:
        return
    console.print(f"[bold]{title}[/] ({total})")
    for line in lines[:LISTED]:
        console.print(f"  {line}", soft_wrap=True)
    if total > LISTED:
        console.print(f"  … and {total - LISTED} more (--json lists them all)")


def page_lines(report: ImportReport, action: str) -> Listing:
    """The plan's pages of one action (create, update, unchanged), one marked line each."""
    out = Listing()
    for p in report.iter_pages(action):
        out.total += 1
        if len(out) >= LISTED:
            continue
        mark = {"create": "[green]+[/]", "update": "[yellow]~[/]", "unchanged": "="}[action]
        line = f"{mark} {markup_safe(p.ref)}"
        if action == "create" and p.parent_title:
            line += f" [dim](under {markup_safe(p.parent_title)})[/]"
        if action == "update":
            line += f" [dim]({', '.join(p.changes)})[/]"
        if p.kind == "folder":
            line += " [dim](folder)[/]"
        if p.source:
            line += f" [dim]← {markup_safe(p.source)}{'/' if p.kind == 'folder' else ''}[/]"
        out.append(line)
    return out


def containers_table(report: ImportReport) -> Table:
    """How many pages of each space the plan creates, updates and leaves unchanged."""
    from rich.table import Table

    counts = report.container_counts()
    table = Table("space", "create", "update", "unchanged")
    for key in sorted(counts):
        c = counts[key]
        table.add_row(markup_safe(key), str(c["create"]), str(c["update"]), str(c["unchanged"]))
    return table


# -- a command whose first word may name a subcommand (crewlet search eval|floor) ---------------------

class WordsOrSubcommand(TyperCommand):
    """A command taking free words (`crewlet search QUERY`) whose first word may instead name one of its
    subcommands (`crewlet search eval …`): the rest of the line is then that command's (its own --help
    included). A subclass names them in `subcommands`: word -> "module:attribute" of a module-level
    typer.Typer holding that one command, imported only when its word is given. To pass the word itself as
    the free text, put an option first."""

    subcommands: ClassVar[dict[str, str]] = {}

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] in self.subcommands:
            module, _, attribute = self.subcommands[args[0]].partition(":")
            command = typer.main.get_command(getattr(importlib.import_module(module), attribute))
            # named from the root ("crewlet search eval"), not after this command's own free words
            sub = command.make_context(f"{ctx.info_name} {args[0]}", list(args[1:]), parent=ctx.parent)
            ctx.meta["crewlet.sub"] = (command, sub)
            return []
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        found = ctx.meta.get("crewlet.sub")
        if found is not None:
            command, sub = found
            with sub:
                return command.invoke(sub)
        return super().invoke(ctx)
