"""`crewlet run …` and `crewlet knowledge helps`: agent runs, their knowledge, their outcomes, and whether the
knowledge helps (spec 003, "What agents get", "The holdout"; core/bank/runs.py, core/bank/helps.py).

A runtime begins a run (`run start`, which prints its id), hands the agent its knowledge (`run context`, or
`crewlet mcp --run ID`: load_context and recall_knowledge in that session are served to the run), and the script
or CI that knows the outcome reports it (`run finish`). `knowledge helps` sets the two arms side by side.

Exit codes: 0 done; 1 refused or failed (one line on stderr; with `--json` the error as JSON on stdout); 2 usage.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import typer

from .cli_common import JSON_OPT, actor, console, emit_json, handle_errors
from .cli_entries import entry_bank
from .sanitize import markup_safe

if TYPE_CHECKING:
    from core.bank.runs import Finished, Run

app = typer.Typer()            # this module's groups: `run`, `knowledge` (cli_root adds them to `crewlet`)
run_app = typer.Typer(help="Agent runs: start one (its arm drawn: treatment or holdout), hand it its knowledge, "
                           "report its outcomes.", no_args_is_help=True)
knowledge_app = typer.Typer(help="Whether the knowledge bank helps: agent runs given knowledge beside runs given "
                                 "none.", no_args_is_help=True)
app.add_typer(run_app, name="run")
app.add_typer(knowledge_app, name="knowledge")

RUN_ARG = typer.Argument(..., metavar="ID", help="The run's id, as `crewlet run start` printed it.")


def run_words(run: Run) -> str:
    """'run-1a2b… · eng-bot · treatment · modules server:apps/server · issue ENG-12 · under way'."""
    parts = [run.id, run.agent, run.arm, "modules " + (", ".join(run.modules) if run.modules else "none named")]
    if run.issue:
        parts.append(f"issue {run.issue}")
    if run.finished:
        cost = f", cost ${run.cost:.2f}" if run.cost is not None else ""
        parts.append(f"finished: checks {run.checks}, review {run.review}, pr {run.pr}{cost}")
    else:
        parts.append("under way")
    return " · ".join(parts)


@run_app.command("start")
@handle_errors
def start_cmd(
    agent: str = typer.Option(..., "--agent", metavar="HANDLE", help="The configured agent doing the work."),
    issue: str | None = typer.Option(None, "--issue", metavar="REF", help="The issue it works on."),
    modules: str | None = typer.Option(None, "--modules", metavar="A,B", help="The modules (folders) it works in, "
                                       "comma-separated: apps/server, or NAME:apps/server where several "
                                       "repositories are configured. Their conventions come first in its context."),
    run_id: str | None = typer.Option(None, "--id", metavar="ID", help="The runtime's own id for the run "
                                      "(default: a new one, printed)."),
    as_json: bool = JSON_OPT,
) -> None:
    """Begin an agent run and print its id; its arm (treatment, or holdout: no knowledge) is drawn from the id.

    KNOWLEDGE_HOLDOUT_RATE of runs fall in the holdout arm, by a hash of the id that anyone can work out again."""
    from core.bank.runs import RunBank

    with entry_bank("agent runs") as bank:
        run = RunBank(bank).start(agent, issue=issue, modules=(modules or "").split(","), run_id=run_id,
                                  actor=actor())
    if as_json:
        emit_json(run.to_json())
        return
    print(run.id)
    words = ("holdout: it gets no knowledge, by design (the comparison `crewlet knowledge helps` makes)"
             if run.holdout else "treatment: it gets its modules' conventions and most relevant entries")
    _note(f"started {run_words(run)}; {words}")


def _note(text: str) -> None:
    """What a person reads beside the id: on stderr, so `ID=$(crewlet run start …)` takes the id alone."""
    from .cli_common import err_console

    err_console.print(f"[dim]{markup_safe(text)}[/]", soft_wrap=True)


@run_app.command("context")
@handle_errors
def context_cmd(
    run_id: str = RUN_ARG,
    token_budget: int | None = typer.Option(None, "--token-budget", metavar="N", min=100, max=20_000,
                                            help="The most tokens it may take (default: "
                                                 "KNOWLEDGE_CONTEXT_TOKEN_BUDGET)."),
    as_json: bool = JSON_OPT,
) -> None:
    """What the run is given: its modules' conventions, then its most relevant grounded or verified entries.

    Within the token budget, recorded as served to the run. A holdout run is given nothing, and says so."""
    from core.bank.runs import RunBank

    with entry_bank("agent runs") as bank:
        given = RunBank(bank).context(run_id, token_budget=token_budget, actor=actor())
    if as_json:
        emit_json(given.to_json())
        return
    print(given.text)


@run_app.command("finish")
@handle_errors
def finish_cmd(
    run_id: str = RUN_ARG,
    # a word outside these is a usage error (exit 2), as a wrong flag is
    checks: Literal["passed", "failed"] = typer.Option(..., "--checks", case_sensitive=False,
                                                       help="Whether its checks passed."),
    review: Literal["passed", "failed"] = typer.Option(..., "--review", case_sensitive=False,
                                                       help="Whether its review passed."),
    pr: Literal["merged", "closed", "none"] = typer.Option(..., "--pr", case_sensitive=False,
                                                           help="Its pull request: merged, closed, or none opened."),
    cost: float | None = typer.Option(None, "--cost", metavar="USD", help="What the run cost, in USD."),
    findings: list[str] | None = typer.Option(None, "--finding", metavar="MODULE:TEXT",
                                              help="A review finding in a module (repeat for more)."),
    as_json: bool = JSON_OPT,
) -> None:
    """Report a run's outcomes, from the script or CI that knows them.

    Each counts as helpful or harmful for the entries the run was given, where it falls under their scope.

    An entry with no scope: every outcome counts; a scoped one: where the run's modules reach it.

    A harmful outcome has those entries' citations read again now."""
    from core.bank.runs import RunBank

    with entry_bank("agent runs") as bank:
        done = RunBank(bank).finish(run_id, checks=checks, review=review, pr=pr, cost=cost, findings=findings or [],
                                    actor=actor())
    if as_json:
        emit_json(done.to_json())
        return
    for line in finish_lines(done):
        console.print(markup_safe(line), soft_wrap=True)


