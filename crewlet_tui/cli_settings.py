"""`crewlet settings knowledge` and `crewlet settings repositories`: settings as this node reads them.

`knowledge`: the knowledge bank's settings (spec 003, "Settings") — each value, the layer it came from (the
default, company.toml's [knowledge], or the environment variable of the same name, which wins), what it
means, and the values that could not be read (each ignored, the layer below applied). `repositories`: the
git checkouts [repositories.NAME] declares, as the bank reads them.

Exit codes: 0 shown (a value that could not be read is a warning, not a failure); 1 no home, or a
company.toml that is refused (one line on stderr); 2 usage.
"""
from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any

import typer

from .cli_common import JSON_OPT, console, emit_json, existing_home, handle_errors
from .sanitize import markup_safe

if TYPE_CHECKING:
    from core.config import Company

app = typer.Typer()             # this module's top-level commands and groups (cli_root adds them to `crewlet`)
settings_app = typer.Typer(help="Settings as this node reads them: each value and where it came from.",
                           no_args_is_help=True)
app.add_typer(settings_app, name="settings")

# the settings a command, tool, the app or a duty reads today: any other is parsed and shown, and said "not in effect
# yet" (a setting added before its reader). A key joins when its reader is reached from one;
# tests/test_trial_fixes.py checks this set against the code's readers.
IN_EFFECT: frozenset[str] = frozenset({
    "page_proposed_entry_budget",       # EntryBank.add, reached by `crewlet entry add` (cli_entries.py)
    # the decay duty (core/duties/entry_decay.py)
    "page_proposed_entry_expiry_days", "page_standing_entry_decay_days", "page_decay_cron",
    "context_top_k",                    # load_context (core/bank/context.py), the MCP tool
    "context_token_budget",             # load_context (core/bank/context.py), the MCP tool
    "similarity_threshold",             # EntryBank.add's neighbours before write (core/bank/neighbours.py)
    # the triage duty (core/duties/triage.py over core/bank/triage.py, and its back-off: core/bank/agreement.py)
    "auto_triage", "audit_rate", "kappa_floor", "kappa_min_samples", "kappa_window_days",
    "holdout_rate",                     # RunBank.start's arm (core/bank/runs.py), `crewlet run start`, `crewlet mcp --run`
    # the upkeep duty (core/duties/upkeep.py over core/bank/upkeep.py and core/bank/gaps.py), `crewlet upkeep run`
    "convention_min_runs", "convention_harm_margin", "gap_issue_min_count", "gap_issues_cron",
    # the page refresh duty (core/duties/page_refresh.py over core/bank/generated.py)
    "page_refresh_cron", "page_refresh_min_interval",
})
BLOCK_WIDTH = 80      # a block's lines wrap here, piped or not: a reader's listing, not a script's (--json is)

SOURCE_WORDS = {"default": "default", "company.toml": "company.toml", "environment": "environment"}


def _company() -> Company:
    from core import config as config_mod

    return config_mod.load(existing_home().config_file)


@settings_app.command("knowledge")
@handle_errors
def knowledge_cmd(as_json: bool = JSON_OPT) -> None:
    """The knowledge bank's settings: each value, where it came from and what it means.

    Layers, lowest first: the default, company.toml's \\[knowledge] (holdout_rate = 0.2), the environment.

    A value that cannot be read is warned about and ignored: the layer below applies."""
    from core.clock import NOW_ENV, calendar_is_fixed, calendar_now

    company = _company()
    bank = company.bank
    now, fixed = calendar_now(), calendar_is_fixed()
    rows = bank.rows(now)
    calendar = now.isoformat(timespec="seconds").replace("+00:00", "Z")
    for row in rows:
        row["in_effect"] = row["key"] in IN_EFFECT
    if as_json:
        emit_json({"file": str(company.file), "settings": rows, "warnings": list(bank.warnings),
                   "calendar": {"now": calendar, "fixed": fixed}})
        return
    width = min(console.width, BLOCK_WIDTH)
    console.print("[bold]Knowledge bank settings[/]")
    for row in rows:
        console.print(_block(row, width), soft_wrap=True)
    console.print()
    _say(f"the calendar (ages, decay, crons): {calendar}"
         + (f", held there by {NOW_ENV}" if fixed else ", the real clock"), width)
    _say(f"set under [knowledge] in {company.file}, or as the environment variable of the same name, which wins", width)
    idle = [row["key"] for row in rows if not row["in_effect"]]
    if idle:
        _say(f"{len(idle)} of {len(rows)} settings {'are' if len(idle) != 1 else 'is'} not in effect yet: no "
             f"command, tool or background duty uses {'them' if len(idle) != 1 else 'it'} until what reads "
             f"{'them' if len(idle) != 1 else 'it'} is built; a value set now is kept for then", width)
    if bank.warnings:
        console.print(f"[yellow]{len(bank.warnings)} value{'s' if len(bank.warnings) != 1 else ''} could not be read "
                      "and {} ignored:[/]".format("was" if len(bank.warnings) == 1 else "were"))
        for line in bank.warnings:
            console.print(f"  {markup_safe(line)}", soft_wrap=True)


