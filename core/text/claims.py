"""Whether a text makes one claim: the write-time policy check of a knowledge-bank entry's body
(`check_entry_body`), and the list rule the diary's notes share (`list_items`).

An entry is one fact (spec 003, "Entries"): an entry holding six claims cannot be scoped, confirmed or
corrected one claim at a time, so a body that reads as a list or a summary is refused. A refusal costs an
agent its work, so every rule below is built to miss a doubtful case rather than refuse a good one, and each
is measured on the labelled set in `tests/data/entry_bodies.jsonl` (figures in docs/entries.md).

Before any rule reads the sentences, what is not prose is put out of the way (`_masked`), because a dot
inside it is not the end of a sentence: fenced code blocks and `code spans`, URLs, abbreviations
("e.g.", "i.e.", "etc.", "vs."), and every dot with no space after it (file paths `core/text/claims.py`,
identifiers `Node.open`, versions `v1.2.3`, decimals `0.75`, hosts `db.internal`). A sentence ends at
`.`, `!` or `?` followed by a space and a capital, digit or quote, or at a line break before a capital
or a digit (prose wrapped mid-sentence goes on).

The rules, in the order they are tried (the first that fires names the refusal):

1. **A list** — two or more lines that start with a bullet (`-`, `*`, `+`, `•`) or a number (`1.`, `2)`),
   or an inline enumeration "(1) … (2) …": items are separate claims by their writer's own layout.
2. **Headings or labelled lines** — a Markdown heading, or two or more lines that start with a short
   label and a colon ("Deploys: …" / "Cache: …"): the shape of a page or a status report, not a fact.
3. **A summary opener** — "Summary:", "TL;DR", "Key points:", "Notes:", "Changes:", "three things:",
   "a few gotchas:"…: the writer announces several things.
4. **A changelog** — two or more sentences that each start with a past-tense change verb ("Fixed …",
   "Added …", "Bumped …"): the shape of release notes.
5. **"And also"** — "and also", or a sentence opening with "Also", "Additionally", "In addition",
   "Furthermore", "Moreover", "Separately", "Unrelated", "Another thing", "On top of that", or "We also" /
   "It also" / "The X also": the writer's own word that what follows is a further claim. ("also" inside
   a first sentence — "the worker also retries" — is not a signal: it qualifies the one claim.)
6. **A list inside one sentence** — three or more clauses joined by semicolons (one semicolon is allowed:
   "retries three times; after that it gives up" is one claim); a short lead and a colon followed by three
   or more items of two words or more ("Our SLOs: 99.9% for checkout, 300 ms for search, …"; "stitches
   three subgraphs: accounts, orders and inventory" has one-word items and stays); three or more "X is Y"
   clauses joined by commas or "and"; a run of three or more short items with no verb ("Postgres 14.9,
   Redis 7.0.12, Kafka 3.6"). Each is a list its writer did not break into lines.
7. **Too many sentences** — more than `MAX_SENTENCES` (six) sentences, linked or not: a paragraph that
   long is a summary, and belongs in the page's body.
8. **Parallel sentences** — two neighbouring sentences that say the same of different subjects ("The
   worker image is 1.2 GB. The API image is 340 MB."): of their first four words two or more agree, one of
   the first two does not, and one of the last two does (the verb they share). Sharing words would
   otherwise link them under rule 9, yet each is its own fact.
9. **Independent sentences** — two or more sentences where one does not lean on what came before: it
   neither opens with a word that points back or qualifies ("It", "This", "That", "They", "Because",
   "So", "Otherwise", "Unless", "But", "However", "Instead", "Then", "Which", "Only", "Even", "The
   reason…", "The fix…"), nor opens on a case with "A"/"An" ("A crash in between causes a redelivery":
   a fact about the system names its subject; a case of the claim before is indefinite), nor holds a
   pronoun or "that"/"such" in its first five words ("Convert them before …", "Partners allow-list that
   address"), nor shares a content word (four letters or more, not a common word, folded to five letters
   so "retries" meets "retry") with an earlier sentence. "X does A. Y does B." has two subjects and
   nothing linking them: two facts. "X does A. It does so because B." and "X does A. X's retries make it
   slow." lean back: one claim with its qualification. The kind widens what leans back, because it says
   what a second sentence may be: a DECISION's reason and the alternatives it rejected are told with
   "We …" ("We use X because Y. We rejected Z: …"); a GOTCHA's and a CONVENTION's fix is an instruction
   ("Run …", "Use …", "Purge …") after a statement of the problem (two instructions in a row are two
   rules). This rule makes every false refusal measured (docs/entries.md): a second sentence that
   continues the first by meaning alone ("The split costs one extra service") shares no word with it.

Sentences that only point at where to look ("See PR #123.", "Source: …", "(Found in …)") are not claims
and never count. A credential is refused before any of this (`core.text.credentials`), and its message
never repeats it.

The body bound is `MAX_ENTRY_CHARS` = 1,000 characters (the diary's note has 500): an entry is one fact,
but a DECISION carries its reason and the alternative it rejected, a GOTCHA its symptom and its fix, and
either may quote a short command or code block; 1,000 characters (~160 words) holds those and the
longest acceptable body in the labelled set, while a longer text is a page.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from .credentials import credential_in

KINDS = ("FACT", "DECISION", "CONVENTION", "GOTCHA")
MAX_ENTRY_CHARS = 1000
MAX_SENTENCES = 6

_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+\S")


@dataclass(frozen=True)
class Refusal:
    """Why a body is refused: a stable `code` and one line to show the writer (`message`)."""

    code: str
    message: str


def list_items(text: str) -> int:
    """How many lines of the text start like the items of a list (a bullet, or `1.` / `2)`)."""
    return sum(1 for line in text.splitlines() if _LIST_ITEM.match(line))


# -- masking what is not prose -------------------------------------------------------------------------

_FENCE = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)", re.DOTALL)
_CODE_SPAN = re.compile(r"`([^`\n]*)`")
# a URL ends before the punctuation that closes its sentence
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://\S+?(?=[.,;:!?)\]]*(?:\s|$))|\bwww\.\S+?(?=[.,;:!?)\]]*(?:\s|$))")
# abbreviations that never end a sentence where they stand, and those that may ("etc." before a capital)
_ABBREV = re.compile(r"(?i)(?<![\w.])(?:e\.g|i\.e|vs|cf|approx|incl|a\.k\.a|et al|resp|esp|min|max|no|fig"
                     r"|mr|mrs|ms|dr|st|jr|sr|ca)\.(?=\s*[a-z0-9(,])"
                     r"|(?<![\w.])(?:e\.g|i\.e|a\.k\.a|vs|cf)\.")
_ETC = re.compile(r"(?i)\betc\.(?=\s+[a-z0-9(])")
_INNER_DOT = re.compile(r"\.(?=[^\s.])")          # a dot with no space after it: paths, versions, decimals
_ELLIPSIS = re.compile(r"\.\.\.|…")
_NOT_WORD = re.compile(r"\W+")


def _code(m: re.Match[str]) -> str:
    """A code span as "0 " and its identifier characters: it can open a sentence (a digit may) and its
    names still count as words a later sentence can share ("`orders` table" … "the `orders` API")."""
    return "0 " + _NOT_WORD.sub("_", m.group(1)).strip("_")


def _masked(text: str) -> str:
    """The text with code, URLs and non-final dots replaced so only a sentence's end keeps its dot."""
    text = _FENCE.sub(" 0 ", text)
    text = _CODE_SPAN.sub(_code, text)
    text = _URL.sub("0", text)
    text = _ABBREV.sub(lambda m: m.group(0).replace(".", ""), text)
    text = _ETC.sub("etc", text)
    text = _ELLIPSIS.sub(",", text)
    return _INNER_DOT.sub("", text)


