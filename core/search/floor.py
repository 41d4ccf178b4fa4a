"""The relevance floor: how close by meaning a page must be to enter an answer on meaning alone.

A dense model always has a nearest neighbour. Asked "zzzqqq xylophone", "the" or "?!", the semantic half
still ranks 150 pages, and a hybrid or semantic search used to fill its limit with them. The floor is an
exact cosine per embedding space, measured (bench/floor.py; the tables and the choice are in
docs/relevance.md, "The relevance floor"), and it is two numbers, because one measured cosine cannot be
both:

- **a question the corpus holds none of the words of** (lone stop words, punctuation, strings it never
  saw, another language): the level 97% of the questions that mean nothing (data/floor_probes.txt)
  stay under is 0.21 over the example's 10 pages, 0.32 over SciFact, 0.35 over vaswani, 0.43 over
  windows-driver-docs, whose acronyms a keyboard mash's word pieces resemble ("sdfsdf" is
  `sd ##fs ##df`, nearest a page on UMDF at 0.54), and 0.45 over the four documentation trees together.
  The shipped floor is the highest of these;
- **a question it holds a word of**: a relevant page can be as far as 0.21 ("rate limits" and "429
  backoff in the GitLab client", the example's own case for search by meaning), and no relevant page
  of a judged question's semantic top ten is nearer the unknown-word floor than that; this floor only
  cuts what is barely related at all (that question's "Manager 1:1", 0.17).

The floor a question meets lies between the two, by how much of the question the corpus knows: the
idf-weighted share of its terms (the keyword index's own analyser: stop words out, stems) that some
live page holds, whatever the search's scope (keyword.known_share). All of it known: the known-word
floor; none: the unknown-word one; in between, the straight line between them. Whether *any* word is
known decided it before, and one known word lowered the floor for the whole question: "zzzqqq
xylophone" over a corpus that says xylophone once took 0.20, and pages near it by meaning at 0.21-0.23
entered level with the one real keyword hit. Weighting by idf keeps a common known word from hiding
the unknown ones (a word every page holds says nothing about the question), and a word no page holds
weighs most, being the rarest of all.

A word no page holds counts against the question only when it is no word of the model's language
either (`language_words`: the whole words of the local model's vocabulary). "rate limits" over the
example, whose pages say "rate" once and never "limits", is wholly a question of ordinary words, and its
answer — "429 backoff in the GitLab client", at 0.21 — is the example's own case for search by meaning;
"zzzqqq" is no word of anyone's, and "zzzqqq xylophone" stays half unknown. A question of ordinary words
none of which any page holds has nothing known to lean on and meets the unknown-word floor, as before.
A model whose vocabulary crewlet cannot read (a remote one) counts every word no page holds against the
question.

What a search does with it (native.py):

- a candidate of the semantic half under the floor leaves that half's ranking, unless the keyword half
  matched it too: a page found by both halves stays wherever fusion puts it;
- a page with no body (a folder: its vector is its title alone, and a short text lies near every short
  question) is never a hit by meaning alone, unless its title shares a word with the question;
- the answer says what the floor did (`Outcome.floor`): the value applied and where it came from, how
  many candidates it cut and the nearest of them, so "nothing matched" and "nothing close enough" differ.

Where a space's floors come from, in order:

1. measured on this company's own corpus by `crewlet search floor --measure` (the probes asked of every
   page with a body, exactly: the unknown-word floor; the known-word one stays as shipped, or none),
   kept in `Home.floors_file` beside the logs, so every node that shares them reads it, keyed by the
   space (provider, model, width, tokenizer digest);
2. shipped: the local model's (SHIPPED below);
3. none: another model with nothing measured is ranked without a floor, and the answer says so.
"""
from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..durable import write_atomic

# The local default's space (core/embed/local.py SPACE.key(); a test keeps them equal): (the floor for a
# question the corpus holds a word of, the floor for one it holds none of).
LOCAL_SPACE = "local:all-MiniLM-L6-v2-int8:384:be50c3628f2bf5bb"
SHIPPED: dict[str, tuple[float, float]] = {LOCAL_SPACE: (0.20, 0.45)}

PROBES_FILE = Path(__file__).parent / "data" / "floor_probes.txt"
# a measured floor: the nearest page's cosine that this share of the probes stays under, rounded up to 0.01
PROBE_QUANTILE = 0.97


