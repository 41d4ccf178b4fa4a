"""`crewlet agents` and `crewlet diary AGENT`: the agents, their onboarding and their private diaries.

A person reads any agent's diary; an agent (`--as AGENT`) only its own; nobody writes one here — an
agent writes its own through `crewlet mcp` (remember, forget).
"""
from __future__ import annotations


import typer

from .cli_common import JSON_OPT, actor, console, emit_json, handle_errors, open_node, when
from .fmt import plural
from .sanitize import markup_safe

app = typer.Typer()             # this module's top-level commands (cli_root adds them to `crewlet`)
ONBOARDING_WORDS = {"onboarded": "onboarded", "to_read": "not onboarded", "onboarding_elsewhere": "onboarding now",
                    "nothing_to_read": "nothing to read"}


@app.command("agents")
@handle_errors
def agents_cmd(as_json: bool = JSON_OPT) -> None:
    """The configured agents: each one's space, onboarding state and diary size on this node."""
    from core.agents.overview import agents
    from core.knowledge import FollowingSearcher, onboarding_pages

    with open_node() as node:
        follow = FollowingSearcher(node)      # made only when the Onboarding pages live on a remote site
        try:
            lines = agents(node, page_of=onboarding_pages(node, follow.get))
        finally:
            follow.close()
    if as_json:
        emit_json([line.to_json() for line in lines])
        return
    if not lines:
        console.print("no agents are configured — add one to company.toml: [actors.NAME] kind = \"agent\", "
                      "space = \"KEY\"", soft_wrap=True)
        return
    from rich.table import Table

    table = Table("agent", "space", "onboarding", "diary", "last note", title=f"Agents — {len(lines)}")
    for line in lines:
        ob = line.onboarding
        state = ONBOARDING_WORDS.get(ob.state, ob.state)
        if ob.state == "onboarded" and ob.marker:
            state += f" {when(ob.marker.marked_at)}"
        elif ob.stale:
            state += " (its chain changed)"
        diary = plural(line.notes, "note") + (f", {line.notes - line.embedded:,} not embedded"
                                             if line.embedded < line.notes and line.has_provider else "")
        table.add_row(markup_safe(line.handle), markup_safe(line.space or "—"), markup_safe(state), diary,
                      when(line.last_note_at))
    console.print(table)
    console.print("[dim]diaries are this node's own: `crewlet diary AGENT` reads one[/]")

@app.command("diary")
@handle_errors
def diary_cmd(
    agent: str = typer.Argument(..., metavar="AGENT", help="The agent whose diary to read (`crewlet agents` lists them)."),
    limit: int = typer.Option(100, "--limit", "-n", min=1, max=1000, metavar="N",
                              help="How many notes, newest first (1-1000)."),
    before: int | None = typer.Option(None, "--before", metavar="ID",
                                         help="Only notes older than this note id (the next window)."),
    as_json: bool = JSON_OPT,
) -> None:
    """An agent's private diary on this node, newest first: each note's id, age and text.

    A person reads any agent's diary; an agent only its own."""
    from core.agents.diary import Diary

    with open_node() as node:
        page = Diary(node).notes(agent, actor=actor(), limit=limit, before=before)
    if as_json:
        emit_json(page.to_json())
        return
    if not page.total:
        console.print(f"{markup_safe(agent)}'s diary on this node is empty", soft_wrap=True)
        return
    if not page.notes:       # a window past the oldest note: one line, not a title over an empty table
        console.print(f"no notes before {before} in {markup_safe(agent)}'s diary on this node "
                      f"({page.total:,} in all)", soft_wrap=True)
        return
    from rich.table import Table

    shown = (f"{len(page.notes):,} newest of {plural(page.total, 'note')}" if page.total > len(page.notes)
             else plural(page.total, "note"))
    table = Table("id", "written", "note", title=f"{markup_safe(agent)}'s diary — {shown}",
                  show_lines=False)
    current = page.space
    for n in page.notes:
        mark = "" if (n.space is not None and n.space == current) else " [dim](not embedded)[/]" if current else ""
        table.add_row(str(n.id), when(n.created_at), markup_safe(n.text) + mark)
    console.print(table)
    if page.total > len(page.notes) and page.notes:
        console.print(f"[dim]older: crewlet diary {markup_safe(agent)} --before {page.notes[-1].id}[/]")
