"""The `git` executable, the one way this package reads a repository.

Every call is an argument list (never a shell string), with the settings that make git's output the same
on every machine: no pager, no colour, no external diff or textconv driver, paths unquoted past ASCII.
Objects are read through ONE long-lived `git cat-file --batch-command` process per repository (`CatFile`):
a blob read is a line written and an answer read on a pipe, not a process started (~1-2 ms each). Questions
cat-file cannot answer (a diff, a branch name, a tree listing) are one `run_git` call each.

A repository that cannot be read just then (no such folder, not a git repository, git refusing it) raises
`Unreadable`: a distinct outcome the callers turn into "not read yet", never into a refusal of the writer.
"""
from __future__ import annotations

import os
import select
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from core.errors import CrewletError

# the same output everywhere: a user's config may set a pager, colours, an external diff or a textconv
_CONFIG = ["-c", "core.quotepath=off", "-c", "color.ui=never", "-c", "color.diff=never", "-c", "diff.noprefix=false",
           "-c", "diff.mnemonicPrefix=false", "-c", "core.pager=cat"]
_TIMEOUT_S = 120.0
READ_TIMEOUT_S = 30.0  # an object's answer from cat-file; past it the repository is "not read yet"
# requests written before their answers are read: well under a pipe's 64 KiB, so the write never waits
_PIPELINE_BYTES = 32 * 1024


class Unreadable(CrewletError):
    """The repository cannot be read just then: the caller's "not read yet", never the writer's fault."""

    code = "not_read_yet"


MIN_GIT = (2, 36)  # `cat-file --batch-command` came in git 2.36
_git_version: tuple[int, ...] | None = None


def git_version() -> tuple[int, ...]:
    """The git executable's version, asked once a process; (0,) when there is no git to run."""
    global _git_version
    if _git_version is None:
        try:
            out = subprocess.run(["git", "--version"], capture_output=True, timeout=30, check=True).stdout
            words = out.decode("ascii", "replace").split()
            numbers = words[2].split(".") if len(words) > 2 else []
            _git_version = tuple(int(n) for n in numbers[:3] if n.isdigit()) or (0,)
        except (OSError, subprocess.SubprocessError):
            _git_version = (0,)
    return _git_version


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # never a prompt, and (git 2.45+) never a fetch from a partial clone's remote to answer a read: a
    # missing object is "not there", not a network wait under the reader's lock
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0",
                "GIT_NO_LAZY_FETCH": "1"})
    return env