@dataclass(frozen=True)
class Floor:
    space: str
    known: float | None           # a question the corpus holds a word of (None: not cut)
    unknown: float | None         # a question it holds none of (None: not cut)
    source: str                   # "measured" | "shipped" | "given" | "none"
    detail: str = ""              # where it came from, in words

    def value(self, known_share: float) -> float | None:
        """The floor for a question `known_share` (0 to 1, idf-weighted) of whose words the corpus holds:
        the straight line from the unknown-word floor (none known) to the known-word one (all known). A
        known-word floor of None (not cut) counts as 0 between the ends."""
        share = min(1.0, max(0.0, float(known_share)))
        if share >= 1.0 or self.unknown is None:
            return self.known if share > 0 else self.unknown
        if share <= 0.0:
            return self.unknown
        low = self.known if self.known is not None else 0.0
        return round(self.unknown + (low - self.unknown) * share, 4)

    def to_json(self) -> dict[str, Any]:
        return {"space": self.space, "known": self.known, "unknown": self.unknown, "source": self.source,
                "detail": self.detail}


@dataclass
class FloorReport:
    """What the floor did to one search."""

    value: float | None           # the floor applied (None: none for this space)
    source: str
    known_words: bool             # the corpus holds a word of the question
    known_share: float = 0.0      # how much of it, idf-weighted (where between the two floors the value lies)
    cut: int = 0                  # candidates of the semantic half left out for being under the floor
    nearest_cut: float | None = None   # the closest of them (its exact cosine)
    folders: int = 0              # pages with no body left out (found by meaning on their title alone)

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "source": self.source, "known_words": self.known_words,
                "known_share": round(self.known_share, 4), "cut": self.cut,
                "nearest_cut": None if self.nearest_cut is None else round(self.nearest_cut, 4),
                "folders": self.folders}

    def nothing_close(self, model: str) -> str:
        """The words for an answer the floor left empty (the outcome's message: people and agents read it
        as it is, so it names no internal setting)."""
        parts = []
        if self.cut and self.value is not None:
            of = f"the nearest of the {self.cut:,} pages found by meaning" if self.cut != 1 else \
                "the one page found by meaning"
            score = f" scores {self.nearest_cut:.2f}," if self.nearest_cut is not None else " is"
            why = "" if self.known_share >= 1 else (
                " (more than when the pages hold the question's words: no page holds any of them)"
                if self.known_share <= 0 else " (more than usual: the pages hold only some of the question's words)")
            parts.append(f"{of}{score} and {model} needs {self.value:.2f} to show a page found by meaning "
                         f"alone{why}")
        if self.folders:
            parts.append(f"{self.folders:,} folder{'s' if self.folders != 1 else ''} matched by meaning on "
                         f"{'their titles' if self.folders != 1 else 'its title'} alone")
        return "nothing close enough: " + "; ".join(parts)


# -- the words of the model's language ---------------------------------------------------------------------

_WORD = re.compile(r"\w+")


def language_words(space: str, text: str, analyze: Callable[[str], dict[str, int]]) -> set[str]:
    """The terms of `text` (as `analyze` makes them: the keyword index's analyser) that come from a whole
    word of the space's model vocabulary — ordinary words, known or not to this corpus. Empty for a space
    whose vocabulary is not known here."""
    if space != LOCAL_SPACE:
        return set()
    from ..embed.local import whole_word    # the model's own tokenizer: shared with its sessions when loaded

    out: set[str] = set()
    for word in _WORD.findall(text.lower()):
        if whole_word(word):
            out.update(analyze(word))
    return out


# -- where a space's floor comes from ------------------------------------------------------------------

_file_cache: dict[Path, tuple[tuple[int, int, int], dict[str, Any]]] = {}


