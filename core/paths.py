"""Where a node keeps its files. One module owns every path so no caller guesses."""
from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .errors import Invalid, NotFound

# importlib.resources and platformdirs are imported where they are used: a command given --home (the
# app's launch, every benchmarked command) uses neither

HOME_ENV = "CREWLET_HOME"
ACTOR_ENV = "CREWLET_AS"
NODE_FILE = "node.toml"
# node.toml as last read, by path, with the stat it was read at
_NODE_CACHE: dict[Path, tuple[tuple[int, int, int], dict]] = {}


def read_node_file(file: Path, *, cached: bool = True) -> dict:
    """node.toml's table, the one reader of it: {} when there is none; raises OSError, UnicodeDecodeError
    or tomllib.TOMLDecodeError for a file that cannot be read as TOML (`core.config.load_node` names the
    problem and checks each key). `cached`: parsed again only when the file's stat changed."""
    try:
        st = file.stat()
    except FileNotFoundError:
        return {}
    stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
    held = _NODE_CACHE.get(file) if cached else None
    if held is not None and held[0] == stamp:
        return held[1]
    data = tomllib.loads(file.read_text(encoding="utf-8"))
    _NODE_CACHE[file] = (stamp, data)
    return data


@dataclass(frozen=True)
class Home:
    """A node's home. A home that joined a shared directory (`crewlet sync join DIR`, recorded in its
    node.toml) finds what every node agrees on there — the logs, the fleet's leases, company.toml — and
    keeps its own database, keyword index, rescued texts, node id and operator beside node.toml."""

    root: Path

    @property
    def node_file(self) -> Path:
        """This node's own settings: its id, its operator, the shared directory it joined."""
        return self.root / NODE_FILE

    @property
    def node_settings(self) -> dict:
        """node.toml as written (a file that does not parse reads as empty here; `core.config.load_node`
        names the problem). Read again whenever the file changed: a home that joined a shared directory
        in this process finds its paths there at once."""
        try:
            return read_node_file(self.node_file)
        except (OSError, ValueError):
            return {}

    @property
    def shared(self) -> Path | None:
        """The shared directory this node joined, or None for a home whose log is its own."""
        value = self.node_settings.get("shared")
        if not isinstance(value, str) or not value:
            return None
        path = Path(value).expanduser()
        return path if path.is_absolute() else (self.root / path)

    @property
    def config_file(self) -> Path:
        """company.toml: the company's configuration, shared by every node of a shared directory."""
        return (self.shared or self.root) / "company.toml"

    @property
    def join_note(self) -> Path:
        """A `sync join` under way, written down before its first step (core/log/joining.py): the next open
        finishes it (or undoes a new node's) before it reads anything else of the home."""
        return self.root / (NODE_FILE + ".joining")

    @property
    def db_file(self) -> Path:
        return self.root / "crewlet.db"

    @property
    def log_dir(self) -> Path:
        """What every node sharing the log agrees on: the logs, and the leases of fleet duties (the
        shared directory itself, once the home joined one)."""
        return self.shared or self.root / "log"

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
    def peers_dir(self) -> Path:
        """Where each node of a shared directory says how far it applied the logs, and when it last looked."""
        return self.log_dir / "nodes"

    @property
    def node_lease_dir(self) -> Path:
        """Leases of this node's own duties (its keyword index): the app and a CLI worker share them."""
        return self.root / "leases"

    @property
    def index_dir(self) -> Path:
        return self.root / "index"

    @property
    def floors_file(self) -> Path:
        """Relevance floors measured on this company's corpus, by embedding space (core/search/floor.py):
        beside the logs, so every node sharing them reads the same."""
        return self.log_dir / "relevance-floors.json"

    @property
    def query_cache_file(self) -> Path:
        """The last query vectors this node embedded (a cache: core/search/query_cache.py)."""
        return self.root / "query-vectors.db"

    @property
    def codes_dir(self) -> Path:
        """Each embedding space's code table as one file (a cache a new process reads in one pass:
        core/search/code_file.py)."""
        return self.root / "codes"

    @property
    def verified_file(self) -> Path:
        """What this node last found of each log's soundness: a read need not scan an unchanged log again."""
        return self.root / "log-verified.json"

    @property
    def rescue_dir(self) -> Path:
        """Text a refused save would otherwise lose is kept here (lost edits are the worst wiki bug)."""
        return self.root / "rescued"

    def not_a_directory(self) -> str | None:
        """Why this path cannot be a home at all (None when it can): it, or the nearest part of it that
        exists, is a file. Said before anything offers to create a home there — `init` would fail with
        "File exists", and "no crewlet home here" would send the reader to that `init`."""
        path = self.root
        while not path.exists() and path.parent != path:
            path = path.parent
        if not path.exists() or path.is_dir():
            return None
        fix = "give --home (or CREWLET_HOME) a directory: a home, or a new one to make"
        if path == self.root:
            return f"{path} is a file, not a crewlet home — {fix}"
        return f"{path} is a file, so {self.root} cannot be a crewlet home — {fix}"

    def require_directory(self) -> None:
        """Refuse, with the reason and the fix, a home path that is (or lies beneath) a file."""
        problem = self.not_a_directory()
        if problem:
            raise Invalid(problem, code="not_a_home")

    def exists(self) -> bool:
        """An initialised home — or a node of a shared directory, even one that cannot be reached
        right now, or a home whose company.toml is gone, or one a `sync join` stopped halfway in (opening
        each then says so or finishes it, rather than offering to create a home over it)."""
        return self.config_file.is_file() or self.shared is not None or self.config_problem() is not None

    def config_problem(self) -> str | None:
        """Why a home that is here has no company.toml to run under (None when it has one, or when nothing
        of a home is here): the file is something else, or it is missing beside the database or the logs
        it made. Said with the fix, because `crewlet init` here would otherwise adopt that database under
        a configuration that did not make it (core.node.init_home refuses to)."""
        config = self.config_file
        if self.join_note.exists():   # opening the home finishes (or undoes) it first; `init` must not build on it
            return (f"a `crewlet sync join` stopped halfway in {self.root} ({self.join_note.name}) — run "
                    "`crewlet sync join` again (or any command on this home) to finish or undo it")
        if self.shared is not None or config.is_file():
            return None
        if config.exists() or config.is_symlink():
            what = "a dangling link" if not config.exists() else "not a file"
            return (f"{config} is {what} — put the company's company.toml there (from a backup, or from "
                    "another node of the company)")
        # what crewlet itself makes (a directory that merely holds a log/ of its own was never a home)
        left = [name for name, path in (("crewlet.db", self.db_file), ("log/", self.root / "log" / "pages.log"))
                if path.exists()]
        if not left:
            return None
        both = " and ".join(left)
        return (f"company.toml is missing beside {both} in {self.root} — restore it (from a backup, or from another "
                f"node of the company), or move {both} aside to start a new home there")


def resolve_home(explicit: str | os.PathLike | None = None) -> Home:
    """`--home`, else CREWLET_HOME, else the platform's user data directory."""
    if explicit:
        return Home(Path(explicit).expanduser().resolve())
    env = os.environ.get(HOME_ENV)
    if env:
        return Home(Path(env).expanduser().resolve())
    import platformdirs

    return Home(Path(platformdirs.user_data_dir("crewlet", appauthor=False)))


def examples_dir() -> Path:
    """The bundled example knowledge base (a doc directory in the spec's layout), shipped inside the
    package as data (`core/examples/company`), so an installed wheel has it as much as a checkout does.
    (The checkout's top-level `examples/company` is a link to the same directory.)"""
    from importlib import resources

    found = resources.files("core") / "examples" / "company"
    # the importer walks a real directory: a wheel installs one; a zipped install would not be one
    path = Path(str(found))
    if not path.is_dir():
        raise NotFound(f"the bundled example is not at {path} — reinstall crewlet from a wheel or a checkout "
                       "(`pip install .`), which both carry core/examples/company", code="no_example")
    return path
