"""`crewlet settings knowledge` and `crewlet settings repositories`: settings as this node reads them.

`knowledge`: the knowledge bank's settings (spec 003, "Settings") — each value, the layer it came from (the
default, company.toml's [knowledge], or the environment variable of the same name, which wins), what it
means, and the values that could not be read (each ignored, the layer below applied). `repositories`: the
git checkouts [repositories.NAME] declares, as the bank reads them.

Exit codes: 0 shown (a value that could not be read is a warning, not a failure); 1 no home, or a
company.toml that is refused (one line on stderr); 2 usage.
"""
from __future__ import annotations

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
    if as_json:
        emit_json({"file": str(company.file), "settings": rows, "warnings": list(bank.warnings),
                   "calendar": {"now": calendar, "fixed": fixed}})
        return
    from rich.table import Table

    table = Table("setting", "value", "from", "meaning", title="Knowledge bank settings", title_justify="left")
    for row in rows:
        value = markup_safe(row["shown"])
        if row.get("next"):     # a cron: in words (UTC), and when it next fires on the calendar
            value += f"\n[dim]{markup_safe(row['when'])} (UTC); next {row['next']}[/]"
        if row["source"] == "default":
            source = "[dim]default[/]"
        else:
            source = markup_safe(f"{SOURCE_WORDS[row['source']]}; default {_default_shown(row)}")
        table.add_row(f"{row['key']}\n[dim]{row['variable']}[/]", value, source,
                      markup_safe(row["meaning"]))
    console.print(table)
    console.print(f"[dim]the calendar (ages, decay, crons): {calendar}"
                  + (f", held there by {NOW_ENV}" if fixed else ", the real clock") + "[/]", soft_wrap=True)
    console.print(f"[dim]set under {markup_safe('[knowledge]')} in {markup_safe(str(company.file))}, or as the "
                  "environment variable of the same name, which wins[/]", soft_wrap=True)
    if bank.warnings:
        console.print(f"[yellow]{len(bank.warnings)} value{'s' if len(bank.warnings) != 1 else ''} could not be read "
                      "and {} ignored:[/]".format("was" if len(bank.warnings) == 1 else "were"))
        for line in bank.warnings:
            console.print(f"  {markup_safe(line)}", soft_wrap=True)


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
