"""How a new entry relates to an existing one, by rules alone (`relate_by_rules`): triage's third step (spec
003, "Triage and escalation": "rules in code and two model judgments decide how the two relate: a duplicate,
a refinement, a replacement, a contradiction, or a different fact").

A rule's verdict is taken without asking the model, so a wrong one costs more than a question: every rule
below fires only on a shape it can read exactly and otherwise answers None ("the rules cannot tell: ask the
model"). The figures (how often the rules decide, how often rightly) are measured on the labelled pairs in
`tests/data/entry_pairs.jsonl` by `bench/triage.py` and written in docs/triage.md.

The words the rules compare (`words`): the body folded (NFKC, casefold), contractions opened ("doesn't" →
"does not", "can't" → "can not"), a number and its unit made one token and a duration made seconds
("30 seconds", "30s" and "0.5 min" are all `30s`), number words made digits ("three" → `3`), thousands
separators dropped, "changed from 50 to 20" read as its new value `20`, "on"/"off" as a state read as
"enabled"/"disabled" ("defaults to on"), a plain plural made singular ("retries" → `retry`), the stop words
that carry no claim ("the", "is", "we", "of", "on"…) dropped, and the words that only date a claim ("now",
"currently", "since v2.3", "as of March 2025") dropped — they say when, not what. Negation ("not", "never",
"no", "without"), a quantifier ("some", "all"), a bound ("at least", "up to") and a direction ("to",
"from", "into", "in", "out") are never stop words: they are the claim.

The rules, in the order they are tried (the first that fires decides):

1. **folded_equal → duplicate**: the two bodies are the same text once folded and their spaces collapsed.
2. **same_words → duplicate**: the same words, in the same order, by the comparison above: the difference
   is one of wording that carries nothing ("The API listens on port 8,080." / "API listens on port 8080").
3. **negation_flip → contradiction or replacement**: the same words but for a negation on one side
   ("is enabled" / "is not enabled", "must" / "must not") or a pair of opposites in one place
   ("enabled" / "disabled", "sync" / "async", "before" / "after", "always" / "never"): one says the other
   is false.
4. **value_changed → contradiction or replacement**: the same words but for one or two values in the same
   places — a number (with its unit, of the same kind), a version, or a name (a `code span`, an identifier
   with `._/:-` or digits, a capitalised word inside the sentence) right after a word that makes the slot
   hold one thing ("is", "uses", "via", "through", "defaults", "set", "by", "runs"…) — with at least two
   shared words before the first difference, so the subject and predicate are the same and only the value
   differs ("The API server listens on port 8080" / "… port 9090"), and no value or name after the changed
   one (then the changed one qualified the subject: "requests on port 8080 time out after 30 s" / "on port
   9090 …" are two settings), and no other number in the sentence ("retries 3 times on 503" / "on 502": which
   number is the claim's?). A name after "with" or "and" is not exclusive ("integrates with Slack" / "with
   Jira" are both true), nor after "to", "from", "in" or "on" ("errors are reported to Sentry" / "to
   Rollbar" may both hold), and is left to the model.
   For 3 and 4, the verdict is **replacement** when the new entry says it changed — "now", "no longer",
   "since …", "as of …", "anymore", "was … is", "changed", "switched", "moved", "migrated", "replaced",
   "used to", "starting with …", "after the … migration" — in words the old one does not hold, or when it
   cites a later commit of a file the old one cites; otherwise **contradiction**.
5. **refinement**: the old entry's words (three or more) appear in the new one's, in order, with the same
   first word (the subject), and the new one adds words of which none is a negation, "only" (which narrows
   what the old one said of everything) or a word of change, and no bound or quantifier is put before one
   of the old words ("at least 10 minutes" / "10 minutes", "some services" / "services": they change the
   old claim rather than add to it; "…, up to 500 per batch" after it adds)
   ("Deploys to staging need the VPN" / "Deploys to staging need the VPN and a hardware key"): it says what
   the old one says and more.
6. **different**: both cite files and they share none, or both name scopes and they share none; and their
   words overlap little (Jaccard ≤ 0.15, at most one word shared and no name shared); and they do not both
   hold a value of one kind (two durations, two bare numbers): two facts about two places. ("The API times
   out after 30 s" / "the proxy cuts requests at 60 s" share little and cite two files, yet are one setting.)

Entries whose scopes are both named and share no module are never called a duplicate, a refinement, a
replacement or a contradiction by rules: the same words can be true of one module and not of another.

What the rules cannot tell (None), and why they leave it to the model: a contradiction in other words
("times out after 30 s" / "requests are cut at a minute"); a name change in a non-exclusive slot; a
paraphrase that changes more than stop words; an entry that says less than the old one (it may narrow or
broaden it); two values changed with other words; anything that needs to know what the words mean.
"""
from __future__ import annotations