def finish_lines(done: Finished) -> list[str]:
    run = done.run
    out = [f"finished {run_words(run)}"]
    if run.holdout:
        out.append("a holdout run: it was given no knowledge, so its outcomes count for no entry")
    elif not done.given:
        out.append("it was given no entry: its outcomes count for none")
    else:
        out.append(f"{done.given} entr{'y' if done.given == 1 else 'ies'} given; outcomes counted: "
                   f"{done.helpful} helpful, {done.harmful} harmful (where they fall under the entry's scope)")
    if run.findings:
        out.append(f"{len(run.findings)} review finding{'s' if len(run.findings) != 1 else ''} kept")
    if done.harmful_entries:
        out.append(f"harmful for {', '.join(done.harmful_entries)}: their citations were read again now")
        if done.recheck is not None:
            out.append(f"recheck: {done.recheck.summary()}")
        out += [f"  {line}" for line in done.recheck_said]
    return out


@run_app.command("show")
@handle_errors
def show_cmd(run_id: str = RUN_ARG, as_json: bool = JSON_OPT) -> None:
    """One run: its agent, arm, modules, outcomes and findings, and how many entries were served to it."""
    from core.bank.runs import RunBank

    with entry_bank("agent runs") as bank:
        run = RunBank(bank).get(run_id, actor=actor())
    if as_json:
        emit_json(run.to_json())
        return
    console.print(markup_safe(run_words(run)), soft_wrap=True)
    console.print(f"{run.served} entr{'y' if run.served == 1 else 'ies'} served to it", soft_wrap=True)
    for f in run.findings:
        console.print(f"  finding in {markup_safe(f['module'])}: {markup_safe(f['text'])}", soft_wrap=True)


@run_app.command("list")
@handle_errors
def list_cmd(
    agent: str | None = typer.Option(None, "--agent", metavar="HANDLE", help="Only this agent's runs."),
    limit: int = typer.Option(50, "--limit", metavar="N", min=1, max=10_000, help="At most this many (default 50)."),
    as_json: bool = JSON_OPT,
) -> None:
    """The newest runs first: each with its agent, arm, modules and outcomes (or under way)."""
    from core.bank.runs import RunBank

    with entry_bank("agent runs") as bank:
        runs = RunBank(bank).runs(agent=agent, limit=limit, actor=actor())
    if as_json:
        emit_json({"runs": [r.to_json() for r in runs]})
        return
    if not runs:
        console.print("no agent runs yet — `crewlet run start --agent HANDLE` begins one", soft_wrap=True)
        return
    for run in runs:
        console.print(markup_safe(run_words(run)), soft_wrap=True)


@knowledge_app.command("helps")
@handle_errors
def helps_cmd(as_json: bool = JSON_OPT) -> None:
    """Does knowledge help? The runs given knowledge (treatment) beside the runs given none (holdout).

    For each arm, the finished runs first, then checks passed, review passes and PRs merged, and the cost per run.

    Each rate with its 95% Wilson interval. An arm with fewer than 30 finished runs is too few to tell."""
    from core.bank.helps import helps
    from core.bank.runs import RunBank

    with entry_bank("agent runs") as bank:
        runs = RunBank(bank)
        report = helps(runs.finished_runs(), runs.started_count(), bank.kb.company.bank.holdout_rate)
    if as_json:
        emit_json(report.to_json())
        return
    from .helps_words import helps_lines

    for line in helps_lines(report):
        console.print(markup_safe(line), soft_wrap=True)
