"""The local model as onnxruntime has already optimised it, kept on disk so a process need not do it again.

The shipped file stores its weights as int8 with a scale (23 MB); onnxruntime's graph optimisation folds
them into float32 matrices (90 MB) and fuses the attention and normalisation nodes. Done in memory, as
every process did, it costs ~0.2 s of CPU and ~215 MB of peak RSS (the int8 file, its parse, the folded
copies and the prepacked ones side by side) before the first query is embedded. So the first process to
load the model has onnxruntime write the optimised graph once (`optimized_model_filepath`, at the
EXTENDED level, which onnxruntime documents as portable between machines), with every initialiser in
one external data file; later processes open that graph with optimisation off. onnxruntime maps an
external data file into memory instead of copying it, so a process holds the weights once and the
session opens in ~50 ms of CPU (bench/startup.py, docs/search.md).

The vectors are the same bytes: the session runs the same optimised graph either way (tests/
test_embed_prepared.py compares them). What is trusted, and why:

- the shipped model is checked against its pinned sha256 before it is optimised (as it always was);
- the prepared copy's stamp records the shipped file's size, mtime and inode as it was verified, the
  onnxruntime version that wrote the copy, and the copy's own sizes, mtimes and sha256. A load checks
  the stats (no hashing: a sha256 of 90 MB is ~0.1 s, the cost being removed); any difference, an
  unreadable stamp or another onnxruntime prepares a fresh copy from the verified model.

The copy lives in the user's cache directory (`CREWLET_CACHE` overrides it: the tests point it at a
temporary one), one folder per model digest, onnxruntime version and machine. Where it cannot be written
(a read-only cache) the model is optimised in memory as before: slower, never wrong.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import shutil
import uuid
from pathlib import Path
from typing import Any

log = logging.getLogger("crewlet.embed")

CACHE_ENV = "CREWLET_CACHE"
GRAPH_FILE = "model.onnx"
DATA_FILE = "model.data"
STAMP_FILE = "stamp.json"
FORMAT = 1                      # bump when what is written here changes


def cache_root() -> Path:
    """Where crewlet keeps what it derives for itself on this machine (never a home's data)."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("crewlet", appauthor=False))


def _stat(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def folder_for(model_sha256: str, ort_version: str) -> Path:
    return cache_root() / "models" / f"{model_sha256[:16]}-ort{ort_version}-{platform.machine() or 'cpu'}"


def trusted(folder: Path, model: Path, model_sha256: str, ort_version: str) -> Path | None:
    """The prepared graph in `folder` when its stamp still vouches for it (stats only), else None."""
    try:
        stamp = json.loads((folder / STAMP_FILE).read_text(encoding="utf-8"))
        if (stamp.get("format") != FORMAT or stamp.get("model_sha256") != model_sha256
                or stamp.get("onnxruntime") != ort_version or stamp.get("model_stat") != _stat(model)):
            return None
        for name in (GRAPH_FILE, DATA_FILE):
            if stamp.get("files", {}).get(name, {}).get("stat") != _stat(folder / name)[:2]:
                return None
    except (OSError, ValueError, AttributeError, TypeError):
        return None
    return folder / GRAPH_FILE


def prepare(ort: Any, model: Path, model_sha256: str) -> Path | None:
    """The prepared graph for `model` (already verified against `model_sha256` by the caller), written
    now if there is no trusted one, by a session of its own at the EXTENDED level. None when it cannot be
    written here."""
    folder = folder_for(model_sha256, ort.__version__)
    found = trusted(folder, model, model_sha256, ort.__version__)
    if found is not None:
        return found
    staging = folder.with_name(f"{folder.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        staging.mkdir(parents=True)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        opts.optimized_model_filepath = str(staging / GRAPH_FILE)
        opts.add_session_config_entry("session.optimized_model_external_initializers_file_name", DATA_FILE)
        opts.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
        ort.InferenceSession(str(model), sess_options=opts, providers=["CPUExecutionProvider"])
        files = {name: {"stat": _stat(staging / name)[:2], "sha256": _sha256(staging / name)}
                 for name in (GRAPH_FILE, DATA_FILE)}
        stamp = {"format": FORMAT, "model": str(model), "model_sha256": model_sha256, "model_stat": _stat(model),
                 "onnxruntime": ort.__version__, "files": files}
        (staging / STAMP_FILE).write_text(json.dumps(stamp, indent=1), encoding="utf-8")
        if trusted(folder, model, model_sha256, ort.__version__) is not None:   # another process won
            shutil.rmtree(staging, ignore_errors=True)
            return folder / GRAPH_FILE
        shutil.rmtree(folder, ignore_errors=True)     # a stale copy (another model, a changed file)
        try:
            os.rename(staging, folder)
        except OSError:              # lost a race to another process: use its copy when it vouches for itself
            shutil.rmtree(staging, ignore_errors=True)
        return trusted(folder, model, model_sha256, ort.__version__)
    except Exception as exc:  # a cache that cannot be written: the caller optimises in memory
        log.debug("the prepared model could not be written under %s: %s", folder, exc)
        shutil.rmtree(staging, ignore_errors=True)
        return None