# a line break ends a sentence only before a capital or a digit: prose wrapped mid-sentence goes on
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|\n\s*(?=[\"'(\[]?[A-Z0-9])")


def sentences(text: str) -> list[str]:
    """The prose sentences of a text, code and URLs masked out (see the module's docstring)."""
    parts = _SENTENCE_END.split(_masked(text.strip()))
    return [p.strip() for p in parts if p and p.strip(" \t\n.!?;:,-")]


# -- the signals --------------------------------------------------------------------------------------

_INLINE_ENUM = re.compile(r"(?:^|\s)\(?([1-9]|[a-c])\)\s")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+\S", re.MULTILINE)
_LABELLED_LINE = re.compile(r"^\s*[A-Za-z][\w /-]{0,24}:\s+\S")
_SUMMARY_OPENER = re.compile(
    r"(?i)^\s*(?:summary|tl;?dr|key (?:points|takeaways|facts)|takeaways|notes|changes|changelog|highlights"
    r"|learnings|lessons learned|recap|release notes|status update|things to know)\b\s*[:\-—]"
    r"|^\s*(?:our |main |key )?(?:summary|notes|recap|decisions|conventions|observations|findings|lessons"
    r"|release notes|updates|changes)\b[^:.\n]{0,40}:"
    r"|^\s*(?:in summary|to summari[sz]e|to sum up|here(?:'s| is| are) (?:what|a summary|the summary|some|a few))\b"
    r"|(?i:\b(?:a few|several|some|two|three|four|five|six|seven|\d+|many|multiple|various|the following|"
    r"main|key)\s+(?:\w+\s+)?(?:things|points|facts|notes|changes|items|takeaways|learnings|lessons|gotchas"
    r"|updates|highlights|decisions|conventions|observations|findings)(?:\s+\w+){0,3}\s*:)")
_CHANGE_VERB = re.compile(r"^(?:Fixed|Added|Removed|Bumped|Updated|Changed|Renamed|Moved|Refactored|Migrated"
                          r"|Deprecated|Dropped|Upgraded|Downgraded|Replaced|Reverted|Merged|Introduced"
                          r"|Deleted|Cleaned|Improved|Implemented)\b")
_AND_ALSO = re.compile(r"(?i)\band also\b|\bas well as that\b")
_ADDITIVE_OPENER = re.compile(r"(?i)^(?:also|additionally|in addition|furthermore|moreover|separately"
                              r"|unrelated(?:ly)?|another thing|one more thing|on top of that|besides(?: that)?"
                              r"|plus|oh and|and another)\b")
_POINTER = re.compile(r"(?i)^(?:see|source|sources|ref|refs|cf|found in|context|via|from|per|details in"
                      r"|more in|discussed in|introduced in|fixed in|tracked in)\b")
_VERBISH = re.compile(r"(?i)\b(?:is|are|was|were|be|been|has|have|had|do|does|did|can|cannot|can't|must"
                      r"|should|will|won't|would|may|might|need|needs|uses?|runs?|\w+(?:ed|es|s))\b")

# what a sentence may open with to lean on the one before it
_LEANS_BACK = frozenset("""
it its it's this that these those they them their there here which who whose where when whereas
so because since as therefore thus hence then otherwise unless except but however instead though
although yet still only even without with and or nor if once until after before while
meaning ie eg which's that's this's note
""".split())
_INSTRUCTION = frozenset("""
run use set add avoid don't do never always make check restart pass strip call prefer keep wait
remove delete pin bump put write read open close export import install upgrade downgrade clear retry
reset rotate ask let start stop kill ignore skip disable enable mark wrap quote escape name tag purge
flush rerun reload refresh rebuild redeploy regenerate update create copy move switch configure
connect convert turn increase lower raise limit look watch unset mount contact file
""".split())
_STOP = frozenset("""
about above after again against also always among another because been before being below between
both cannot could does doing down during each every from further have having here into itself just
like more most much must never once only other over same should some such than that their them then
there these they this those through under until very what when where which while whom with within
without would your yours will were what's isn't aren't doesn't don't didn't won't wasn't can't
we're they're it's there's that's first second third last next make makes made used uses using
need needs needed work works working time times thing things true false still even ever
""".split())
_WORD = re.compile(r"\b[A-Za-z][A-Za-z0-9_'-]{3,}")


def _content_words(sentence: str) -> set[str]:
    """Words of four letters or more that carry meaning, folded to a five-letter stem so "retries" and
    "retry", "deploys" and "deployed" meet."""
    return {w.lower()[:5] for w in _WORD.findall(sentence) if w.lower() not in _STOP}


def _first_word(sentence: str) -> str:
    m = re.match(r"[\"'(\[]*(?:0 )?([A-Za-z][A-Za-z']*)", sentence)
    return m.group(1).lower() if m else ""


_POINTS_BACK = re.compile(r"(?i)\b(?:it|its|them|they|their|this|these|those|that|such)\b")
_FURTHER_ALSO = re.compile(r"(?i)^(?:we|they|it|you|the \w+) also\b")
_COLON_LEAD = re.compile(r"^([^:\n]{1,60}):\s+(.+)$", re.DOTALL)
_ITEM_SPLIT = re.compile(r"\s*(?:[,;]\s*(?:and\s+|or\s+)?|\s+and\s+)")
_FINITE = re.compile(r"(?i)\b(?:is|are|was|were|be|has|have|had|do|does|did|can|cannot|must|should|will|would"
                     r"|may|might|need|needs|use|uses|run|runs|go|goes|take|takes|keep|keeps|\w+ed)\b")
_SUBJECT_IS = re.compile(r"(?i)^(?:the |our |a |an )?(?:[\w-]+ ){0,2}(?:is|are|has|have|was|were)\b")


def _leans_back(sentence: str, earlier: list[str], kind: str) -> bool:
    first = _first_word(sentence)
    if not first or first in _LEANS_BACK or re.match(r"(?i)the (?:reason|fix|workaround|cause|catch)\b", sentence):
        return True
    if first in ("a", "an"):
        return True          # "A crash in between causes …": a case of what was just said, not a new subject
    if kind == "DECISION" and first in ("we", "our", "rejected", "chosen", "considered", "alternatives"):
        return True
    if kind in ("GOTCHA", "CONVENTION") and first in _INSTRUCTION and _first_word(earlier[-1]) not in _INSTRUCTION:
        return True          # the fix after the statement of a problem; two instructions are two rules
    if _POINTS_BACK.search(" ".join(sentence.split()[:5])):
        return True          # "Convert them before …", "Turn it off to …": a pronoun points at the first
    words = _content_words(sentence)
    return any(words & _content_words(e) for e in earlier)


def _tokens(sentence: str) -> list[str]:
    return [w.lower() for w in re.findall(r"[A-Za-z0-9_%']+", sentence)]


def _parallel(a: str, b: str) -> bool:
    """Whether two sentences say the same thing of different subjects ("The worker image is 1.2 GB." /
    "The API image is 340 MB."): of their first four words at least two agree, one of the first two does
    not, and one of the last two does (the verb they share)."""
    ta, tb = _tokens(a)[:4], _tokens(b)[:4]
    if len(ta) < 4 or len(tb) < 4:
        return False
    same = [x == y for x, y in zip(ta, tb)]
    return sum(same) >= 2 and not (same[0] and same[1]) and (same[2] or same[3])


def _colon_list(sentence: str) -> int:
    """How many items of two words or more follow a short lead and a colon ("Our SLOs: 99.9% for
    checkout, 300 ms p99 for search, …"); 0 when the sentence has no such shape."""
    m = _COLON_LEAD.match(sentence)
    if not m or len(m.group(1).split()) > 8:
        return 0
    items = [i for i in _ITEM_SPLIT.split(m.group(2).rstrip(".!? ")) if i.strip()]
    return len(items) if sum(1 for i in items if len(i.split()) >= 2) >= 3 else 0


def several_claims(body: str, kind: str = "FACT") -> str | None:
    """Why the body reads as more than one claim (the signal, in words), or None when it reads as one."""
    items = list_items(body)
    if items >= 2:
        return f"it reads as a list of {items} items"
    masked = _masked(body)
    enum = [m.group(1) for m in _INLINE_ENUM.finditer(masked)]
    if len(enum) >= 2 and enum[0] in ("1", "a") and enum[1] in ("2", "b"):
        return "it reads as an enumeration ((1) … (2) …)"
    if _HEADING.search(body):
        return "it has a Markdown heading, the shape of a page"
    prose = _FENCE.sub("", body)
    labelled = [line for line in prose.splitlines() if _LABELLED_LINE.match(line)]
    if len(labelled) >= 2:
        label = labelled[0].split(":")[0].strip()
        return f"it has {len(labelled)} labelled lines ('{label}: …'), the shape of a report"
    if _SUMMARY_OPENER.search(masked):
        return "it announces several things, the shape of a summary"
    said = [s for s in sentences(body) if not _POINTER.match(s)]
    changes = [s for s in said if _CHANGE_VERB.match(s)]
    if len(changes) >= 2:
        verb = _first_word(changes[0]).capitalize()
        return f"it reads as a changelog ({len(changes)} sentences opening with a change: '{verb} …')"
    if _AND_ALSO.search(masked):
        return "it adds a further claim with 'and also'"
    for s in said[1:]:
        opener = _ADDITIVE_OPENER.match(s) or _FURTHER_ALSO.match(s)
        if opener:
            return f"a sentence opens with '{opener.group(0)}', adding a further claim"
    for s in said:
        clauses = [c for c in s.split(";") if len(c.split()) >= 3]
        if len(clauses) >= 3:
            return f"it chains {len(clauses)} clauses with semicolons, a list on one line"
        listed = _colon_list(s)
        if listed:
            return f"it lists {listed} items after '{_clip(s.split(':')[0], 30)}:', the shape of a summary"
        parts = [p for p in _ITEM_SPLIT.split(s.rstrip(".!? ")) if p.strip()]
        if sum(1 for p in parts if _SUBJECT_IS.match(p)) >= 3:
            return "one sentence joins three or more statements of the form 'X is Y'"
        if len(parts) >= 3 and all(len(p.split()) <= 3 for p in parts) and not _FINITE.search(s):
            return f"it is a run of {len(parts)} items with no verb, a list on one line"
    if len(said) > MAX_SENTENCES:
        return f"it runs to {len(said)} sentences, the length of a summary"
    for i in range(1, len(said)):
        if _parallel(said[i - 1], said[i]):
            return (f"sentences {i} and {i + 1} say the same of different subjects ('{_clip(said[i - 1], 24)}' / "
                    f"'{_clip(said[i], 24)}')")
    for i, s in enumerate(said[1:], start=1):
        if not _leans_back(s, said[:i], kind):
            return (f"sentence {i + 1} ('{_clip(s)}') states something new: it neither points back nor shares "
                    "a subject with what came before")
    return None


def _clip(sentence: str, width: int = 40) -> str:
    return sentence if len(sentence) <= width else sentence[:width - 1].rstrip() + "…"


def check_entry_body(body: object, kind: str | None = "FACT") -> Refusal | None:
    """None when `body` may be an entry of `kind` (any case; None is a FACT, the default kind), else the
    Refusal saying why (one line, naming how to write it instead; a credential's value is never
    repeated)."""
    if kind is None:
        kind = "FACT"
    if not isinstance(body, str):
        return Refusal("entry_invalid", "an entry's body is text — write the one fact you want to keep")
    norm_kind = kind.upper() if isinstance(kind, str) else ""
    if norm_kind not in KINDS:
        return Refusal("entry_invalid_kind", f"the kind {kind!r} is not one of {', '.join(KINDS)} — "
                                             "leave it out for a FACT")
    text = body.strip()
    if not text:
        return Refusal("entry_empty", "the entry is empty — write the one fact it keeps, e.g. "
                                      "'Deploys to staging need the VPN'")
    if len(text) > MAX_ENTRY_CHARS:
        return Refusal("entry_too_long", f"the entry is {len(text):,} characters, over the bound of "
                                         f"{MAX_ENTRY_CHARS:,} — an entry is one fact (with its reason): write "
                                         "one entry per fact, and put longer knowledge in the page's body")
    controls = [c for c in text if unicodedata.category(c) in ("Cc", "Cf") and c not in "\n\t"]
    if controls:
        return Refusal("entry_invalid", f"the entry holds {len(controls)} control or invisible character(s) "
                                        f"(the first U+{ord(controls[0]):04X}) — write it as plain text")
    what = credential_in(text)
    if what is not None:
        return Refusal("entry_credential", f"the entry looks like it holds a credential ({what}) — entries "
                                           "never keep secrets: say where the secret is kept instead (e.g. "
                                           "'the deploy token is in Vault under ci/deploy'), and rotate it "
                                           "if it was real")
    why = several_claims(text, norm_kind)
    if why is not None:
        return Refusal("entry_several_claims", f"the entry holds more than one claim: {why} — write one entry "
                                               "per fact, each saying one thing")
    return None
