"""The local model prepared once on disk (core/embed/prepared.py): the same vector bytes as the model
optimised in memory, a copy its stamp no longer vouches for is prepared again, a tampered model is still
refused, and a cache that cannot be written falls back to the in-memory optimisation."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from core.embed import local, prepared
from core.embed.provider import ProviderUnavailable

ROOT = Path(__file__).resolve().parent.parent

# Texts of every length the duty sends (runs of one, of eight short inputs, of four long ones), so the
# comparison covers the batched, padded runs and not only a single short query.
SCRIPT = textwrap.dedent("""
    import hashlib, json, sys
    sys.path.insert(0, {root!r})
    from core.embed import local, prepared
    import onnxruntime as ort
    texts = ["roll back a deploy", "the", "?!", "Wie spät ist es"] + [
        " ".join(f"word{{i}} about drivers and interrupts" for i in range(n)) for n in (3, 9, 20, 45, 80, 120)] * 3
    provider = local.LocalProvider(threads=1)
    vectors = provider.embed(texts, timeout=120)
    folder = prepared.folder_for(local.MODEL_SHA256, ort.__version__)
    used = prepared.trusted(folder, local.model_path(), local.MODEL_SHA256, ort.__version__)
    print(json.dumps({{"digest": hashlib.sha256(b"".join(v.tobytes() for v in vectors)).hexdigest(),
                      "prepared": used is not None}}))
""")


def embed_in_process(cache: Path) -> dict:
    env = dict(os.environ, CREWLET_CACHE=str(cache))
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(root=str(ROOT))], capture_output=True, text=True,
                         timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_prepared_model_gives_the_same_bytes_as_the_model_optimised_in_memory(tmp_path):
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the cache would be: nothing can be prepared under it")
    in_memory = embed_in_process(blocked / "cache")
    first = embed_in_process(tmp_path / "cache")          # prepares the copy, then embeds through it
    again = embed_in_process(tmp_path / "cache")          # opens the copy its stamp vouches for
    assert in_memory["prepared"] is False
    assert first["prepared"] is True and again["prepared"] is True
    assert in_memory["digest"] == first["digest"] == again["digest"]


def test_a_copy_its_stamp_no_longer_vouches_for_is_prepared_again(tmp_path, monkeypatch):
    import onnxruntime as ort

    monkeypatch.setenv("CREWLET_CACHE", str(tmp_path / "cache"))
    model = local.model_path()
    graph = prepared.prepare(ort, model, local.MODEL_SHA256)
    assert graph is not None and graph.is_file()
    folder = graph.parent
    assert prepared.trusted(folder, model, local.MODEL_SHA256, ort.__version__) == graph
    stamp = json.loads((folder / prepared.STAMP_FILE).read_text())
    assert stamp["model_sha256"] == local.MODEL_SHA256 and stamp["onnxruntime"] == ort.__version__
    data = folder / prepared.DATA_FILE
    with data.open("r+b") as f:                            # one byte changed, size kept: the mtime moves
        f.seek(4096)
        byte = f.read(1)
        f.seek(4096)
        f.write(bytes([byte[0] ^ 0xFF]))
    os.utime(data, ns=(stamp["files"][prepared.DATA_FILE]["stat"][1] + 1_000_000,) * 2)
    assert prepared.trusted(folder, model, local.MODEL_SHA256, ort.__version__) is None
    assert prepared.trusted(folder, model, local.MODEL_SHA256, "0.0.0") is None      # another onnxruntime
    again = prepared.prepare(ort, model, local.MODEL_SHA256)
    assert again == graph and prepared.trusted(folder, model, local.MODEL_SHA256, ort.__version__) == graph
    fresh = json.loads((folder / prepared.STAMP_FILE).read_text())
    assert fresh["files"][prepared.DATA_FILE]["sha256"] == stamp["files"][prepared.DATA_FILE]["sha256"]


def test_a_tampered_model_is_refused_even_with_a_prepared_copy_of_the_real_one(tmp_path, monkeypatch):
    import onnxruntime as ort

    monkeypatch.setenv("CREWLET_CACHE", str(tmp_path / "cache"))
    real = local.model_path()
    assert prepared.prepare(ort, real, local.MODEL_SHA256) is not None
    bad = tmp_path / "model.onnx"
    bad.write_bytes(real.read_bytes()[:-16] + b"\0" * 16)
    monkeypatch.setattr(local, "model_path", lambda: bad)
    monkeypatch.setattr(local, "_loaded", {})
    with pytest.raises(ProviderUnavailable, match="model file .* does not match its pinned sha256"):
        local.LocalProvider(threads=1).embed(["x"], timeout=60)
