"""When the code moves (spec 003, "Checks when the code changes"): every code citation of the entries still in the
bank carried to its repository's branch head, and what that found written down as `entry.citation_check` records
by crewlet (SYSTEM_ACTOR). The recheck duty (core/duties/entry_recheck.py) runs it on each repository's poll
interval; `crewlet entry recheck` runs it now.

For each code citation of an entry PROPOSED, STANDING or CONSOLIDATED, as it stands (its last check's commit,
path and lines, else the citation's own):

- never read (its repository could not be read at write: "not read yet"): read now at its own commit, as the
  write check would have (`check_code`); one that does not hold there goes to a person;
- its file's blob at the head is the one last read: it holds where it stands; nothing is written (the log grows
  with the code's changes, not with the polls);
- else carried through the diff's hunks (core/repos/anchor.py `recheck`): the lines shifted (re-anchored), the
  file renamed (followed), the lines rewritten but found once elsewhere (moved) — each still held, written with
  the head's commit, the file's blob and where it stands now (`anchor`, when that is not where it was cited);
- the lines rewritten (CHANGED): with a chat model ([providers.llm], judge.py) the model is asked whether the new
  lines still support the claim — supports: held at the lines' place now; contradicts: the check is written
  changed and the entry DISPUTED by crewlet with the model's reason; unclear, or no verdict: changed, a person is
  asked (`EntryBank.needs_person`). Without a model, or the file gone (GONE): a person is asked. Nothing else
  changes on its own;
- a citation whose last check is changed or gone is left to the person it waits for.

The jump is read from where the file last stood as read: from the head the previous pass checked when the file
was the same there (so one jump serves most citations, whatever commit each was written at), else from the
citation's own commit. A repository that cannot be read just then writes nothing (its citations' last checks
stand; read again next pass).
"""
from __future__ import annotations

import json
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..pages import records
from ..pages.entry_model import (CHANGED, CONSOLIDATED, DISPUTE, GONE, HELD, HOLDING, MOVED, NOT_READ_YET, PROPOSED,
                                 SHIFTED, STANDING, SYSTEM, SYSTEM_ACTOR)
from ..pages.service import Writer
from ..repos import HOLDS, Anchor, CodeCitation, Repository, Unreadable, check_code, recheck
from .judge import CONTRADICTS, SUPPORTS, UNCLEAR, Judge, JudgeFailed

RECHECKED = (PROPOSED, STANDING, CONSOLIDATED)   # entries still in the bank, or waiting for a person to accept
WAITING = (CHANGED, GONE)                        # a person decides these; the recheck leaves them
BATCH = 1_000                                    # records a submit carries
MAX_JUDGED = 50        # model calls in one pass: the rest are found again by the next pass (nothing was written)
# seconds of model calls in one pass: the app runs every duty on one thread, and a page just saved waits for the
# keyword index while a pass judges (the next pass comes at once, after the duties that are due)
JUDGING_BUDGET_S = 20.0
MAX_SAID = 20          # lines a report keeps of what it says (failures of the model, unreadable repositories)

# what a pass counts, in the order the summary says them
COUNTS = ("held", "reanchored", "followed", "moved", "changed", "gone", "disputed", "judged_held", "needs_person",
          "not_read", "read", "judge_failed", "left_for_next_pass", "records", "refused")
WORDS = {"held": "held", "reanchored": "re-anchored", "followed": "followed a rename", "moved": "moved",
         "changed": "changed", "gone": "gone", "disputed": "disputed", "judged_held": "judged still holding",
         "needs_person": "needs a person", "not_read": "not read", "read": "read at last",
         "judge_failed": "no verdict from the model", "left_for_next_pass": "left for the next pass",
         "records": "records written", "refused": "records refused"}

Progress = Callable[[int, int, str], None]
_WORDS = {SUPPORTS: "support", CONTRADICTS: "contradict", UNCLEAR: "neither support nor contradict"}


