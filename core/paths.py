"""Where a node keeps its files. One module owns every path so no caller guesses."""
from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import platformdirs

from .errors import NotFound

HOME_ENV = "CREWLET_HOME"
ACTOR_ENV = "CREWLET_AS"


@dataclass(frozen=True)
class Home:
    root: Path

    @property
    def config_file(self) -> Path:
        return self.root / "company.toml"

    @property
    def db_file(self) -> Path:
        return self.root / "crewlet.db"

    @property
    def log_dir(self) -> Path:
        """What every node sharing the log agrees on: the logs, and the leases of fleet duties."""
        return self.root / "log"

    @property
    def log_file(self) -> Path:
        return self.log_dir / "pages.log"

    @property
    def vectors_log_file(self) -> Path:
        """Vectors on a log of their own: embedded once by the fleet's embedding duty, applied by every node."""
        return self.log_dir / "vectors.log"

    @property
    def diagnostics_file(self) -> Path:
        """This node's diagnostic events (one JSON object a line), beside the database, never on a log."""
        return self.root / "diagnostics.jsonl"

    @property
    def fleet_lease_dir(self) -> Path:
        """Leases of duties one node of the fleet runs for all (the reaper, the embedding duty)."""
        return self.log_dir / "leases"

    @property
    def node_lease_dir(self) -> Path:
        """Leases of this node's own duties (its keyword index): the app and a CLI worker share them."""
        return self.root / "leases"

    @property
    def index_dir(self) -> Path:
        return self.root / "index"

    @property
    def rescue_dir(self) -> Path:
        """Text a refused save would otherwise lose is kept here (lost edits are the worst wiki bug)."""
        return self.root / "rescued"

    def exists(self) -> bool:
        return self.config_file.is_file()


def resolve_home(explicit: str | os.PathLike | None = None) -> Home:
    """`--home`, else CREWLET_HOME, else the platform's user data directory."""
    if explicit:
        return Home(Path(explicit).expanduser().resolve())
    env = os.environ.get(HOME_ENV)
    if env:
        return Home(Path(env).expanduser().resolve())
    return Home(Path(platformdirs.user_data_dir("crewlet", appauthor=False)))


def examples_dir() -> Path:
    """The bundled example knowledge base (a doc directory in the spec's layout), shipped inside the
    package as data (`core/examples/company`), so an installed wheel has it as much as a checkout does.
    (The checkout's top-level `examples/company` is a link to the same directory.)"""
    found = resources.files("core") / "examples" / "company"
    # the importer walks a real directory: a wheel installs one; a zipped install would not be one
    path = Path(str(found))
    if not path.is_dir():
        raise NotFound(f"the bundled example is not at {path} — reinstall crewlet from a wheel or a checkout "
                       "(`pip install .`), which both carry core/examples/company", code="no_example")
    return path
