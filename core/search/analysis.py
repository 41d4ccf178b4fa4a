"""What the keyword index reads a text as: words, lower-cased, stop words out, English stems.

The analyser is a Whoosh pipeline (pickled into every index's schema, used as it is for a query and a
snippet), and `term_counter` is the same analysis done in bulk for indexing: one regex pass over a
lower-cased text, the words counted by C code, and each distinct word stemmed once per process — an
index build reads tens of millions of words and only about a quarter of a million distinct ones. The
two are held equal by tests.

Stems are Snowball English, computed by libstemmer (the Snowball project's own C, through PyStemmer):
about four times faster than Whoosh's pure-Python port, and it agrees with it on all but about one
word in two thousand (where it differs, it is the newer Snowball: `added` -> `add`, not `ad`). One
cache per process, shared by every analyser and every writer, bounded, so a long-running worker
neither stems a word twice nor grows without end.
"""
from __future__ import annotations

import operator
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from whoosh import formats
from whoosh.analysis import Filter, LowercaseFilter, RegexTokenizer, StemFilter, StopFilter

# a word: letters, digits and underscores, with inner dots kept (IoCreateDevice, IRP_MJ_READ, 3.5, e.g);
# whoosh-ng's own default also takes `*` into words (its wildcard syntax), which plain text has none of
WORD_PATTERN = r"\w+(?:\.?\w+)*"
CACHE_MAX = 400_000           # distinct words a process keeps the analysis of (about 60 MB at the bound)
CACHED_WORD_MAX = 64           # longer words (hashes, dumps) are analysed each time, never kept: the bound holds
MAX_QUERY_TERMS = 64

TermCount = Callable[[str], dict[str, int]]


class UnderscoreParts(Filter):
    """Each token as it is, then (for an identifier with underscores) each of its parts as a token of
    its own, with its own character span."""

    def __call__(self, tokens: Any) -> Any:
        for t in tokens:
            word = t.text
            chars = getattr(t, "chars", False)
            start = t.startchar if chars else 0
            yield t
            if "_" not in word:
                continue
            offset = 0
            for part in word.split("_"):
                if part:
                    t.text = part
                    if chars:
                        t.startchar = start + offset
                        t.endchar = start + offset + len(part)
                    t.stopped = False
                    yield t
                offset += len(part) + 1


# -- stems --------------------------------------------------------------------------------------------

_local = threading.local()    # a libstemmer stemmer keeps state between calls: one per thread
_STEMS: dict[str, str] = {}


def _stemmer() -> Any:
    st = getattr(_local, "stemmer", None)
    if st is None:
        import Stemmer  # PyStemmer: imported on first use, a command that never analyses never pays for it

        st = Stemmer.Stemmer("english")
        st.maxCacheSize = 0   # the cache is ours, shared across threads
        _local.stemmer = st
    return st


def _remember(cache: dict[str, Any], word: str, value: Any) -> Any:
    """Keep `value` for `word` in a word cache, within its bounds (a long word is never kept; a full
    cache starts again); returns `value`."""
    if len(word) <= CACHED_WORD_MAX:
        if len(cache) >= CACHE_MAX:
            cache.clear()
        cache[word] = value
    return value


def english_stem(word: str) -> str:
    """The Snowball English stem of a lower-cased word."""
    got = _STEMS.get(word)
    if got is None:
        got = _remember(_STEMS, word, _stemmer().stemWord(word))
    return got


class EnglishStems(Filter):
    """Snowball English stems (libstemmer), through the process's one cache."""

    is_morph = True

    def __call__(self, tokens: Any) -> Any:
        stem = english_stem
        for t in tokens:
            if not t.stopped:
                t.text = stem(t.text)
            yield t


def make_analyzer() -> Any:
    """Words (`\\w+` runs, dotted names kept whole, and an identifier's underscore-separated parts as
    words too), lower-cased, English stop words out (single characters kept: the 2 of "type 2", the
    6 of "IL-6"), Snowball English stems."""
    return RegexTokenizer(WORD_PATTERN) | UnderscoreParts() | LowercaseFilter() | StopFilter(minsize=1) | EnglishStems()


# -- counting terms in bulk --------------------------------------------------------------------------------

_COUNTERS: dict[tuple[Any, ...], TermCount] = {}
_has_underscore = operator.methodcaller("__contains__", "_")   # filtered in C: no Python frame a word
_COUNTERS_LOCK = threading.Lock()


def _signature(analyzer: Any) -> tuple[tuple[Any, ...], Any, Any, Callable[[str], str]] | None:
    """What decides an analyser's terms, for the pipelines make_analyzer builds (this derivation's and
    the previous ones, whose indexes keep their own analyser until they are re-derived); None for any
    other analyser."""
    items = list(getattr(analyzer, "items", ()))
    kinds = [type(i) for i in items]
    parts = kinds[1:2] == [UnderscoreParts]
    if parts:
        items.pop(1)
        kinds.pop(1)
    if len(items) != 4 or kinds[:3] != [RegexTokenizer, LowercaseFilter, StopFilter]:
        return None
    tok, stop, stem = items[0], items[2], items[3]
    if tok.gaps or tok.expression.groups:  # findall would return gaps or groups, not words
        return None
    if type(stem) is EnglishStems:
        stem_key: Any = "libstemmer-english"
        stemfn: Callable[[str], str] = english_stem
        ignore: frozenset[str] = frozenset()
    elif type(stem) is StemFilter:
        if stem.lang:
            from whoosh.lang import stemmer_for_language

            stemfn = stemmer_for_language(stem.lang)
        else:
            stemfn = stem.stemfn
        ignore = frozenset(stem.ignore)
        stem_key = ("whoosh", stem.lang, stemfn, ignore)
    else:
        return None
    key = (tok.expression.pattern, tok.expression.flags, parts, frozenset(stop.stops), stop.min, stop.max,
           stem_key)
    return key, tok.expression, (frozenset(stop.stops), stop.min, stop.max, ignore), stemfn