def _measured(path: Path) -> dict[str, Any]:
    """The floors file as last written (re-read only when it changed); {} when absent or unreadable."""
    try:
        st = path.stat()
    except OSError:
        return {}
    stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
    cached = _file_cache.get(path)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        floors = data.get("floors", {}) if isinstance(data, dict) else {}
    except (OSError, ValueError):
        floors = {}
    _file_cache[path] = (stamp, floors if isinstance(floors, dict) else {})
    return _file_cache[path][1]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def floor_for(space: str, floors_file: Path | None) -> Floor:
    """The floors a search in `space` applies."""
    entry = _measured(floors_file).get(space) if floors_file is not None else None
    shipped = SHIPPED.get(space)
    if isinstance(entry, dict) and _number(entry.get("unknown")) is not None:
        at = entry.get("measured_at")
        when = time.strftime("%Y-%m-%d", time.gmtime(at / 1000)) if isinstance(at, (int, float)) else "?"
        over = f"{entry['sources']:,} pages" if isinstance(entry.get("sources"), int) else "this corpus"
        return Floor(space, _number(entry.get("known")), _number(entry["unknown"]), "measured",
                     f"measured over {over} on {when} by `crewlet search floor --measure`")
    if shipped is not None:
        return Floor(space, shipped[0], shipped[1], "shipped", "this model's own, measured for it (docs/relevance.md)")
    return Floor(space, None, None, "none", "nothing measured for this model: `crewlet search floor --measure` "
                                            "measures one on this corpus")


def save_measured(floors_file: Path, space: str, entry: dict[str, Any]) -> None:
    """Keep a measured floor for `space` (written whole and atomically; other spaces' floors kept)."""
    try:
        data = json.loads(floors_file.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    if not isinstance(data.get("floors"), dict):
        data["floors"] = {}
    data["floors"][space] = entry
    floors_file.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(floors_file, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode("utf-8"))
    _file_cache.pop(floors_file, None)


def forget_measured(floors_file: Path, space: str) -> bool:
    """Drop the measured floor of `space` (the shipped one, or none, applies again). True when one was kept."""
    if space not in _measured(floors_file):
        return False
    data = json.loads(floors_file.read_text(encoding="utf-8"))
    data["floors"].pop(space, None)
    write_atomic(floors_file, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode("utf-8"))
    _file_cache.pop(floors_file, None)
    return True


def probes() -> list[str]:
    """The shipped questions that mean nothing (data/floor_probes.txt), for `crewlet search floor --measure`."""
    lines = PROBES_FILE.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line and not line.startswith("#")]


def measure_floor(nearest: list[float]) -> float:
    """A floor from the nearest page each probe reaches on a corpus: the cosine PROBE_QUANTILE of them stay
    under, rounded up to the next hundredth."""
    if not nearest:
        return 0.0
    ordered = sorted(nearest)
    at = ordered[min(len(ordered) - 1, math.ceil(PROBE_QUANTILE * len(ordered)) - 1)]
    return math.floor(at * 100 + 1) / 100


# -- applying it -------------------------------------------------------------------------------------------

@dataclass
class Cut:
    """One semantic ranking with the floor and the folder rule applied."""

    ranked: list[tuple[str, float]]
    report: FloorReport
    dropped: set[str] = field(default_factory=set)


def apply(ranked: list[tuple[str, float]], floor: Floor, *, known_share: float, found_by_words: Callable[[str], bool],
          folders: Callable[[list[str]], dict[str, str]], title_matches: Callable[[str], bool]) -> Cut:
    """`ranked` (page ids by exact cosine, best first) without what may not enter on meaning alone.

    `known_share`: how much of the question the corpus holds (0 to 1, idf-weighted); `found_by_words(page)`:
    the keyword half matched the page (it stays whatever its cosine); `folders(pages)`: of these pages,
    those with no body, with their titles; `title_matches(title)`: the title shares a word with the question."""
    value = floor.value(known_share)
    report = FloorReport(value, floor.source, known_share > 0, known_share)
    dropped: set[str] = set()
    empty = folders([pid for pid, _ in ranked]) if ranked else {}
    kept: list[tuple[str, float]] = []
    for pid, cosine in ranked:
        title = empty.get(pid)
        if title is not None and not found_by_words(pid) and not title_matches(title):
            report.folders += 1
            dropped.add(pid)
            continue
        if value is not None and cosine < value and not found_by_words(pid):
            report.cut += 1
            report.nearest_cut = cosine if report.nearest_cut is None else max(report.nearest_cut, cosine)
            dropped.add(pid)
            continue
        kept.append((pid, cosine))
    return Cut(kept, report, dropped)
