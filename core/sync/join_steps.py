"""The steps every `crewlet sync join` takes, whatever it joins (a shared directory: join.py; NATS servers:
nats_join.py): who runs on the home, its logs held off, a new node's directory made whole or not at all, and
the node opened and caught up at the end. Both joins import these; neither imports the other's steps."""
from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from ..errors import CrewletError
from ..leases import running
from ..store.holders import other_holder
from ..log import FileLog
from ..paths import Home
from ..repair import home_logs


def running_here(home: Home) -> str | None:
    """Who runs on this home right now: the app or a `crewlet worker`, from their unexpired leases whose holder still
    runs (a killed process holds nothing), else any other process that has its database open (`crewlet mcp`, a
    script: core/store/holders.py)."""
    return running(home.node_lease_dir) or other_holder(home.db_file)


@contextmanager
def logs_held(home: Home) -> Iterator[None]:
    """Hold the writers' lock of each of the home's logs: no write of this home lands meanwhile."""
    with ExitStack() as stack:
        for spec in home_logs(home):
            if spec.path.exists():
                flog = stack.enter_context(FileLog(spec.path))
                stack.enter_context(flog.locked())
        yield


@contextmanager
def whole_or_nothing(root: Path) -> Iterator[None]:
    """A new node's directory, made whole or not at all: on any failure inside, no half-made node is left
    behind — the directory is as it was (absent, or empty)."""
    created = not root.exists()
    root.mkdir(parents=True, exist_ok=True)
    try:
        yield
    except BaseException:
        if created:
            shutil.rmtree(root, ignore_errors=True)
        else:
            for child in list(root.iterdir()):
                shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink(missing_ok=True)
        raise


def open_and_apply(home: Home, progress: Callable[[int], None] | None) -> int:
    from ..node import Node  # the node imports this package's locks and peers

    applied: list[int] = []

    def heard(n: int) -> None:
        applied.append(n)
        if progress is not None:
            progress(n)

    with Node.open(home, progress=heard) as node:
        if node.damage is not None:
            raise node.damage
        if node.apply_error is not None:
            raise CrewletError(f"joined, but the log could not be applied yet: {node.apply_error}", code="not_applied")
        node.publish_position()
    return sum(applied)
