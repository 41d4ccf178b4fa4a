"""Plain text from Markdown, the ≤200-character snippet, and finding a query's terms in text."""
from __future__ import annotations

from core.search.lexical import analyze, make_analyzer, token_spans
from core.search.seam import SNIPPET_MAX
from core.search.snippets import ELLIPSIS, TermFinder, plain_text, snippet

ANALYZER = make_analyzer()
TOKENS = token_spans(ANALYZER)


def finder(query: str) -> TermFinder:
    return TermFinder(analyze(ANALYZER, query), TOKENS)


def test_plain_text_keeps_the_words_and_drops_the_markup():
    md = ("---\ntitle: Front\nms.date: 01/01/2024\n---\n# Heading one\n\nSome **bold**, *italic*, _under_ and ~~gone~~ text.\n"
          "A [link text](https://example.com/a_b) and ![alt words](img.png) and <https://x.org>.\n\n"
          "> [!NOTE]\n> Quoted note.\n\n- item one\n1. item two\n\n| a | b |\n|---|:-:|\n| c | d |\n\n"
          "```python\nprint('code kept')\n```\n\nInline `IoCreateDevice` and IRP_MJ_READ &amp; <b>tags</b>.\n"
          "<!-- a comment -->\n[ref]: https://example.com\n")
    text = plain_text(md)
    for kept in ("Heading one", "bold", "italic", "under", "link text", "alt words", "Quoted note", "item one",
                 "item two", "print('code kept')", "IoCreateDevice", "IRP_MJ_READ", "& tags", "c d"):
        assert kept in text, kept
    for gone in ("title: Front", "**", "](", "https://example.com", "#", "`", "|", "[!NOTE]", "<b>", "<!--", "---",
                 "\n", "> "):
        assert gone not in text, gone
    assert plain_text("") == "" and plain_text("   \n ") == ""


def test_a_snippet_is_at_most_200_characters_around_the_first_match():
    text = "Intro words " * 40 + "the rollback procedure is simple " + "trailing words " * 40
    s = snippet(text, finder("rollbacks"))
    assert len(s) <= SNIPPET_MAX
    assert s.startswith(ELLIPSIS) and s.endswith(ELLIPSIS) and "rollback procedure" in s
    assert s.index("rollback") <= 80           # the match sits near the start, with a little lead
    assert not s[1:].startswith(" ")


def test_a_snippet_without_a_match_is_the_start_and_a_short_text_is_whole():
    text = "word " * 100
    s = snippet(text, finder("absent"))
    assert len(s) <= SNIPPET_MAX and s.startswith("word") and s.endswith(ELLIPSIS)
    assert snippet("short text", finder("short")) == "short text"
    near_end = "x " * 150 + "needle at the very end"
    s = snippet(near_end, finder("needle"))
    assert len(s) <= SNIPPET_MAX and s.endswith("the very end") and s.startswith(ELLIPSIS)


def test_a_snippet_of_one_enormous_word_still_fits():
    s = snippet("a" * 1000 + " deploy", finder("deploy"))
    assert len(s) <= SNIPPET_MAX


def test_terms_are_found_by_their_analysed_form():
    f = finder("deploying services")
    text = "We deployed two Services; the depth of a deployment varies. Servicing is separate."
    found = [text[s:e] for s, e in f.spans(text)]
    assert "deployed" in found and "Services" in found and "Servicing" in found
    assert "depth" not in found
    assert f.first("nothing here") is None
    assert TermFinder({}, TOKENS).first("anything") is None


def test_query_analysis_is_words_only():
    assert analyze(ANALYZER, 'title:deploy AND (rollback OR "x") *') == {"titl": 1, "deploy": 1, "rollback": 1, "x": 1}
    assert analyze(ANALYZER, "the and of") == {}
    assert analyze(ANALYZER, "deploy deploys deploying") == {"deploy": 3}


def test_the_fast_term_count_equals_the_analyser():
    from collections import Counter

    from whoosh.analysis import LowercaseFilter, RegexTokenizer, StemFilter, StopFilter

    from core.search.analysis import WORD_PATTERN, TermCounts, TermWeights, UnderscoreParts, term_counter

    text = ("Deploying the IoCreateDevice routine: IRP_MJ_READ, e.g. version 3.5.1 and IL-6; Ünïcode WÖRDS "
            "straße İstanbul the THE a an I x 2 _under_ déjà-vu ...dots... end. Added internal intervals")
    # this derivation's analyser, and derivation 2's (an index of it keeps serving while it is re-derived)
    older = (RegexTokenizer(WORD_PATTERN) | UnderscoreParts() | LowercaseFilter() | StopFilter(minsize=1)
             | StemFilter(lang="en", cachesize=100_000))
    for analyzer in (ANALYZER, older):
        expected = Counter(t.text for t in analyzer(text))
        for sample in (text, text.encode("ascii", "ignore").decode()):   # the ASCII path lower-cases whole
            assert term_counter(analyzer)(sample) == dict(Counter(t.text for t in analyzer(sample)))
        values = {w: (n, wt, v) for w, n, wt, v in TermWeights().word_values(text, analyzer)}
        assert values == {w: (n, float(n), b"") for w, n in expected.items()}
        assert {w: n for w, n, _, _ in TermCounts().word_values(text, analyzer)} == dict(expected)
    # libstemmer's Snowball where it is newer than Whoosh's port
    assert term_counter(ANALYZER)("added internal")== {"add": 1, "internal": 1}
    assert term_counter(older)("added internal") == {"ad": 1, "intern": 1}


def test_every_analyser_of_a_pipeline_shares_one_counter():
    """Each writer unpickles its own analyser: they share one counter (and its word cache), so a long-
    running worker neither re-stems every word per writer nor keeps every writer's cache alive."""
    from core.search.analysis import term_counter

    first = term_counter(make_analyzer())
    assert all(term_counter(make_analyzer()) is first for _ in range(50))


def test_backslash_escapes_keep_the_escaped_character():
    text = plain_text("Send WM\\_PALETTECHANGED, \\*not\\* emphasis, a \\# sign, C:\\\\path and a lone \\ slash.")
    assert "WM_PALETTECHANGED" in text
    assert "*not*" in text and "# sign" in text and "C:\\path" in text
    assert "lone slash" in text
    terms = analyze(ANALYZER, text, None)
    assert {"wm_palettechang", "wm", "palettechang"} <= set(terms)


def test_an_identifier_is_found_by_its_parts_and_highlighted():
    assert analyze(ANALYZER, "WM_PALETTECHANGED") == {"wm_palettechang": 1, "wm": 1, "palettechang": 1}
    assert analyze(ANALYZER, "palettechanged") == {"palettechang": 1}
    text = "the WM_PALETTECHANGED message"
    assert [text[s:e] for s, e in finder("palettechanged").spans(text)] == ["PALETTECHANGED"]
    assert [text[s:e] for s, e in finder("WM_PALETTECHANGED").spans(text)][0] == "WM_PALETTECHANGED"


def test_a_page_that_opens_with_a_rule_keeps_its_opening_text():
    assert plain_text("---\n\nOpening words here.\n\n---\n\nThe rest.") == "Opening words here. The rest."
    assert plain_text("---\ntitle: Front\n---\nBody") == "Body"                      # YAML front matter still goes
    assert plain_text("---\nms.date: 01/01/2024\nauthor: x\n...\nBody") == "Body"
    assert "Not yaml" in plain_text("---\nNot yaml, just a sentence\n---\nBody")
