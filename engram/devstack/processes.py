"""The dev stack's processes: pid files, listeners, detached children writing to their
logs (``engram.devstack.logs``), and deadline-bound waits for them to answer."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import psutil

from engram.devstack import HOST, DevstackError, Progress
from engram.devstack.logs import append_banner, tail_report
from engram.devstack.logs import tail as tail  # engram dev logs reads it here

T = TypeVar("T")


# --- processes -------------------------------------------------------------------------------


def process_alive(pid: int) -> bool:
    """True for a live process; a zombie (exited, not yet reaped) counts as dead."""
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def write_pidfile(path: Path, pid: int) -> None:
    # The start time guards against pid reuse after a reboot or a long time stopped.
    try:
        started = psutil.Process(pid).create_time()
    except psutil.Error:
        started = 0.0
    path.write_text(f"{pid} {started:.2f}\n")


def read_live_pid(path: Path) -> int | None:
    """The pid recorded in ``path`` if that very process is still alive, else None."""
    try:
        fields = path.read_text().split()
        pid = int(fields[0])
        recorded = float(fields[1]) if len(fields) > 1 else 0.0
    except (OSError, ValueError, IndexError):
        return None
    if not process_alive(pid):
        return None
    with contextlib.suppress(psutil.Error):
        if recorded and abs(psutil.Process(pid).create_time() - recorded) > 1.0:
            return None
    return pid


def listener_pid(port: int) -> int | None:
    """Pid of the process listening on TCP ``port`` (any address), or None."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except psutil.Error:
        return None
    for conn in connections:
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
            return int(conn.pid) if conn.pid else None
    return None


def cmdline(pid: int) -> str:
    try:
        return " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return ""


def adopt_listener(port: int, marker: str) -> int | None:
    """Pid of the listener on ``port`` when its command line shows it is our kind of process.

    Lets ``status``/``down`` handle a part whose pid file was lost, without ever touching an
    unrelated program that happens to use the port.
    """
    pid = listener_pid(port)
    if pid is not None and marker in cmdline(pid):
        return pid
    return None


def describe_listener(port: int) -> str:
    pid = listener_pid(port)
    if pid is None:
        return f"port {port} is in use"
    return f"port {port} is in use by pid {pid} ({cmdline(pid)[:160] or 'unknown command'})"


async def port_open(port: int, host: str = HOST, timeout: float = 1.0) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


def spawn_detached(
    argv: Sequence[str],
    *,
    log_path: Path,
    what: str,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    user: str | None = None,
) -> subprocess.Popen[bytes]:
    """Start a long-lived process that outlives us: own session, output appended to a log file."""
    append_banner(log_path, f"starting {what}")
    with log_path.open("ab") as log:
        return subprocess.Popen(
            list(argv),
            # A new session keeps Ctrl-C in the launching terminal and SIGHUP at logout away
            # from the part, and makes it the leader of a process group we can signal whole.
            start_new_session=True,
            close_fds=True,
            **_child(cwd, env, log, user),
        )


def _child(
    cwd: Path | None, env: Mapping[str, str] | None, log: Any, user: str | None
) -> dict[str, Any]:
    """What every child gets: its folder, environment, no stdin, output to its log, and,
    when given, another user (without root's groups next to the new uid)."""
    kwargs: dict[str, Any] = {
        "cwd": cwd,
        "env": dict(env) if env is not None else None,
        "stdin": subprocess.DEVNULL,
        "stdout": log,
        "stderr": subprocess.STDOUT,
    }
    if user is not None:
        import pwd

        entry = pwd.getpwnam(user)
        kwargs |= {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
    return kwargs


def run_logged(
    argv: Sequence[str],
    *,
    log_path: Path,
    what: str,
    timeout: float,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    user: str | None = None,
) -> None:
    """Run a short setup command to completion, output appended to ``log_path``."""
    append_banner(log_path, what)
    with log_path.open("ab") as log:
        try:
            completed = subprocess.run(
                list(argv), timeout=timeout, check=False, **_child(cwd, env, log, user)
            )
        except subprocess.TimeoutExpired:
            raise DevstackError(
                f"{what} did not finish within {timeout:.0f} s.\n{tail_report(log_path)}"
            ) from None
    if completed.returncode != 0:
        raise DevstackError(
            f"{what} failed with exit code {completed.returncode}.\n{tail_report(log_path)}"
        )


def terminate(
    pids: Sequence[int],
    *,
    sig: signal.Signals = signal.SIGTERM,
    grace: float,
    group: bool = False,
) -> list[int]:
    """Send ``sig``, wait up to ``grace`` seconds, then SIGKILL. Returns the pids killed hard."""
    procs = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            procs.append(psutil.Process(pid))
    for proc in procs:
        _signal(proc.pid, sig, group)
    _, alive = psutil.wait_procs(procs, timeout=grace)
    for proc in alive:
        _signal(proc.pid, signal.SIGKILL, group)
    psutil.wait_procs(alive, timeout=10)
    return [proc.pid for proc in alive]


def _signal(pid: int, sig: signal.Signals, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        # Only signal the group when the pid leads it (we started it with its own session);
        # an adopted process may share a group with unrelated programs.
        if group and os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)


# --- waiting ---------------------------------------------------------------------------------


async def wait_until(
    check: Callable[[], Awaitable[bool]],
    *,
    what: str,
    timeout: float,
    log_path: Path,
    progress: Progress,
    proc: subprocess.Popen[bytes] | None = None,
    pid: int | None = None,
    interval: float = 0.5,
) -> float:
    """Poll ``check`` until it passes; fail fast if the process (our child ``proc``, or any
    ``pid``) dies, fail at the deadline.

    Returns the seconds waited. Every failure carries the tail of the part's log.
    """
    started = time.monotonic()
    deadline = started + timeout
    progress(f"waiting for {what} …")
    while True:
        if proc is not None and proc.poll() is not None:
            raise DevstackError(
                f"{what} exited with code {proc.returncode} while starting.\n"
                f"{tail_report(log_path)}"
            )
        if pid is not None and not process_alive(pid):
            raise DevstackError(
                f"{what} (pid {pid}) exited while starting.\n{tail_report(log_path)}"
            )
        remaining = deadline - time.monotonic()
        try:
            if await asyncio.wait_for(check(), timeout=max(0.5, min(10.0, remaining))):
                return time.monotonic() - started
        except TimeoutError:
            pass
        if time.monotonic() >= deadline:
            raise DevstackError(
                f"{what} was not ready after {timeout:.0f} s.\n{tail_report(log_path)}"
            )
        await asyncio.sleep(interval)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, even when called inside an event loop.

    Test fixtures and ``async def`` callers already have a running loop, where
    ``asyncio.run`` refuses to start; a private thread gets a loop of its own instead.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-devstack") as pool:
        return pool.submit(asyncio.run, coro).result()