def run_git(repo_path: Path, args: list[str], *, name: str, ok_codes: tuple[int, ...] = (0,),
            stdin: bytes | None = None) -> bytes:
    """One git command in the repository; its stdout. A failure is `Unreadable` with git's first line."""
    if not repo_path.is_dir():
        raise Unreadable(f"repository '{name}': no folder {repo_path}", repository=name)
    try:
        done = subprocess.run(["git", *_CONFIG, "-C", str(repo_path), *args], input=stdin,
                              capture_output=True, env=_env(), timeout=_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unreadable(f"repository '{name}': git could not run ({exc})", repository=name) from exc
    if done.returncode not in ok_codes:
        first = (done.stderr.decode("utf-8", "replace").strip().splitlines() or ["no message"])[0]
        raise Unreadable(f"repository '{name}': git {args[0]} failed: {first}", repository=name)
    return done.stdout


@dataclass(frozen=True)
class ObjectInfo:
    oid: str
    type: str
    size: int


class NoAnswer(Exception):
    """cat-file gave no answer within the deadline."""


class _Answers:
    """cat-file's stdout read from its descriptor with a deadline an answer: a git that stops answering
    (a stuck disk, a stopped process) ends the wait instead of holding the reader's lock for ever."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._poll = select.poll()  # registered once: a wait is one poll call, a read one read call
        self._poll.register(fd, select.POLLIN)
        self._buf = bytearray()
        self._pos = 0

    def _fill(self, want: int, deadline: float) -> None:
        if self._pos:
            del self._buf[:self._pos]
            self._pos = 0
        left_ms = (deadline - time.monotonic()) * 1000
        if left_ms <= 0 or not self._poll.poll(left_ms):
            raise NoAnswer()
        chunk = os.read(self._fd, max(1 << 16, want))
        if not chunk:
            raise BrokenPipeError("cat-file ended mid-answer")
        self._buf += chunk

    def readline(self, deadline: float) -> bytes:
        while True:
            end = self._buf.find(b"\n", self._pos)
            if end >= 0:
                line = bytes(self._buf[self._pos:end + 1])
                self._pos = end + 1
                return line
            self._fill(0, deadline)

    def read(self, n: int, deadline: float) -> bytes:
        while len(self._buf) - self._pos < n:
            self._fill(n - (len(self._buf) - self._pos), deadline)
        out = bytes(self._buf[self._pos:self._pos + n])
        self._pos += n
        return out


class CatFile:
    """One `git cat-file --batch-command` process for one repository, shared by threads under a lock.

    It is started on first use and again after it died (killed, or its pipe broken): one request retried
    once on a new process, then `Unreadable`. One that gives no answer within `timeout_s` an object is
    killed and the request is `Unreadable` (not retried: the next request starts a new process). `close()`
    ends it; the object can be used again after."""

    def __init__(self, repo_path: Path, name: str, timeout_s: float = READ_TIMEOUT_S) -> None:
        self._path = repo_path
        self._name = name
        self.timeout_s = timeout_s
        self._answers: _Answers | None = None
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self.starts = 0    # how many processes this reader started (a restart shows here)
        self.requests = 0     # how many objects it was asked for (what a pass cost shows here)
        self.round_trips = 0  # how many times it waited on git for answers

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def _start(self) -> subprocess.Popen[bytes]:
        if not self._path.is_dir():
            raise Unreadable(f"repository '{self._name}': no folder {self._path}", repository=self._name)
        if git_version() < MIN_GIT:
            found = ".".join(map(str, git_version())) if git_version() != (0,) else "none"
            raise Unreadable(f"repository '{self._name}': reading it needs git "
                             f"{'.'.join(map(str, MIN_GIT))} or later on PATH (found: {found})",
                             repository=self._name)
        # a folder git does not take as a repository would make cat-file exit at once: ask first, in words
        run_git(self._path, ["rev-parse", "--git-dir"], name=self._name)
        try:
            proc = subprocess.Popen(["git", *_CONFIG, "-C", str(self._path), "cat-file", "--batch-command"],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    env=_env())
        except OSError as exc:
            raise Unreadable(f"repository '{self._name}': git could not run ({exc})",
                             repository=self._name) from exc
        self.starts += 1
        assert proc.stdout is not None
        self._answers = _Answers(proc.stdout.fileno())
        return proc

    def _ask(self, commands: list[bytes], want_body: bool) -> list[tuple[ObjectInfo | None, bytes | None]]:
        """Requests written at once, then their answers read in order: one round trip for many objects.
        The commands fit in the pipe's buffer (`_PIPELINE_BYTES`), so writing them never waits on git, and
        git never waits on us while we read."""
        if self._proc is None or self._proc.poll() is not None:
            self._proc = self._start()
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b"".join(commands))
        proc.stdin.flush()
        answers_in = self._answers
        assert answers_in is not None
        answers: list[tuple[ObjectInfo | None, bytes | None]] = []
        for _ in commands:
            deadline = time.monotonic() + self.timeout_s
            header = answers_in.readline(deadline)
            parts = header.rstrip(b"\n").split(b" ")
            if len(parts) != 3 or parts[-1] in (b"missing", b"ambiguous"):
                answers.append((None, None))
                continue
            info = ObjectInfo(parts[0].decode("ascii"), parts[1].decode("ascii"), int(parts[2]))
            if not want_body:
                answers.append((info, None))
                continue
            body = answers_in.read(info.size + 1, deadline)
            answers.append((info, body[:-1]))
        return answers

    def _request(self, verb: str, specs: list[str]) -> list[tuple[ObjectInfo | None, bytes | None]]:
        out: list[tuple[ObjectInfo | None, bytes | None]] = [(None, None)] * len(specs)
        # a name with a newline cannot be asked on a line-based protocol: it names nothing
        asked = [(i, f"{verb} {spec}\n".encode("utf-8", "surrogateescape"))
                 for i, spec in enumerate(specs) if "\n" not in spec]
        chunks: list[list[tuple[int, bytes]]] = [[]]
        size = 0
        for item in asked:
            if size + len(item[1]) > _PIPELINE_BYTES and chunks[-1]:
                chunks.append([])
                size = 0
            chunks[-1].append(item)
            size += len(item[1])
        with self._lock:
            self.requests += len(asked)
            for chunk in chunks:
                if not chunk:
                    continue
                for attempt in (1, 2):
                    try:
                        answers = self._ask([c for _, c in chunk], want_body=verb == "contents")
                        break
                    except NoAnswer:
                        self._kill()
                        raise Unreadable(f"repository '{self._name}': git cat-file gave no answer in "
                                         f"{self.timeout_s:g} s", repository=self._name) from None
                    except (BrokenPipeError, OSError, ValueError) as exc:
                        self._kill()
                        if attempt == 2:
                            raise Unreadable(f"repository '{self._name}': cat-file failed twice ({exc})",
                                             repository=self._name) from exc
                for (i, _), answer in zip(chunk, answers):
                    out[i] = answer
            self.round_trips += sum(1 for c in chunks if c)
        return out

    def info(self, spec: str) -> ObjectInfo | None:
        """What `spec` (`<sha>`, `<rev>:<path>`, `<sha>^{commit}`) names, or None when it names nothing."""
        return self._request("info", [spec])[0][0]

    def contents(self, spec: str) -> tuple[ObjectInfo, bytes] | None:
        info, body = self._request("contents", [spec])[0]
        return None if info is None or body is None else (info, body)

    def info_many(self, specs: list[str]) -> list[ObjectInfo | None]:
        """`info` of many objects in a few round trips."""
        return [info for info, _ in self._request("info", specs)]

    def contents_many(self, specs: list[str]) -> list[tuple[ObjectInfo, bytes] | None]:
        """`contents` of many objects in a few round trips."""
        return [None if info is None or body is None else (info, body)
                for info, body in self._request("contents", specs)]

    def _kill(self) -> None:
        proc, self._proc, self._answers = self._proc, None, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()  # first: a stopped or stuck process ends on SIGKILL, and its pipes close with it
        for stream in (proc.stdin, proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        proc.wait()

    def close(self) -> None:
        """End the process: its stdin closed (cat-file exits at end of input), waited for, killed if it
        does not end."""
        with self._lock:
            proc, self._proc, self._answers = self._proc, None, None
            if proc is None:
                return
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
            finally:
                if proc.stdout is not None:
                    proc.stdout.close()
