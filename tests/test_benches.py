"""Every bench runs: `python bench/X.py --help` answers its usage (so a refactor that breaks a bench's
imports fails here, not in the next person's measurement), writes nothing, and no bench module takes the
name of a standard-library module (`python bench/X.py` puts bench/ first on sys.path, so a bench called
`keyword.py` is what `import keyword` — dataclasses, typing's internals — would find)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

BENCH = ROOT / "bench"
BENCHES = sorted(p for p in BENCH.glob("*.py") if not p.name.startswith("_"))


def test_no_bench_module_shadows_the_standard_library() -> None:
    shadowing = [p.name for p in BENCH.glob("*.py") if p.stem in sys.stdlib_module_names]
    assert not shadowing, f"rename {shadowing}: `python bench/X.py` would import them in place of the stdlib's"


def test_every_bench_answers_help_and_writes_nothing(tmp_path: Path) -> None:
    assert len(BENCHES) > 10
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "COLUMNS": "120"}
    # all at once, then each waited for (bounded): a bench's --help imports the engine, about a second each
    procs = {p.name: subprocess.Popen([sys.executable, str(p), "--help"], cwd=tmp_path, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for p in BENCHES}
    failed = []
    for name, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            failed.append(f"{name}: --help did not answer within 180 s")
            continue
        if proc.returncode != 0 or "usage:" not in out:
            failed.append(f"{name}: exit {proc.returncode}: {(err or out).strip().splitlines()[-1:]}")
    assert not failed, "\n".join(failed)
    assert not any(tmp_path.iterdir()), f"a bench's --help wrote {sorted(p.name for p in tmp_path.iterdir())}"