@dataclass
class Standing:
    """One code citation of an entry, where it stands now."""

    entry_id: str
    index: int                     # 1-based, as the entry lists its citations
    kind: str
    body: str
    cited: CodeCitation            # as written
    path: str                      # where it stands: the last check's anchor, else as written
    start: int
    end: int
    commit: str                    # the commit it was last read at (its own when never read again)
    result: str | None             # its last check's result (None: never checked)
    blob: str | None               # the file's blob when last read
    done: bool = False             # this pass finished with it (a repository unreadable midway: the rest not read)

    def at(self, commit: str) -> CodeCitation:
        return CodeCitation(self.cited.repository, self.path, self.start, self.end, commit, self.cited.quote)

    def anchor(self, path: str, start: int, end: int) -> dict[str, Any] | None:
        """Where it stands, as a check records it: None when that is where it was cited."""
        if (path, start, end) == (self.cited.path, self.cited.start, self.cited.end):
            return None
        return {"path": path, "lines": [start, end]}


@dataclass
class RecheckReport:
    counts: Counter[str] = field(default_factory=Counter)
    heads: dict[str, str] = field(default_factory=dict)    # repository -> the head it was checked against
    said: list[str] = field(default_factory=list)         # for a person: what could not be read or judged
    disputed: list[str] = field(default_factory=list)     # entry ids disputed by this pass
    more: bool = False                                    # judgments left for the next pass

    def say(self, line: str) -> None:
        if len(self.said) < MAX_SAID and line not in self.said:
            self.said.append(line)

    def summary(self) -> str:
        """One line for the worker's log: the counts that are not 0 ("2 held, 1 re-anchored")."""
        c = self.counts
        parts = [f"{c[k]:,} {WORDS[k]}" for k in ("held", "reanchored", "followed", "moved", "changed", "gone",
                                                  "disputed", "needs_person", "not_read") if c[k]]
        extra = [f"{c[k]:,} {WORDS[k]}" for k in ("judged_held", "read", "judge_failed", "left_for_next_pass",
                                                 "refused") if c[k]]
        if not parts and not extra:
            return "no code citation to recheck"
        return ", ".join(parts) + (f" ({', '.join(extra)})" if extra else "")

    def to_json(self) -> dict[str, Any]:
        return {"counts": {k: self.counts[k] for k in COUNTS}, "heads": self.heads, "said": self.said,
                "disputed": self.disputed, "more": self.more}


def _code_citation(raw: Any) -> CodeCitation | None:
    """A code citation as the entry row holds it (core/repos shapes, checked at write); None for a link."""
    if not isinstance(raw, dict) or "path" not in raw:
        return None
    try:
        start, end = raw["lines"]
        return CodeCitation(str(raw["repository"]), str(raw["path"]), int(start), int(end), str(raw["commit"]),
                            raw.get("quote"))
    except (KeyError, TypeError, ValueError):
        return None


def read_standings(conn: Any, entries: Sequence[str] | None = None) -> list[Standing]:
    """Every code citation of the entries rechecked (of `entries` alone when named: a run's harmful outcome), where
    it stands now (the caller holds the node's lock)."""
    wanted = set(entries) if entries is not None else None
    marks = ",".join("?" * len(RECHECKED))
    last: dict[tuple[str, int], Any] = {}
    for row in conn.execute(f"SELECT c.entry_id, c.idx, c.result, c.commit_id, c.blob, c.anchor FROM citation_checks c "
                            f"JOIN entries e ON e.id = c.entry_id WHERE e.status IN ({marks}) "
                            "ORDER BY c.entry_id, c.idx, c.seq", RECHECKED):
        last[(row[0], row[1])] = row          # ordered by seq: the last one stays
    out: list[Standing] = []
    for row in conn.execute(f"SELECT id, kind, body, citations FROM entries WHERE status IN ({marks}) "
                            "AND instr(citations, '\"path\"') > 0 ORDER BY id", RECHECKED):
        try:
            cits = json.loads(row["citations"] or "[]")
        except ValueError:
            continue
        for index, raw in enumerate(cits if isinstance(cits, list) else [], 1):
            cit = _code_citation(raw)
            if cit is None or (wanted is not None and row["id"] not in wanted):
                continue
            check = last.get((row["id"], index))
            path, start, end, commit = cit.path, cit.start, cit.end, cit.commit
            result = blob = None
            if check is not None:
                result, blob = check["result"], check["blob"]
                if check["commit_id"] and result in HOLDING:
                    commit = check["commit_id"]
                if check["anchor"] and result in HOLDING:
                    anchor = json.loads(check["anchor"])
                    path, (start, end) = anchor["path"], anchor["lines"]
            out.append(Standing(row["id"], index, row["kind"], row["body"], cit, path, start, end, commit, result,
                                blob))
    return out


