"""One model cache, two installs: the prepared model (core/embed/prepared.py) is trusted by its content,
so two installs whose shipped model files differ in stamps (path, inode, mtime) — two venvs — load from the
same folder at once without either replacing it: no failure, no rewrite after the first, the same vectors.
Each install is a real process; the folder's files keep their inodes throughout."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from core.embed import local, prepared

ROOT = Path(__file__).resolve().parent.parent
LOADS = 12

INSTALL = textwrap.dedent("""
    import hashlib, json, sys
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from core.embed import local
    local.model_path = lambda: Path({model!r})       # this install's copy of the shipped model
    digests, failures = [], []
    for _ in range({loads}):
        local._loaded.clear()                         # a new process's load, {loads} times over
        try:
            vectors = local.LocalProvider(threads=1).embed(["roll back a deploy", "who is on call"], timeout=300)
            digests.append(hashlib.sha256(b"".join(v.tobytes() for v in vectors)).hexdigest())
        except Exception as exc:
            failures.append(f"{{type(exc).__name__}}: {{exc}}")
    print(json.dumps({{"digests": sorted(set(digests)), "failures": failures}}))
""")


def _install(tmp_path: Path, name: str) -> Path:
    """A copy of the shipped model as another venv holds it: same bytes, its own path, inode and mtime."""
    copy = tmp_path / name / "model.onnx"
    copy.parent.mkdir()
    shutil.copyfile(local.model_path(), copy)
    os.utime(copy, ns=(1_600_000_000_000_000_000 + len(name),) * 2)
    return copy


def _start(model: Path, cache: Path, loads: int) -> subprocess.Popen[str]:
    env = dict(os.environ, CREWLET_CACHE=str(cache))
    return subprocess.Popen([sys.executable, "-c", INSTALL.format(root=str(ROOT), model=str(model), loads=loads)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen[str]) -> dict:
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err[-2000:]
    return json.loads(out.strip().splitlines()[-1])


def _inodes(folder: Path) -> dict[str, int]:
    return {name: (folder / name).stat().st_ino for name in (prepared.GRAPH_FILE, prepared.DATA_FILE, prepared.STAMP_FILE)}


def test_two_installs_load_from_one_cache_at_once_without_rewriting_it(tmp_path, monkeypatch):
    import onnxruntime as ort

    cache = tmp_path / "cache"
    first, second = _install(tmp_path, "venv-a"), _install(tmp_path, "venv-b")
    alone = _finish(_start(first, cache, 1))                 # the first load prepares the folder
    monkeypatch.setenv("CREWLET_CACHE", str(cache))
    folder = prepared.folder_for(local.MODEL_SHA256, ort.__version__)
    written = _inodes(folder)

    both = [_start(first, cache, LOADS), _start(second, cache, LOADS)]
    results = [_finish(p) for p in both]
    for r in results:
        assert r["failures"] == []
        assert r["digests"] == alone["digests"]               # the same vectors, every load, either install
    assert _inodes(folder) == written                         # never rewritten after the first
    assert sorted(p.name for p in folder.parent.iterdir()) == sorted([folder.name, "installs"])


def test_a_folder_whose_content_is_wrong_is_replaced_whole_and_leftovers_are_swept(tmp_path, monkeypatch):
    import onnxruntime as ort

    cache = tmp_path / "cache"
    monkeypatch.setenv("CREWLET_CACHE", str(cache))
    model = local.model_path()
    graph = prepared.prepare(ort, model, local.MODEL_SHA256)
    assert graph is not None
    folder = graph.parent
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    killed = folder.with_name(f"{folder.name}.tmp-{dead.pid}-0badc0de")   # a writer killed mid-way
    killed.mkdir()
    (killed / prepared.DATA_FILE).write_bytes(b"half")
    data = folder / prepared.DATA_FILE
    stat = data.stat()
    with data.open("r+b") as f:                                # damaged, size kept
        f.seek(1000)
        f.write(b"\0" * 16)
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert prepared.trusted(folder, model, local.MODEL_SHA256, ort.__version__) is None
    local_loaded = dict(local._loaded)
    try:
        local._loaded.clear()
        local.LocalProvider(threads=1).embed(["x"], timeout=300)
    finally:
        local._loaded.clear()
        local._loaded.update(local_loaded)
    assert prepared.trusted(folder, model, local.MODEL_SHA256, ort.__version__) == graph
    assert not killed.exists()
    assert sorted(p.name for p in folder.parent.iterdir()) == sorted([folder.name, "installs"])


def test_a_copy_whose_stats_changed_but_not_its_content_is_kept(tmp_path, monkeypatch):
    import onnxruntime as ort

    monkeypatch.setenv("CREWLET_CACHE", str(tmp_path / "cache"))
    model = local.model_path()
    graph = prepared.prepare(ort, model, local.MODEL_SHA256)
    assert graph is not None
    before = _inodes(graph.parent)
    os.utime(graph.parent / prepared.DATA_FILE, ns=(1_500_000_000_000_000_000,) * 2)   # touched, same bytes
    assert prepared.trusted(graph.parent, model, local.MODEL_SHA256, ort.__version__) == graph
    assert prepared.prepare(ort, model, local.MODEL_SHA256) == graph
    assert _inodes(graph.parent) == before