import difflib
import re
import unicodedata
from dataclasses import dataclass, field

RELATIONS = ("duplicate", "refinement", "replacement", "contradiction", "different")


@dataclass(frozen=True)
class Citation:
    """A citation of an entry: a file, its line range, and (when known) the commit and its time."""

    path: str
    start: int | None = None
    end: int | None = None
    commit: str | None = None
    committed_at: int | None = None  # seconds or ms since the epoch: only compared with each other


@dataclass(frozen=True)
class EntryText:
    """What the rules read of an entry (`kind` is carried for triage; no rule reads it yet)."""

    body: str
    kind: str = "FACT"
    scope: tuple[str, ...] = ()
    citations: tuple[Citation, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class RuleVerdict:
    """A rule's verdict: `relation` None means the rules cannot tell (ask the model); `rule` names the rule
    that fired (or why none did); `confidence` is the rule's own a-priori trust, not a measured figure."""

    relation: str | None
    rule: str
    confidence: float


# -- the words ------------------------------------------------------------------------------------------

DIRECTIONS = frozenset({"to", "from", "into", "onto", "out", "in"})
# not stop words: the words of a direction ("to", "from", "into", "out", "in"): "copied to staging" and
# "copied from staging", "scale in" and "scale out" are not the same claim
STOP = frozenset("""
a an the this that these those of on at for by with as it its it's and or but is are was
were be been being has have had do does did will would should shall can could may might we our us you your
they their them there here which who whom whose what when where how also just so then very really still
such per via through too while until
""".split())
# words a slot after which holds one thing: a different name there is a different claim. Not "to", "from",
# "in", "on", "with": "reported to Sentry" / "to Rollbar", "config from Consul" / "from Vault" and
# "documented in Swagger" / "in Notion" may all be true at once
EXCLUSIVE_CUES = frozenset("""
is are was were be uses use used via through by default defaults set pinned points pointed runs run called named
""".split())
NEGATIONS = frozenset({"not", "never", "no", "without"})
# an added "only" narrows what the old entry said of everything: maybe a contradiction, not a refinement
NARROWING = frozenset({"only", "solely", "exclusively"})
# a bound or a quantifier added to a value or a subject ("at least 10 minutes" / "10 minutes", "some
# services" / "services") changes the claim rather than adding to it
BOUNDS = frozenset("""
least most more less fewer over under above below than about around approximately roughly up nearly almost
exactly max min maximum minimum some any each both either all every none few many several
""".split())
ANTONYMS = {frozenset(p) for p in [
    ("enabled", "disabled"), ("enable", "disable"), ("on", "off"), ("true", "false"), ("yes", "no"),
    ("allowed", "forbidden"), ("allowed", "disallowed"), ("allowed", "blocked"), ("required", "optional"),
    ("public", "private"), ("sync", "async"), ("synchronous", "asynchronous"), ("before", "after"),
    ("always", "never"), ("mutable", "immutable"), ("blocking", "non-blocking"), ("safe", "unsafe"),
    ("supported", "unsupported"), ("include", "exclude"), ("included", "excluded"), ("must", "may"),
    ("idempotent", "non-idempotent"), ("encrypted", "unencrypted"), ("retried", "dropped"),
    ("inclusive", "exclusive"), ("lock", "unlock"), ("locked", "unlocked"), ("ascending", "descending"),
]}
# words that date a claim: dropped from the comparison (they say when, not what)
DATING = frozenset({"now", "currently", "today", "anymore", "nowadays"})
_DATE_PHRASE = re.compile(
    r"\b(?:since|as of|starting (?:with|from|in)|beginning (?:with|in))\s+"
    r"(?:v?\d[\w.]*|pr\s*#?\d+|#\d+|release\s+\S+|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
    r"(?:\s+\d{1,2}(?:st|nd|rd|th)?\b)?(?:,?\s+\d{4})?|q[1-4](?:\s+\d{4})?|last\s+\w+|the\s+[\w-]+(?:\s+[\w-]+)?"
    r"\s+(?:migration|upgrade|release|rollout|cutover|incident|move|rewrite))")
_CHANGE = re.compile(
    r"\b(?:now|no longer|anymore|since|as of|used to|changed|switched|moved|migrated|replaced|starting with"
    r"|starting from|beginning with|after the [\w-]+(?: [\w-]+)? (?:migration|upgrade|release|rollout|cutover|move"
    r"|rewrite)|has been (?:changed|raised|lowered|bumped|increased|decreased|reduced|moved|replaced|renamed)"
    r"|(?:was|were) (?:raised|lowered|bumped|increased|decreased|reduced|renamed|dropped|removed))\b"
    r"|\b(?:was|were)\b[^.]*\b(?:is|are)\b")
_NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve".split())}
_NUMBER_WORDS.update({w: str(10 * i) for i, w in enumerate(
    "twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)})
# "changed from 50 to 20" says the value is 20: read as the value alone, so it meets the old value's slot
_FROM_TO = re.compile(r"\b(?:changed|raised|lowered|bumped|increased|decreased|reduced|went|moved|switched)"
                      r"\s+from\s+(\S+)\s+to\s+(\S+)")
_SECONDS = {"ms": 0.001, "millisecond": 0.001, "milliseconds": 0.001, "s": 1, "sec": 1, "secs": 1,
            "second": 1, "seconds": 1, "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
            "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600, "d": 86400, "day": 86400,
            "days": 86400, "w": 604800, "week": 604800, "weeks": 604800}
_SIZES = {"b": "b", "byte": "b", "bytes": "b", "kb": "kb", "kib": "kib", "mb": "mb", "mib": "mib", "gb": "gb",
          "gib": "gib", "tb": "tb", "tib": "tib", "%": "%", "percent": "%", "x": "x"}
_UNIT = "|".join(sorted((re.escape(u) for u in list(_SECONDS) + list(_SIZES)), key=len, reverse=True))
_QUANTITY = re.compile(rf"(?<![\w.])(\d+(?:\.\d+)?)\s*({_UNIT})(?![\w])")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_TOKEN = re.compile(r"[a-z0-9_%]+(?:[./:@+-][a-z0-9_%]+)*")
_NUMERIC = re.compile(r"^v?\d+(?:\.\d+)*(?:[a-z%]+)?$")
# "on" and "off" as a state ("defaults to on", "is off") are the claim; "on" elsewhere is a stop word
# (only before the clause ends or a preposition: "is on call", "is on port 8080" are not a switch)
_SWITCH = re.compile(r"\b(is|are|was|were|be|to|turned|switched|set|left|stays?|remains?)\s+(on|off)"
                     r"(?=\s*(?:[.,;:!?)]|$)|\s+(?:in|for|by|when|unless|until|at|during|except|but|and)\b)")
_CONTRACTIONS = [(re.compile(r"\bcan't\b|\bcannot\b"), "can not"), (re.compile(r"\bwon't\b"), "will not"),
                 (re.compile(r"n't\b"), " not"), (re.compile(r"\bno longer\b"), "not"),
                 (re.compile(r"\bused to\b"), "")]


def _fold(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).replace("’", "'").casefold().split())


def _quantity(m: re.Match[str]) -> str:
    number, unit = m.group(1), m.group(2)
    if unit in _SECONDS:
        return f" {_plain(float(number) * _SECONDS[unit])}s "
    return f" {_plain(float(number))}{_SIZES[unit]} "


def _plain(x: float) -> str:
    """A number as digits, never in exponent form ("2592000", "0.5")."""
    return str(int(x)) if x == int(x) else f"{x:.6f}".rstrip("0")


_ANTONYM_WORDS = frozenset().union(*ANTONYMS)


def _singular(word: str) -> str:
    if not word.isalpha() or len(word) <= 3 or word in NEGATIONS or word in _ANTONYM_WORDS:
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


@dataclass(frozen=True)
class Words:
    """A body's words for comparison: `tokens` (content words), `names` (those written as names), and
    `raw` (every word, stop words too, for the cue before a slot)."""

    tokens: tuple[str, ...]
    names: frozenset[str]
    raw: tuple[str, ...]
    at: tuple[int, ...]  # each token's index in `raw`


def _names_in(body: str) -> set[str]:
    """Words written as names: in a code span, with `._/:-` or a digit, or capitalised inside a sentence."""
    names: set[str] = set()
    for span in _CODE_SPAN.findall(body):
        names.update(_TOKEN.findall(span.casefold()))
    for m in re.finditer(r"(?<![.!?]\s)(?<!^)(?<=\s)([A-Z][\w.-]*)", body):
        names.add(m.group(1).casefold().rstrip(".-"))
    for tok in _TOKEN.findall(body.casefold()):
        if re.search(r"[._/:@-]|\d", tok):
            names.add(tok)
    return names


def words(body: str) -> Words:
    """The words the rules compare (see the module's docstring)."""
    text = _fold(_CODE_SPAN.sub(lambda m: " " + m.group(1) + " ", body))
    for pattern, repl in _CONTRACTIONS:
        text = pattern.sub(repl, text)
    text = _DATE_PHRASE.sub(" ", text)
    text = _SWITCH.sub(lambda m: m.group(1) + (" enabled" if m.group(2) == "on" else " disabled"), text)
    text = _FROM_TO.sub(r" \2 ", text)
    text = _THOUSANDS.sub("", text)
    text = " ".join(_NUMBER_WORDS.get(w, w) for w in text.split())
    text = _QUANTITY.sub(_quantity, text)
    raw = tuple(t.rstrip(".:-") for t in _TOKEN.findall(text))
    raw = tuple(t for t in raw if t)
    at = tuple(i for i, t in enumerate(raw) if t not in STOP and t not in DATING)
    tokens = tuple(_singular(raw[i]) for i in at)
    names = {_singular(n) for n in _names_in(body)}
    return Words(tokens, frozenset(n for n in names if n in tokens), raw, at)


# -- the rules ------------------------------------------------------------------------------------------

def _says_it_changed(new: EntryText, old: EntryText) -> bool:
    """The new entry says the claim changed (in words the old lacks), or cites a later commit of a file
    the old one cites."""
    new_text, old_text = _fold(new.body), _fold(old.body)
    new_marks = {m.group(0) for m in _CHANGE.finditer(new_text)}
    old_marks = {m.group(0) for m in _CHANGE.finditer(old_text)}
    if new_marks - old_marks:
        return True
    for c_new in new.citations:
        for c_old in old.citations:
            if (c_new.path == c_old.path and c_new.committed_at is not None and c_old.committed_at is not None
                    and c_new.committed_at > c_old.committed_at):
                return True
    return False


def _numeric_kind(token: str) -> str | None:
    """A value's kind: its unit (``s``, ``mb``, ``%``…), "" for a bare number, "v" for a version."""
    if not _NUMERIC.match(token):
        return None
    if token.startswith("v") or token.count(".") >= 2:
        return "v"
    return re.sub(r"^[\d.]+", "", token)


def _cue_before(w: Words, index: int) -> bool:
    """The word right before token `index` (over an article) makes its slot hold one thing."""
    i = w.at[index]
    before = [t for t in w.raw[max(0, i - 3):i] if t not in {"the", "a", "an"}]
    return bool(before) and before[-1] in EXCLUSIVE_CUES


def _conflict(a: Words, b: Words) -> str | None:
    """"negation_flip" or "value_changed" when the two bodies differ only there (rules 3, 4), else None."""
    ops = [op for op in difflib.SequenceMatcher(None, a.tokens, b.tokens, autojunk=False).get_opcodes()
           if op[0] != "equal"]
    if not ops:
        return None
    shared = sum(i2 - i1 for tag, i1, i2, _, _ in difflib.SequenceMatcher(
        None, a.tokens, b.tokens, autojunk=False).get_opcodes() if tag == "equal")
    if shared < 2 or shared < 0.6 * max(len(a.tokens), len(b.tokens)):
        return None
    negations = 0
    values = 0
    for tag, i1, i2, j1, j2 in ops:
        left, right = a.tokens[i1:i2], b.tokens[j1:j2]
        if tag in ("insert", "delete"):
            if not all(t in NEGATIONS for t in left + right):
                return None
            negations += len(left) + len(right)
            continue
        if len(left) == 1 and len(right) == 1 and frozenset((left[0], right[0])) in ANTONYMS:
            negations += 1
            continue
        if len(left) != len(right) or len(left) > 2 or i1 < 2 or j1 < 2:
            return None
        for k, (x, y) in enumerate(zip(left, right)):
            kx, ky = _numeric_kind(x), _numeric_kind(y)
            if kx is not None and ky is not None:
                if kx != ky:
                    return None
            elif x in a.names and y in b.names and kx is None and ky is None:
                if not (_cue_before(a, i1 + k) and _cue_before(b, j1 + k)):
                    return None
            else:
                return None
            values += 1
    if values and negations:
        return None
    if values:
        # a value or a name after the changed one means the changed one qualified the subject ("on port
        # 8080 time out after 30 s" / "on port 9090 …"): two settings, maybe both true
        tail = a.tokens[ops[-1][2]:]
        if any(_numeric_kind(t) is not None or t in a.names for t in tail):
            return None
        # another number the two share means two values in one sentence ("retries 3 times on 503" /
        # "… on 502"): which one is the claim's is for the model
        changed = {i for _, i1, i2, _, _ in ops for i in range(i1, i2)}
        if any(_numeric_kind(t) is not None for i, t in enumerate(a.tokens) if i not in changed):
            return None
    if values:
        return "value_changed" if values <= 2 else None
    return "negation_flip" if negations % 2 == 1 else None


def _matched(short: tuple[str, ...], long: tuple[str, ...]) -> list[bool] | None:
    """Which tokens of `long` the tokens of `short` meet, in order (each at its earliest), or None when
    `short` is not a subsequence of `long`."""
    marks = [False] * len(long)
    j = 0
    for t in short:
        while j < len(long) and long[j] != t:
            j += 1
        if j == len(long):
            return None
        marks[j] = True
        j += 1
    return marks


def _next_word_matched(tokens: tuple[str, ...], matched: list[bool], i: int) -> bool:
    """Whether the first word after `i` that is not a bound or a direction ("up to", "more than") is one
    the old entry holds: the bound at `i` is put on the old claim."""
    for j in range(i + 1, len(tokens)):
        if tokens[j] not in BOUNDS and tokens[j] not in DIRECTIONS:
            return matched[j]
    return False


def _disjoint(x: set[str], y: set[str]) -> bool:
    return bool(x) and bool(y) and not (x & y)


def relate_by_rules(new: EntryText, old: EntryText) -> RuleVerdict:
    """How `new` relates to `old` by the rules of this module, or a verdict with relation None (ask the
    model) naming why no rule could tell."""
    scopes_apart = _disjoint(set(new.scope), set(old.scope))
    a, b = words(new.body), words(old.body)
    if not scopes_apart:
        if _fold(new.body).rstrip(".!") == _fold(old.body).rstrip(".!"):
            return RuleVerdict("duplicate", "folded_equal", 1.0)
        if a.tokens and a.tokens == b.tokens:
            return RuleVerdict("duplicate", "same_words", 0.97)
        conflict = _conflict(a, b)
        if conflict is not None:
            relation = "replacement" if _says_it_changed(new, old) else "contradiction"
            return RuleVerdict(relation, conflict, 0.9)
        extra = len(a.tokens) - len(b.tokens)
        matched = _matched(b.tokens, a.tokens)
        if len(b.tokens) >= 3 and extra >= 1 and a.tokens[0] == b.tokens[0] and matched is not None:
            added = {t for t, m in zip(a.tokens, matched) if not m}
            bound_on_old = any(a.tokens[i] in BOUNDS and not matched[i] and _next_word_matched(a.tokens, matched, i)
                               for i in range(len(a.tokens) - 1))
            if not (added & (NEGATIONS | NARROWING)) and not bound_on_old and not _says_it_changed(new, old):
                return RuleVerdict("refinement", "refinement", 0.85)
    cited_apart = _disjoint({c.path for c in new.citations}, {c.path for c in old.citations})
    if cited_apart or scopes_apart:
        sa, sb = set(a.tokens) - DIRECTIONS, set(b.tokens) - DIRECTIONS
        common = sa & sb
        jaccard = len(common) / len(sa | sb) if sa | sb else 1.0
        kinds_a = {_numeric_kind(t) for t in a.tokens} - {None}
        kinds_b = {_numeric_kind(t) for t in b.tokens} - {None}
        # two values of one kind ("30 s" / "60 s") may be one setting told in other words: not this rule's
        if jaccard <= 0.15 and len(common) <= 1 and not (a.names & b.names) and not (kinds_a & kinds_b):
            return RuleVerdict("different", "different", 0.85)
    return RuleVerdict(None, "no_rule", 0.0)
