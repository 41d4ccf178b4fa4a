"""The pages log's handlers for agent runs (issue 37; words in run_model.py), and how a repair gives each back.

`run.start` writes the run's row with the arm its writer drew; `run.finish` writes its outcomes onto it, its review
findings, and — deciding from the rows as they stand at its seq, as every node does — each outcome as helpful or
harmful for every entry served to the run (`entry_serves.run`) whose scope it falls under (`entry_outcomes`). A
holdout run was served nothing, so its outcomes count for no entry. Each handler refuses before its first write.
"""
from __future__ import annotations

import json
from typing import Any

from ..log import Record
from ..replica.appliers import Refuse
from ..replica.kinds import CannotSay, Related
from ..store import Connection
from .give_back import _outcome, _rec
from .run_model import (ARMS, CHECKS_VALUES, HOLDOUT, MAX_FINDING_CHARS, MAX_FINDINGS, PR_VALUES, REVIEW_VALUES,
                        effects, falls_under)

Candidates = tuple[list[Record], str]


def _run(conn: Connection, run_id: str) -> Any:
    return conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()


def run_start(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    run_id, arm, rate = p["run_id"], p["arm"], p["holdout_rate"]
    if not run_id.strip() or not p["agent"].strip():
        raise Refuse("invalid_run", "a run needs an id and an agent")
    if arm not in ARMS:
        raise Refuse("invalid_arm", f"a run's arm is {' or '.join(ARMS)}, not {arm!r}")
    if not 0.0 <= rate <= 1.0:
        raise Refuse("invalid_rate", f"the holdout rate is a share from 0 to 1, not {rate!r}")
    if _run(conn, run_id) is not None:
        raise Refuse("run_exists", f"run {run_id} was started already: a run id is used once")
    conn.execute("INSERT INTO runs (id, agent, issue, modules, arm, holdout_rate, started_by, started_at, start_op) "
                 "VALUES (?,?,?,?,?,?,?,?,?)",
                 (run_id, p["agent"], p.get("issue"), json.dumps(list(p["modules"])), arm, rate, rec.actor, rec.at,
                  rec.op_id))
    return {"run_id": run_id, "arm": arm}


def _findings(p: dict[str, Any]) -> list[tuple[str, str]]:
    raw = p["findings"]
    if len(raw) > MAX_FINDINGS:
        raise Refuse("too_many_findings", f"a finish carries at most {MAX_FINDINGS} findings, not {len(raw)}")
    out = []
    for f in raw:
        module, text = f.get("module"), f.get("text")
        if not isinstance(module, str) or not isinstance(text, str) or not module.strip() or not text.strip():
            raise Refuse("invalid_finding", "a finding is {module, text}, both words")
        if len(text) > MAX_FINDING_CHARS:
            raise Refuse("invalid_finding", f"a finding is at most {MAX_FINDING_CHARS} characters")
        out.append((module, text))
    return out


def run_finish(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    run_id, checks, review, pr, cost = p["run_id"], p["checks"], p["review"], p["pr"], p.get("cost")
    for name, value, allowed in (("checks", checks, CHECKS_VALUES), ("review", review, REVIEW_VALUES),
                                 ("pr", pr, PR_VALUES)):
        if value not in allowed:
            raise Refuse("invalid_outcome", f"a run's {name} is {'|'.join(allowed)}, not {value!r}")
    if cost is not None and not cost >= 0.0:
        raise Refuse("invalid_cost", f"a run's cost is a number of USD from 0, not {cost!r}")
    findings = _findings(p)
    run = _run(conn, run_id)
    if run is None:
        raise Refuse("not_found", f"no run '{run_id}' was started")
    if run["finish_op"] is not None:
        raise Refuse("run_finished", f"run {run_id} finished already ({run['checks']} checks, {run['review']} "
                     f"review, pr {run['pr']}): a run's outcomes are reported once")
    conn.execute("UPDATE runs SET finish_op = ?, finished_by = ?, finished_at = ?, checks = ?, review = ?, pr = ?, "
                 "cost = ? WHERE id = ?", (rec.op_id, rec.actor, rec.at, checks, review, pr, cost, run_id))
    conn.executemany("INSERT INTO run_findings (op_id, idx, run_id, module, text) VALUES (?,?,?,?,?)",
                     [(rec.op_id, i, run_id, m, t) for i, (m, t) in enumerate(findings, 1)])
    modules = json.loads(run["modules"])
    given = [] if run["arm"] == HOLDOUT else conn.execute(
        "SELECT DISTINCT e.id, e.scope FROM entry_serves s JOIN entries e ON e.id = s.entry_id WHERE s.run = ? "
        "ORDER BY e.id", (run_id,)).fetchall()
    rows = [(rec.op_id, e["id"], outcome, effect, run_id, rec.at)
            for e in given if falls_under(e["scope"], modules) for outcome, effect in effects(checks, review, pr)]
    conn.executemany("INSERT INTO entry_outcomes (op_id, entry_id, outcome, effect, run_id, at) VALUES (?,?,?,?,?,?)",
                     rows)
    harmful = sorted({r[1] for r in rows if r[3] == "harmful"})
    return {"run_id": run_id, "given": len(given), "helpful": sum(1 for r in rows if r[3] == "helpful"),
            "harmful": len(rows) - sum(1 for r in rows if r[3] == "helpful"), "harmful_entries": harmful}


# -- a repair's give-back: each run record is read off the rows it wrote -----------------------------------------

def give_back_start(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    run = conn.execute("SELECT * FROM runs WHERE start_op = ?", (op["op_id"],)).fetchone()
    if run is None:
        raise CannotSay("its run's row is no longer in the database")
    payload: dict[str, Any] = {"run_id": run["id"], "agent": run["agent"], "modules": json.loads(run["modules"]),
                               "arm": run["arm"], "holdout_rate": float(run["holdout_rate"])}
    if run["issue"] is not None:
        payload["issue"] = run["issue"]
    return [_rec(op, run["started_by"], run["started_at"], payload)], ""


def give_back_finish(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    result = _outcome(op)
    run = conn.execute("SELECT * FROM runs WHERE finish_op = ?", (op["op_id"],)).fetchone()
    if run is None:
        raise CannotSay(f"run {result.get('run_id')}'s row no longer holds its finish")
    findings = [{"module": r["module"], "text": r["text"]} for r in conn.execute(
        "SELECT module, text FROM run_findings WHERE op_id = ? ORDER BY idx", (op["op_id"],))]
    payload: dict[str, Any] = {"run_id": run["id"], "checks": run["checks"], "review": run["review"], "pr": run["pr"],
                               "findings": findings}
    if run["cost"] is not None:
        payload["cost"] = float(run["cost"])
    return [_rec(op, run["finished_by"], run["finished_at"], payload)], ""
