"""What is embedded: the opening of a source, its digest, and the bucket every source carries."""
from __future__ import annotations

import hashlib
from collections import Counter

import pytest

from core.embed.text import BODY_READ_CHARS, BUCKETS, DEFAULT_BOUND_BYTES, bucket, embed_text


def test_title_one_space_then_the_body_with_whitespace_collapsed():
    text, digest = embed_text("Deploy  runbook", "# Steps\n\n    1.\tBuild\r\n\n2. Ship   it  \n")
    assert text == "Deploy runbook # Steps 1. Build 2. Ship it"
    assert digest == hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_an_empty_body_is_the_title_alone():
    assert embed_text("Only a title", "")[0] == "Only a title"


def test_collapsed_first_and_cut_second():
    body = "word \n\t  " * 3000                 # 9 characters a word in the body, 5 once collapsed
    text, _ = embed_text("T", body)
    assert text == "T" + " word" * 1638          # (8192 - 2) / 5 words: the whitespace spent none of it
    assert len(text.encode()) == DEFAULT_BOUND_BYTES - 1   # the cut fell after a space, which is dropped


def test_the_cut_falls_on_a_character_boundary_and_the_digest_is_of_the_sent_bytes():
    body = "é" * 10_000                           # two bytes a character
    for bound in (8192, 101, 100, 3):
        text, digest = embed_text("T", body, bound)
        data = text.encode("utf-8")
        assert len(data) <= bound and len(data) >= bound - 3
        assert digest == hashlib.sha256(data).hexdigest()
        data.decode("utf-8")                      # valid UTF-8: never half a character
    assert embed_text("T", "€€€", 4)[0] == "T"    # "T €" is 5 bytes: the euro is dropped whole, then the space
    assert embed_text("T", "𝄞" * 10, 7)[0] == "T 𝄞"


def test_only_the_first_16384_characters_of_the_body_are_read():
    lead = " " * BODY_READ_CHARS                   # a body that opens on a long run of whitespace
    assert embed_text("T", lead + "hidden words")[0] == "T"
    almost = " " * (BODY_READ_CHARS - 7) + "seen hidden"
    assert embed_text("T", almost)[0] == "T seen hi"


def test_the_digest_moves_with_the_text_and_only_with_it():
    a = embed_text("Title", "body text")
    assert embed_text("Title", "body   text\n") == a                 # whitespace only: same bytes
    assert embed_text("Title", "body text!")[1] != a[1]
    assert embed_text("Title2", "body text")[1] != a[1]
    assert embed_text("T", "x" * 9000)[1] == embed_text("T", "x" * 9500)[1]   # past the window: no change


def test_a_bad_bound_is_refused():
    with pytest.raises(ValueError, match="bound_bytes"):
        embed_text("T", "b", 0)


def test_the_bucket_is_fixed_for_the_life_of_a_deployment():
    # Frozen values: if this fails, bucket() changed and every stored row is in the wrong bucket.
    ids = ["0192f3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d", "page-1", "", "ENG/Deploy runbook", "ünïcödé"]
    assert [bucket(i) for i in ids] == [
        int.from_bytes(hashlib.sha256(i.encode()).digest()[:8], "big") % 64 for i in ids]
    assert [bucket(i) for i in ids] == [54, 25, 20, 52, 1]


def test_buckets_spread_ids_over_all_64():
    counts = Counter(bucket(f"0192f3c4-{n:04x}-7a8b-9c0d-1e2f3a4b5c6d") for n in range(6400))
    assert set(counts) == set(range(BUCKETS))
    assert max(counts.values()) < 2 * 100 and min(counts.values()) > 100 // 2
