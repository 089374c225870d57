"""Engram dev stack: real Kafka, PostgreSQL + pgvector and the five services, without Docker.

``kafka``, ``postgres`` and ``services`` each launch one kind of part; ``stack`` composes them
(``up_infra``, ``down``, ``infra_status``, ``start_services``, ``stop_services``) and ``cli``
exposes them as ``engram dev``. This module holds what they share: the fixed addresses, the
state folder layout and its lock; ``processes`` holds pid files, detached processes, their
logs and deadline-bound waits.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

HOST = "127.0.0.1"
KAFKA_PORT = 29092
KAFKA_CONTROLLER_PORT = 29093
POSTGRES_PORT = 25432
POSTGRES_USER = "postgres"
POSTGRES_DB = "engram"
KAFKA_BOOTSTRAP_SERVERS = f"{HOST}:{KAFKA_PORT}"
DATABASE_URL = f"postgresql://{POSTGRES_USER}@{HOST}:{POSTGRES_PORT}/{POSTGRES_DB}"

Progress = Callable[[str], None]


def default_progress(message: str) -> None:
    """Progress goes to stderr so that stdout stays clean for settings a script may parse."""
    print(message, file=sys.stderr, flush=True)


class DevstackError(RuntimeError):
    """A part could not be started or stopped; the message is written for a person to act on."""


@dataclass(frozen=True)
class StatePaths:
    """Layout of the state folder (``ENGRAM_STATE_DIR``, default ``<repo>/.engram``)."""

    root: Path

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def kafka(self) -> Path:
        return self.root / "kafka"

    @property
    def pg(self) -> Path:
        return self.root / "pg"

    @property
    def stack_env(self) -> Path:
        return self.root / "stack.env"

    def log(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    def pidfile(self, name: str) -> Path:
        return self.run / f"{name}.pid"


def resolve_state(state_dir: str | Path | None = None) -> StatePaths:
    """The state folder to use, created if missing: argument, then env, then ``<repo>/.engram``."""
    raw = state_dir or os.environ.get("ENGRAM_STATE_DIR") or REPO_ROOT / ".engram"
    paths = StatePaths(Path(raw).expanduser().resolve())
    paths.logs.mkdir(parents=True, exist_ok=True)
    paths.run.mkdir(parents=True, exist_ok=True)
    return paths


@dataclass(frozen=True)
class PartStatus:
    """What ``status`` reports for one part (Kafka, Postgres or a service)."""

    name: str
    running: bool
    healthy: bool
    pid: int | None
    address: str


@dataclass(frozen=True)
class StartResult:
    """Outcome of bringing one part up: ``reused`` means it was already running and healthy."""

    name: str
    pid: int | None
    reused: bool
    seconds: float

    def describe(self) -> str:
        pid = f"pid {self.pid}" if self.pid is not None else "pid unknown"
        if self.reused:
            return f"{self.name}: already running ({pid}), reused"
        return f"{self.name}: started ({pid}) in {self.seconds:.1f} s"


# --- mutual exclusion ------------------------------------------------------------------------

_process_guard = threading.RLock()
_lock_depth = 0


@contextlib.contextmanager
def state_lock(paths: StatePaths, progress: Progress, timeout: float = 600.0) -> Iterator[None]:
    """Serialise ``up``/``down`` on one state folder across processes (several developers and
    test sessions share the stack) and threads. Re-entrant within a thread."""
    global _lock_depth
    if not _process_guard.acquire(timeout=timeout):
        raise DevstackError(f"another thread kept the dev stack lock for over {timeout:.0f} s")
    try:
        if _lock_depth > 0:
            _lock_depth += 1
            try:
                yield
            finally:
                _lock_depth -= 1
            return
        with (paths.run / "stack.lock").open("a+") as handle:
            _flock(handle.fileno(), paths, progress, timeout)
            _lock_depth = 1
            try:
                yield
            finally:
                _lock_depth = 0
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    finally:
        _process_guard.release()


def _flock(fd: int, paths: StatePaths, progress: Progress, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    told = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise DevstackError(
                    f"another `engram dev` command held {paths.run / 'stack.lock'} for over "
                    f"{timeout:.0f} s"
                ) from None
            if not told:
                progress("another `engram dev` command is using this state folder; waiting …")
                told = True
            time.sleep(0.2)