def term_counter(analyzer: Any) -> TermCount | None:
    """A function text -> {term: count} equal to running `analyzer` over the text, shared by every
    analyser of the same pipeline (an index's writers each unpickle their own); None for a pipeline
    this does not recognise (it goes the ordinary way)."""
    sig = _signature(analyzer)
    if sig is None:
        return None
    key, rx, (stops, low, high, ignore), stemfn = sig
    got = _COUNTERS.get(key)
    if got is not None:
        return got
    with _COUNTERS_LOCK:
        got = _COUNTERS.get(key)
        if got is None:
            got = _COUNTERS[key] = _make_counter(rx, key[2], stops, low, high, ignore, stemfn)
    return got


class _WordTerms(dict[str, "str | None"]):
    """word -> its term (None for a stop word), computed on first sight: a dict whose misses analyse,
    so a whole text's words are looked up by one C-level map."""

    def __init__(self, analyse: Callable[[str], str | None]) -> None:
        super().__init__()
        self.analyse = analyse

    def __missing__(self, word: str) -> str | None:
        return _remember(self, word, self.analyse(word))


def _make_counter(rx: Any, parts: bool, stops: frozenset[str], low: int, high: int | None,
                  ignore: frozenset[str], stemfn: Callable[[str], str]) -> TermCount:
    findall = rx.findall

    def analyse(word: str) -> str | None:
        if len(word) < low or (high is not None and len(word) > high) or word in stops:
            return None
        return word if word in ignore else stemfn(word)

    term_of = _WordTerms(analyse).__getitem__

    def count(text: str) -> dict[str, int]:
        # an ASCII text lower-cased whole reads the same words (case never moves a word boundary there)
        words = findall(text.lower()) if text.isascii() else list(map(str.lower, findall(text)))
        counted: Counter[Any] = Counter(map(term_of, words))   # stop words count under None, popped below
        if parts and "_" in text:
            for word, n in Counter(filter(_has_underscore, words)).items():
                for part in word.split("_"):
                    if part:
                        counted[term_of(part)] += n
        counted.pop(None, None)
        return counted

    return count


# -- posting formats --------------------------------------------------------------------------------------

class TermCounts(formats.Frequency):
    """Derivation 2's postings: Whoosh's Frequency (the count as weight, and again as 4 value bytes),
    counted by term_counter. Kept so an index of that derivation still opens while it is re-derived."""

    def word_values(self, value: Any, analyzer: Any, **kwargs: Any) -> Any:
        from whoosh.system import pack_uint

        count = term_counter(analyzer)
        if count is None or not isinstance(value, str):
            return super().word_values(value, analyzer, **kwargs)
        fb = self.field_boost
        return ((word, n, n * fb, pack_uint(n)) for word, n in count(value).items())


class TermWeights(formats.Format):
    """A posting is (document, how often the term occurs in it), the count held as the posting's
    weight and nothing else: no value bytes (Frequency writes the count a second time, which ranking
    never reads), no positions (there is no phrase query)."""

    posting_size = 0

    def __init__(self, field_boost: float = 1.0, **options: Any) -> None:
        self.field_boost = field_boost
        self.options = options

    def word_values(self, value: Any, analyzer: Any, **kwargs: Any) -> Any:
        count = term_counter(analyzer)
        if count is not None and isinstance(value, str):
            counted = count(value)
        else:
            counted = Counter(t.text for t in formats.tokens(value, analyzer, kwargs))
        fb = self.field_boost
        return ((word, n, n * fb, b"") for word, n in counted.items())

    def encode(self, value: Any) -> bytes:
        return b""


# -- queries and snippets ----------------------------------------------------------------------------------

def analyze(analyzer: Any, text: str, limit: int | None = MAX_QUERY_TERMS) -> dict[str, int]:
    """A text's terms with how often each occurs, in first-seen order (at most `limit` distinct
    ones; None: every one); no query language: every character is text, so nothing a person types
    can be syntax."""
    terms: dict[str, int] = {}
    if not text:
        return terms
    for tok in analyzer(text):
        word = tok.text
        if word in terms:
            terms[word] += 1
        elif limit is None or len(terms) < limit:
            terms[word] = 1
    return terms


def token_spans(analyzer: Any) -> Callable[[str], Iterator[tuple[str, int, int]]]:
    """A function text -> (term, start, end) for every analysed token, lazily (for snippets)."""

    def spans(text: str) -> Iterator[tuple[str, int, int]]:
        for tok in analyzer(text, chars=True):
            yield tok.text, tok.startchar, tok.endchar

    return spans