class Rechecker:
    """One recheck of a node's entries against `repositories` (by name). `judge`: the chat model asked about
    rewritten lines (None: a person is asked about each)."""

    def __init__(self, node: Writer, repositories: Mapping[str, Repository], *, judge: Judge | None = None,
                 max_judged: int = MAX_JUDGED) -> None:
        self.node = node
        self.repositories = repositories
        self.judge = judge
        self.max_judged = max_judged

    def run(self, *, names: Sequence[str] | None = None, since: Mapping[str, str] | None = None,
            progress: Progress | None = None, stop: threading.Event | None = None,
            entries: Sequence[str] | None = None) -> RecheckReport:
        """Recheck the citations of the repositories `names` (None: every one an entry cites). `since`: the head
        each repository was checked against by the previous pass (where most citations' jumps start). `entries`:
        these entries' citations alone (an agent run's harmful outcome, core/bank/runs.py)."""
        report = RecheckReport()
        with self.node.lock:
            standings = read_standings(self.node.conn, entries)
        by_repo: dict[str, list[Standing]] = defaultdict(list)
        for s in standings:
            if names is None or s.cited.repository in names:
                by_repo[s.cited.repository].append(s)
        run = _Pass(self, report, sum(len(g) for g in by_repo.values()), progress, stop)
        for name in sorted(by_repo):
            run.repository(name, by_repo[name], (since or {}).get(name))
        run.flush()
        run.tick("rechecked")
        return report