def _block(row: dict[str, Any], width: int) -> str:
    """One setting as a few short lines (a table of four columns is ~330 wide and cuts the names at 80): its key,
    value and where the value came from; its environment variable whole; a cron in words; what it means. In
    markup, wrapped here (Rich's own wrap pads each line out to the width)."""
    source = ("default" if row["source"] == "default"
              else f"{SOURCE_WORDS[row['source']]}; default {_default_shown(row)}")
    status = f"({source}" + ("" if row["in_effect"] else "; not in effect yet") + ")"
    lines = [f"[bold]{markup_safe(row['key'])}[/] = {markup_safe(str(row['shown']))}  [dim]{markup_safe(status)}[/]",
             f"  [cyan]{markup_safe(row['variable'])}[/]"]
    if row.get("when"):   # a cron: in words (UTC), and when it next fires on the calendar
        when = f"{row['when']} (UTC)" + (f"; next {row['next']}" if row.get("next") else "")
        lines += [f"[dim]{markup_safe(line)}[/]" for line in _wrapped(when, width)]
    lines += [markup_safe(line) for line in _wrapped(row["meaning"], width)]
    return "\n" + "\n".join(lines)


def _wrapped(text: str, width: int, indent: str = "  ") -> list[str]:
    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False,
                         break_long_words=False) or [indent]


def _say(text: str, width: int) -> None:
    """A dim note under the listing, wrapped at the listing's width."""
    console.print("\n".join(f"[dim]{markup_safe(line)}[/]" for line in _wrapped(text, width, indent="")))


def _default_shown(row: dict[str, Any]) -> str:
    default = row["default"]
    return f"{default:g}" if isinstance(default, float) else str(default)


def _repository_json(repo: Any) -> dict[str, Any]:
    return {"name": repo.name, "path": str(repo.path), "default_branch": repo.default_branch,
            "modules": list(repo.modules), "poll_interval": repo.poll_interval, "poll_interval_s": repo.poll_interval_s}


@settings_app.command("repositories")
@handle_errors
def repositories_cmd(as_json: bool = JSON_OPT) -> None:
    """The git repositories company.toml declares (\\[repositories.NAME]): path, branch, modules, poll interval.

    Entries cite code in them; this lists the configuration, without reading git."""
    company = _company()
    repos = list(company.repositories)
    if as_json:
        emit_json({"file": str(company.file), "repositories": [_repository_json(r) for r in repos]})
        return
    if not repos:
        console.print(f"no repositories are declared — add one to {markup_safe(str(company.file))}: "
                      + markup_safe('[repositories.NAME] path = "…" (a local git checkout)'), soft_wrap=True)
        return
    from rich.table import Table

    table = Table("repository", "path", "branch", "modules listed", "polled every", title="Repositories")
    for r in repos:
        table.add_row(markup_safe(r.name), markup_safe(str(r.path)),
                      markup_safe(r.default_branch) if r.default_branch else "[dim]HEAD's branch[/]",
                      markup_safe(", ".join(r.modules)) if r.modules else "[dim]by manifest[/]", r.poll_interval)
    console.print(table)
