"""The write-time policy check of an entry's body (`core.text.claims.check_entry_body`): each rule on its
own, the credential refusal never repeating the secret, and the whole checker measured on the labelled
set `tests/data/entry_bodies.jsonl` (figures in docs/entries.md, "The one-claim check")."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.text.claims import KINDS, MAX_ENTRY_CHARS, Refusal, check_entry_body, sentences
from core.text.credentials import credential_in

SET = Path(__file__).parent / "data" / "entry_bodies.jsonl"
LABELS = ("one", "several", "credential")


def labelled() -> list[dict]:
    return [json.loads(line) for line in SET.read_text(encoding="utf-8").splitlines() if line.strip()]


def verdict(refusal: Refusal | None) -> str:
    if refusal is None:
        return "one"
    return {"entry_credential": "credential", "entry_several_claims": "several"}.get(refusal.code, refusal.code)


# -- the labelled set ------------------------------------------------------------------------------------

def test_the_labelled_set_is_large_mostly_acceptable_and_well_formed():
    rows = labelled()
    assert len(rows) >= 240
    assert all(set(r) == {"body", "kind", "label", "why", "set"} for r in rows)
    assert all(r["kind"] in KINDS and r["label"] in LABELS and r["why"] for r in rows)
    assert all(r["set"] in ("tuning", "heldout", "heldout2") for r in rows)
    assert len({r["body"] for r in rows}) == len(rows)             # no body counted twice
    share = sum(r["label"] == "one" for r in rows) / len(rows)
    assert 0.55 <= share <= 0.65
    assert all(len(r["body"].strip()) <= MAX_ENTRY_CHARS for r in rows)


def test_the_checker_refuses_what_it_should_and_rarely_what_it_should_not():
    rows = labelled()
    got = [verdict(check_entry_body(r["body"], r["kind"])) for r in rows]
    refused = [g != "one" for g in got]
    bad = [r["label"] != "one" for r in rows]
    tp = sum(r and b for r, b in zip(refused, bad))
    precision = tp / sum(refused)
    recall = tp / sum(bad)
    false_refusal_rate = sum(r and not b for r, b in zip(refused, bad)) / sum(not b for b in bad)
    # measured on 2026-12-02 over 376 bodies: precision 0.973, recall 0.967, false refusals 1.8% (4 of 225)
    assert precision >= 0.96
    assert recall >= 0.95
    assert false_refusal_rate <= 0.02
    # a body refused for the right reason: a credential is never let through as "several"
    creds = [g for g, r in zip(got, rows) if r["label"] == "credential"]
    assert creds.count("credential") / len(creds) >= 0.9
    several = [g for g, r in zip(got, rows) if r["label"] == "several"]
    assert several.count("several") / len(several) >= 0.95


# -- each rule -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("body, signal", [
    ("- Deploys need the VPN\n- The cache clears on Sunday", "list of 2 items"),
    ("1. The API runs on 8080.\n2. The worker reads the jobs queue.", "list of 2 items"),
    ("The token (1) is signed with RS256 (2) rotates every 30 days.", "enumeration"),
    ("## Deploys\nDeploys go through Argo CD.", "heading"),
    ("Deploys: through Argo CD.\nCaching: five minutes.", "labelled lines"),
    ("TL;DR: we moved to pnpm, CI is faster, and the lockfile is committed.", "summary"),
    ("Three things to know: the VPN is required, staging resets weekly, and the panel is IP-restricted.",
     "summary"),
    ("Fixed the login loop. Added retries to the uploader.", "changelog"),
    ("Email goes through Postmark, and also SMS goes through Twilio.", "and also"),
    ("Email goes through Postmark. Additionally, SMS goes through Twilio.", "Additionally"),
    ("Redis holds sessions; Kafka carries events; Snowflake is the warehouse.", "semicolons"),
    ("Our SLOs: 99.9% for checkout, 300 ms p99 for search, 1 h RPO for the database.", "lists 3 items"),
    ("The API is in Go, the worker is in Python, and the dashboard is in TypeScript.", "'X is Y'"),
    ("Postgres 14.9, Redis 7.0.12, Kafka 3.6, Elasticsearch 8.11.", "no verb"),
    ("The worker image is 1.2 GB. The API image is 340 MB.", "same of different subjects"),
    ("Deploys need the VPN. The cache clears on Sunday.", "sentence 2"),
    (" ".join(f"Step {n} of the export touches the export table." for n in range(7)), "7 sentences"),
])
def test_each_rule_refuses_naming_its_signal_and_the_fix(body, signal):
    refusal = check_entry_body(body, "FACT")
    assert refusal is not None and refusal.code == "entry_several_claims"
    assert signal in refusal.message
    assert "one entry per fact" in refusal.message and "\n" not in refusal.message


@pytest.mark.parametrize("body, kind", [
    ("We use Postgres because our orders need multi-row transactions.", "DECISION"),
    ("We use GitHub Actions because the runners are close to the code. We rejected Jenkins: nobody wanted "
     "to maintain the server.", "DECISION"),
    ("Redis `KEYS *` blocks production for seconds. Use `SCAN` instead.", "GOTCHA"),
    ("The worker pool size is set by `WORKERS`. It is read once at startup.", "FACT"),
    ("Datetimes from the legacy API have no offset. Convert them before comparing.", "FACT"),
    ("Postgres is 14.9 in production, e.g. `SELECT version()` says so, i.e. not 15.", "FACT"),
    ("The fix lives in core/text/claims.py and `Node.open()` calls it since v1.2.3.", "FACT"),
    ("Rates come from https://rates.example.com/v2/latest. They refresh every 10 minutes.", "FACT"),
    ("```\nSELECT count(*) FROM orders;\n```\nreturns about 1.2 million rows in production.", "FACT"),
    ("Webhooks are signed with HMAC-SHA256. See docs/webhooks.md for the header.", "FACT"),
    ("The payments webhook retries 8 times; after that the event goes to the dead-letter queue.", "FACT"),
    ("The GraphQL gateway stitches three subgraphs: accounts, orders and inventory.", "FACT"),
])
def test_one_claim_with_its_reason_code_or_abbreviations_is_kept(body, kind):
    assert check_entry_body(body, kind) is None


def test_a_dot_inside_code_a_path_a_version_an_abbreviation_or_a_url_ends_no_sentence():
    text = ("Set `a.b.c` in core/x.py for v1.2.3 (e.g. 0.75) at https://x.example.com/a.b, i.e. "
            "always. It works.")
    assert len(sentences(text)) == 2


def test_the_kind_widens_what_a_second_sentence_may_be():
    decision = "We moved CI to GitHub Actions to cut costs. We rejected Jenkins because nobody wanted the upkeep."
    assert check_entry_body(decision, "DECISION") is None
    assert check_entry_body(decision, "FACT") is not None
    gotcha = "The staging load balancer caches 404s for five minutes. Purge the CDN after a deploy."
    assert check_entry_body(gotcha, "GOTCHA") is None
    assert check_entry_body(gotcha, "FACT") is not None
    # an instruction leans on a statement of the problem; two instructions are two rules
    rules = "Use snake_case for JSON keys. Write commit messages in the imperative."
    assert check_entry_body(rules, "CONVENTION") is not None


def test_a_sentence_that_opens_on_a_case_or_points_back_continues_the_claim():
    assert check_entry_body("The consumer acks after the database commit. A crash in between causes a "
                            "redelivery, so handlers must be idempotent.") is None
    assert check_entry_body("Outbound HTTP leaves through the NAT gateway at 52.18.0.4. Partners allow-list "
                            "that address.") is None


@pytest.mark.parametrize("body, code", [
    ("", "entry_empty"), ("  \n\t", "entry_empty"),
    ("x" * (MAX_ENTRY_CHARS + 1), "entry_too_long"),
    ("bell\x07", "entry_invalid"), (42, "entry_invalid"),
])
def test_empty_too_long_or_not_text_is_refused(body, code):
    refusal = check_entry_body(body, "FACT")
    assert refusal is not None and refusal.code == code and "\n" not in refusal.message


def test_the_bound_is_inclusive_and_the_kind_is_checked():
    assert check_entry_body("y" * MAX_ENTRY_CHARS) is None
    assert check_entry_body("Deploys need the VPN.", "decision") is None
    assert check_entry_body("Deploys need the VPN.", None) is None           # no kind: a FACT
    refusal = check_entry_body("Deploys need the VPN.", "OPINION")
    assert refusal is not None and refusal.code == "entry_invalid_kind" and "FACT" in refusal.message


@pytest.mark.parametrize("secret", [
    "ghp_4fJ8kLm2Qx9Rt7Vb3Nw1Zc6Yd5Ep0Ha8Gs2", "AKIAIOSFODNN7EXAMPLE", "sk-proj-Xk29aLpQ7vN3mT8rW1yZ5bC4dE6f",
    "xoxb-2211334455-9988776655-AbCdEfGhIjKl", "7f3e9a1b2c4d5e6f708192a3b4c5d6e7",
])
def test_a_credential_is_refused_before_anything_else_and_never_repeated(secret):
    body = f"- the deploy bot uses api_key={secret}\n- it rotates yearly"        # a list, too
    refusal = check_entry_body(body, "FACT")
    assert refusal is not None and refusal.code == "entry_credential"
    assert secret not in refusal.message and secret[:12] not in refusal.message
    assert "where the secret is kept" in refusal.message


def test_mentioning_a_secret_is_not_holding_one():
    body = "The Stripe API key is in AWS Secrets Manager under `prod/stripe/api-key`; set token=$STRIPE_KEY."
    assert credential_in(body) is None
    assert check_entry_body(body, "FACT") is None