class _Pass:
    """One pass's state: the records waiting to be written, the model calls made, the progress."""

    def __init__(self, owner: Rechecker, report: RecheckReport, total: int, progress: Progress | None,
                 stop: threading.Event | None) -> None:
        self.node, self.judge, self.max_judged = owner.node, owner.judge, owner.max_judged
        self.repositories = owner.repositories
        self.report, self.counts = report, report.counts
        self.total, self.done = total, 0
        self.progress, self.stop = progress, stop
        self.pending: list[Any] = []
        self.judged = 0
        self.judging_since: float | None = None
        self.disputing: set[str] = set()

    def tick(self, label: str, n: int = 0) -> None:
        self.done += n
        if self.progress is not None:
            self.progress(min(self.done, self.total), self.total, label)

    # -- writing -----------------------------------------------------------------------------------------
    def check(self, s: Standing, result: str, *, commit: str | None, blob: str | None,
              where: tuple[str, int, int] | None, message: str) -> None:
        anchor = s.anchor(*where) if where is not None else None
        self.pending.append(records.entry_citation_check(SYSTEM_ACTOR, entry_id=s.entry_id, index=s.index,
                                                         result=result, commit=commit, blob=blob, anchor=anchor,
                                                         message=message))
        if len(self.pending) >= BATCH:
            self.flush()

    def dispute(self, s: Standing, reason: str) -> None:
        if s.entry_id in self.disputing:
            return
        self.disputing.add(s.entry_id)
        self.report.disputed.append(s.entry_id)
        self.counts["disputed"] += 1
        self.pending.append(records.entry_status(SYSTEM_ACTOR, entry_id=s.entry_id, action=DISPUTE, by=SYSTEM,
                                                 reason=reason))

    def flush(self) -> None:
        if not self.pending:
            return
        batch, self.pending = self.pending, []
        decided = self.node.submit(batch)
        self.counts["records"] += len(batch)
        # an entry a person archived (or whose page was purged) since it was read: the dispute (or check) is
        # refused by the applier, and the pass goes on; a refused dispute is no dispute
        for rec, out in zip(batch, decided):
            if out.status != "refused":
                continue
            self.counts["refused"] += 1
            if rec.type == "entry.status":
                self.counts["disputed"] -= 1
                self.report.disputed.remove(rec.payload["entry_id"])
        self.tick("writing what the recheck found")

    # -- one repository ----------------------------------------------------------------------------------
    def repository(self, name: str, group: list[Standing], since: str | None) -> None:
        waiting = [s for s in group if s.result in WAITING]
        live = [s for s in group if s.result not in WAITING]
        self.tick(f"{name}: reading", len(waiting))
        repo = self.repositories.get(name)
        if repo is None:
            self.counts["not_read"] += len(live)
            self.report.say(f"repository '{name}' is cited by entries but not configured: add "
                            f"[repositories.{name}] to company.toml")
            self.tick(name, len(live))
            return
        try:
            head = repo.head()
            self._repository(repo, head, live, since)
        except Unreadable as exc:
            # nothing written for what was not reached: each last check stands, read again next pass
            self.counts["not_read"] += sum(1 for s in live if not s.done)
            self.report.say(f"repository '{name}' not read ({exc}): its citations are read again next pass")
            return
        self.report.heads[name] = head

    def _repository(self, repo: Repository, head: str, live: list[Standing], since: str | None) -> None:
        short = head[:7]
        holding: list[Standing] = []
        read_now: set[int] = set()
        for s in live:
            if s.result is None or s.result == NOT_READ_YET:
                if self._read_at_last(repo, s):
                    holding.append(s)
                    read_now.add(id(s))
            else:
                holding.append(s)
        paths = sorted({s.path for s in holding})
        at_head = dict(zip(paths, repo.blob_ids([(head, p) for p in paths])))
        carry: list[Standing] = []
        for s in holding:
            if s.blob is not None and at_head.get(s.path) == s.blob:
                self.counts["held"] += 1
                if id(s) in read_now:
                    self.check(s, HELD, commit=head, blob=s.blob, where=(s.path, s.start, s.end),
                               message=f"held: {s.path} read at last, unchanged at {short}")
                s.done = True
                self.tick(f"{repo.name}: unchanged files", 1)
            else:
                carry.append(s)
        if since and since != head:
            self._start_from(repo, since, carry)
        anchors = recheck(repo, [s.at(s.commit) for s in carry], new=head)
        self.tick(f"{repo.name}: carried through the diff")
        for s, a in zip(carry, anchors):
            self._carried(s, a)
            s.done = True
            self.tick(f"{repo.name}: writing what changed", 1)

    def _read_at_last(self, repo: Repository, s: Standing) -> bool:
        """A citation never read (its repository unreadable at write): the write check, now. True when it holds
        at its own commit (then carried on like the rest)."""
        check = check_code(s.index, s.cited, repo)
        if check.outcome == NOT_READ_YET:
            raise Unreadable(check.message)
        self.counts["read"] += 1
        if check.outcome == HOLDS:
            s.commit, s.blob, s.result = check.commit or s.commit, check.blob, HELD
            return True
        gone = check.commit is not None and check.blob is None     # the commit is there, the file is not
        self.counts["gone" if gone else "changed"] += 1
        self.counts["needs_person"] += 1
        self.check(s, GONE if gone else CHANGED, commit=check.commit, blob=check.blob, where=None,
                   message=f"read at last, it does not hold at its own commit: {check.message}")
        s.done = True
        self.tick(f"{repo.name}: read at last", 1)
        return False

    def _start_from(self, repo: Repository, since: str, carry: list[Standing]) -> None:
        """Where the file was at the previous pass's head as it was last read, the jump starts there: one jump
        (two git diffs) for the citations written at any commit before it."""
        later = [s for s in carry if s.commit != since and s.blob is not None]
        paths = sorted({s.path for s in later})
        then = dict(zip(paths, repo.blob_ids([(since, p) for p in paths])))
        for s in later:
            if then.get(s.path) == s.blob:
                s.commit = since

    def _carried(self, s: Standing, a: Anchor) -> None:
        if a.outcome == NOT_READ_YET:
            self.counts["not_read"] += 1
            self.report.say(a.reason)
            return
        if a.holds:
            assert a.path is not None and a.start is not None and a.end is not None
            bucket = ("followed" if a.followed_from else "moved" if a.outcome == MOVED
                      else "reanchored" if a.outcome == SHIFTED or (a.path, a.start, a.end) != (s.path, s.start, s.end)
                      else "held")
            self.counts[bucket] += 1
            self.check(s, a.outcome, commit=a.commit, blob=a.blob, where=(a.path, a.start, a.end), message=a.reason)
            return
        if a.outcome == GONE:
            self.counts["gone"] += 1
            self.counts["needs_person"] += 1
            self.check(s, GONE, commit=a.commit, blob=None, where=None, message=f"{a.reason}: a person decides")
            return
        self.counts["changed"] += 1
        self._changed(s, a)

    def _changed(self, s: Standing, a: Anchor) -> None:
        """The cited lines rewritten: the model judges, or a person is asked."""
        short = (a.commit or "")[:7]
        if self.judge is None or a.old_text is None or a.new_text is None or a.path is None:
            why = ("no chat model is configured ([providers.llm])" if self.judge is None
                   else "the lines cannot be shown to the model")
            self.counts["needs_person"] += 1
            self.check(s, CHANGED, commit=a.commit, blob=a.blob, where=None,
                       message=f"{a.reason}: {why}, a person decides")
            return
        if self.judging_since is None:
            self.judging_since = time.monotonic()
        if (self.judged >= self.max_judged or (self.stop is not None and self.stop.is_set())
                or time.monotonic() - self.judging_since > JUDGING_BUDGET_S):
            # nothing written: the file's blob still differs, so the next pass carries it and asks again
            self.counts["left_for_next_pass"] += 1
            self.report.more = True
            return
        self.judged += 1
        try:
            verdict = self.judge.judge(s.body, s.kind, a.path, a.old_text, a.new_text)
        except JudgeFailed as exc:
            self.counts["judge_failed"] += 1
            self.counts["needs_person"] += 1
            self.report.say(f"entry {s.entry_id}, citation {s.index}: {exc}")
            self.check(s, CHANGED, commit=a.commit, blob=a.blob, where=None,
                       message=f"{a.reason}; {exc}: a person decides")
            return
        said = f"{verdict.model} judged the new lines {_WORDS[verdict.verdict]} the claim: {verdict.reason}"
        if verdict.verdict == SUPPORTS and a.start is not None and a.end is not None:
            self.counts["judged_held"] += 1
            self.check(s, HELD, commit=a.commit, blob=a.blob, where=(a.path, a.start, a.end),
                       message=f"{a.reason}; {verdict.model} judged they still support the claim: {verdict.reason}")
            return
        self.check(s, CHANGED, commit=a.commit, blob=a.blob, where=None, message=f"{a.reason}; {said}")
        if verdict.verdict == CONTRADICTS:
            lines = f" lines {a.start}-{a.end}" if a.start is not None else ""
            self.dispute(s, f"the code it cites changed ({a.path}{lines} at {short}) and {verdict.model} judged it "
                            f"contradicts the claim: {verdict.reason}")
            return
        self.counts["needs_person"] += 1

