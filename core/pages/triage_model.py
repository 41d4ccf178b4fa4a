"""Spec 003's triage as the pages log holds it (issue 36): its modes, decision types, escalation reasons, and how a
person's action on an entry triage decided about is read as a verdict on that decision.

One set of words for the applier's triage handlers (triage_handlers.py), the entry handlers that derive verdicts,
the triage engine (core/bank/triage.py), agreement (core/bank/agreement.py) and every surface. Floor-0 pure
functions: no database, no clock.
"""
from __future__ import annotations

# KNOWLEDGE_AUTO_TRIAGE: off (no triage), shadow (decide and record, change nothing; the default), on (act)
OFF, SHADOW, ON = "off", "shadow", "on"
MODES = (OFF, SHADOW, ON)
RECORDED_MODES = (SHADOW, ON)      # a decision is recorded only when triage runs

# what triage decides about one new entry (spec 003, "Triage and escalation", step 5); kappa is per type
ACCEPT, CORROBORATE, REFUSE, ESCALATE = "accept", "corroborate", "refuse", "escalate"
DECISIONS = (ACCEPT, CORROBORATE, REFUSE, ESCALATE)
BACKS_OFF = (ACCEPT, CORROBORATE, REFUSE)     # escalation is measured, never backs off

# why triage refused (step 1, policy); a credential refusal is never audited (a person would be shown it)
CREDENTIAL, SEVERAL_CLAIMS = "credential", "several_claims"
REFUSALS = (CREDENTIAL, SEVERAL_CLAIMS)

# how a new entry relates to a neighbour (step 3; core/text/relate.py's relations)
DUPLICATE, REFINEMENT, REPLACEMENT, CONTRADICTION, DIFFERENT = (
    "duplicate", "refinement", "replacement", "contradiction", "different")
RELATIONS = (DUPLICATE, REFINEMENT, REPLACEMENT, CONTRADICTION, DIFFERENT)

# escalation reasons, in the spec's table order (a decision lists its reasons in this order)
CONTRADICTS_VERIFIED = "CONTRADICTS_VERIFIED"   # it contradicts an entry a person verified
CONTRADICTS_LOCKED = "CONTRADICTS_LOCKED"       # it contradicts an entry on a LOCKED page
UNGROUNDED = "UNGROUNDED"                       # it cites nothing
CITATION_FAILED = "CITATION_FAILED"             # a citation does not hold, or was not read yet
PIN_REQUEST = "PIN_REQUEST"                     # a convention: every run in its modules gets it
SUPERSEDE_REQUEST = "SUPERSEDE_REQUEST"         # it replaces an entry: only a person's acceptance retires the old
BROAD_SCOPE = "BROAD_SCOPE"                     # its scope reaches more than MAX_SCOPE_MODULES modules
JUDGES_DISAGREE = "JUDGES_DISAGREE"             # the two model judgments did not agree (to accept, or on a pair)
NO_LLM = "NO_LLM"                               # a model was needed and none is configured ([providers.llm])
EXTERNAL_INPUT = "EXTERNAL_INPUT"               # it cites a link from outside the company (`external: true`)
UNKNOWN_SOURCE = "UNKNOWN_SOURCE"               # an agent wrote it: nothing an agent writes is accepted alone yet
HARMFUL_SIGNAL = "HARMFUL_SIGNAL"               # runs given it went wrong where it applies (runs: issue 37)
AUDIT = "AUDIT"                                 # a sample of what triage did alone, for a person to check
LOW_AGREEMENT = "LOW_AGREEMENT"                 # people disagreed with this type of decision lately
REASONS = (CONTRADICTS_VERIFIED, CONTRADICTS_LOCKED, UNGROUNDED, CITATION_FAILED, PIN_REQUEST, SUPERSEDE_REQUEST,
           BROAD_SCOPE, JUDGES_DISAGREE, NO_LLM, EXTERNAL_INPUT, UNKNOWN_SOURCE, HARMFUL_SIGNAL, AUDIT,
           LOW_AGREEMENT)
# the reasons that hold back a decision triage made on the entry's merits, rather than make it an escalation:
# the decision keeps its type (kappa compares it), and the entry waits for a person
HOLDS = (UNKNOWN_SOURCE, LOW_AGREEMENT)
MAX_SCOPE_MODULES = 3          # "its scope reaches three modules or fewer"

# a type's state in back-off (spec 003, "Back-off")
ACTING, ESCALATING = "acting", "escalating"
STATES = (ACTING, ESCALATING)

# a verdict on a decision: what a person did, read against what triage decided
ACCEPTED, REJECTED, EDITED = "accepted", "rejected", "edited"
VERDICTS = (ACCEPTED, REJECTED, EDITED)
# the label a person's outcome gives an entry, beside triage's decision type, for kappa
EDITED_LABEL = "edited"
# where a verdict came from
FROM_ACTION, FROM_AUDIT = "action", "audit"
AGREE, DISAGREE = "agree", "disagree"
ANSWERS = (AGREE, DISAGREE)


def ordered_reasons(reasons: object) -> list[str]:
    """The known reasons among `reasons`, each once, in the spec's table order."""
    given = set(reasons) if isinstance(reasons, (list, tuple, set, frozenset)) else set()
    return [r for r in REASONS if r in given]


def audited_kind(decision: str, refusal: str | None) -> bool:
    """Whether a decision of this kind may be drawn for audit: triage's own acceptances, folds, and refusals for
    several claims — never a credential refusal, nor an escalation (a person decides it anyway)."""
    return decision in (ACCEPT, CORROBORATE) or (decision == REFUSE and refusal == SEVERAL_CLAIMS)


def person_label(decision: str, in_use: bool, edited: bool) -> str:
    """What a person's outcome on an entry says, as a decision type, beside triage's `decision` (its type).

    `in_use`: the person left the entry in use (accepted or verified it; an audit's disagreement with a fold or
    refusal); otherwise out of use (archived, disputed; an audit's disagreement with an acceptance). `edited`: a
    person changed what the entry says after triage decided.

    - Out of use: agrees with a fold, a refusal or an escalation (each keeps the entry out, or asked a person who
      kept it out); against an acceptance it reads as a refusal.
    - In use, unchanged: an acceptance (an escalation was not needed, a fold or refusal was wrong).
    - In use after a person's edit: agrees with an escalation (the entry needed a person's hand); against any
      other decision it is EDITED_LABEL, a label triage never gives (it agrees with none of them).
    """
    if not in_use:
        return decision if decision in (CORROBORATE, REFUSE, ESCALATE) else REFUSE
    if edited:
        return ESCALATE if decision == ESCALATE else EDITED_LABEL
    return ACCEPT


def verdict_of(decision: str, label: str, edited: bool) -> str:
    """accepted (the person's label is triage's decision), edited (a person changed the entry, and it went
    another way), else rejected."""
    if label == decision:
        return ACCEPTED
    return EDITED if edited else REJECTED


def audit_label(decision: str, answer: str) -> str:
    """An audit's answer as a person's label: agree keeps triage's type; disagree undoes it (an acceptance
    becomes a refusal, a fold or a refusal an acceptance)."""
    if answer == AGREE:
        return decision
    return REFUSE if decision == ACCEPT else ACCEPT
