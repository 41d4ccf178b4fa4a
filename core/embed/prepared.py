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
test_embed_prepared.py compares them). The cache is shared by every install on the machine (two venvs,
two checkouts), so what is trusted is content, never one install's file stamps:

- the folder is named by the shipped model's digest, the onnxruntime version and the machine, and its
  stamp records the digest and size of each file written into it. A folder whose files match the stamp
  is trusted by every install alike; the sizes and mtimes recorded beside the digests only spare a load
  the hashing (~0.1 s for 90 MB) while the files are the very ones that were hashed, and any difference
  is settled by the digests, not by rewriting: a folder whose content is right is never replaced;
- each install's shipped model is checked against its pinned sha256 before its first use of the cache,
  and the check is remembered per install (`installs/`, one small file per model path: its size, mtime
  and inode as verified), so one install's record never rejects another's;
- a folder is written whole under a temporary name and renamed into place, so no reader sees half of
  one; one that fails its digests is renamed aside before the new one takes its name (a reader that
  opened it keeps its mapped files), and the staging or aside folders of a killed process are swept.

The copy lives in the user's cache directory (`CREWLET_CACHE` overrides it: the tests point it at a
temporary one). Where it cannot be written (a read-only cache) the model is optimised in memory as
before: slower, never wrong.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import platform
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

from ..leftovers import sweep

log = logging.getLogger("crewlet.embed")

CACHE_ENV = "CREWLET_CACHE"
GRAPH_FILE = "model.onnx"
DATA_FILE = "model.data"
STAMP_FILE = "stamp.json"
FORMAT = 2                      # bump when what is written here changes (2: trusted by content digests)


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


def models_dir() -> Path:
    return cache_root() / "models"


def folder_for(model_sha256: str, ort_version: str) -> Path:
    # the format is in the name: an install of an older crewlet keeps its own folder, and neither replaces the other's
    return models_dir() / f"{model_sha256[:16]}-ort{ort_version}-{platform.machine() or 'cpu'}-f{FORMAT}"


# what a writer leaves beside a folder while it works: `<folder>.tmp-<pid>-<hex>` (staging) and
# `<folder>.old-<pid>-<hex>` (a folder that failed its digests, on its way out)
_WORKING = re.compile(r".+\.(?:tmp|old)-(?P<pid>\d+)-[0-9a-f]+")


def _install_record(model: Path) -> Path:
    key = hashlib.sha256(str(model.resolve()).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return models_dir() / "installs" / f"{key}.json"


def _install_vouched(model: Path, model_sha256: str) -> bool:
    """This install's model file is the one verified against `model_sha256` (its stat as it was then)."""
    try:
        record = json.loads(_install_record(model).read_text(encoding="utf-8"))
        return record.get("model_sha256") == model_sha256 and record.get("stat") == _stat(model)
    except (OSError, ValueError, AttributeError):
        return False


def _remember_install(model: Path, model_sha256: str) -> None:
    """Note that this install's model was verified (written whole: a temp file renamed into place)."""
    record = _install_record(model)
    tmp = record.with_name(f"{record.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}")
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"model": str(model), "model_sha256": model_sha256, "stat": _stat(model)}),
                       encoding="utf-8")
        os.replace(tmp, record)
    except OSError as exc:   # not remembered: the next process verifies the model again, nothing worse
        log.debug("could not record the verified model %s: %s", model, exc)
        with contextlib.suppress(OSError):
            tmp.unlink()


def _content_trusted(folder: Path, model_sha256: str, ort_version: str) -> bool:
    """The folder holds the prepared graph of this model for this onnxruntime: its files are those its
    stamp names, by their stats as hashed (fast) or else by their digests."""
    try:
        stamp = json.loads((folder / STAMP_FILE).read_text(encoding="utf-8"))
        if (stamp.get("format") != FORMAT or stamp.get("model_sha256") != model_sha256
                or stamp.get("onnxruntime") != ort_version):
            return False
        files = stamp["files"]
        for name in (GRAPH_FILE, DATA_FILE):
            st = _stat(folder / name)
            if st[0] != files[name]["size"]:
                return False
            if st[:2] != files[name]["stat"][:2] and _sha256(folder / name) != files[name]["sha256"]:
                return False
    except (OSError, ValueError, AttributeError, TypeError, KeyError):
        return False
    return True


def trusted(folder: Path, model: Path, model_sha256: str, ort_version: str) -> Path | None:
    """The prepared graph in `folder` when its content is the prepared `model_sha256` and this install's
    `model` is the file verified against that digest, else None."""
    if not _install_vouched(model, model_sha256) or not _content_trusted(folder, model_sha256, ort_version):
        return None
    return folder / GRAPH_FILE


def sweep_leftovers() -> None:
    """The staging and aside folders of processes that were killed while they wrote the cache."""
    sweep(models_dir(), _WORKING)


def prepare(ort: Any, model: Path, model_sha256: str) -> Path | None:
    """The prepared graph for `model` (already verified against `model_sha256` by the caller): the folder
    already in the cache when its content is right (whichever install wrote it), else one written now by a
    session of its own at the EXTENDED level. None when it cannot be written here."""
    folder = folder_for(model_sha256, ort.__version__)
    _remember_install(model, model_sha256)
    if _content_trusted(folder, model_sha256, ort.__version__):
        return folder / GRAPH_FILE
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
        files = {name: {"size": _stat(staging / name)[0], "stat": _stat(staging / name)[:2],
                        "sha256": _sha256(staging / name)} for name in (GRAPH_FILE, DATA_FILE)}
        stamp = {"format": FORMAT, "model_sha256": model_sha256, "onnxruntime": ort.__version__, "files": files}
        (staging / STAMP_FILE).write_text(json.dumps(stamp, indent=1), encoding="utf-8")
        _install(staging, folder, model_sha256, ort.__version__)
        return folder / GRAPH_FILE if _content_trusted(folder, model_sha256, ort.__version__) else None
    except Exception as exc:  # a cache that cannot be written: the caller optimises in memory
        log.debug("the prepared model could not be written under %s: %s", folder, exc)
        return None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _install(staging: Path, folder: Path, model_sha256: str, ort_version: str) -> None:
    """Rename `staging` into place as `folder`: at once when there is none; when another process put a right
    one there meanwhile, that one stays; a wrong one is renamed aside first and then removed (a reader that
    opened its files keeps them: they are unlinked, not overwritten)."""
    for _ in range(3):
        try:
            os.rename(staging, folder)      # fails while `folder` exists and is not empty
            return
        except OSError:
            if _content_trusted(folder, model_sha256, ort_version):
                return                       # another process won the race with a right copy: it stays
        aside = folder.with_name(f"{folder.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        try:
            os.rename(folder, aside)
        except FileNotFoundError:
            continue
        shutil.rmtree(aside, ignore_errors=True)
