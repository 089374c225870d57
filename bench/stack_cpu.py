"""CPU time of each part of the dev stack, so a benchmark can say where its CPU went.

The parts are found through the state folder's pid files (``engram up`` writes them):
the five services, the broker, and Postgres with every backend. A backend that ends
between two samples is still counted: the postmaster has reaped it, and its time is in
the postmaster's children's times. The benchmark's own process counts as ``benchmark``.
Postgres's share is also split by the service each backend serves (``pg_<service>``, from
the sessions' ``application_name``), as part of ``postgres``, not beside it.
``cpu_times`` reads the whole machine's busy and stolen time, and ``python_speed`` how fast
this machine runs Python today, so that figures of two days can be compared.
"""

from __future__ import annotations

import contextlib
import time

import asyncpg
import psutil

from engram.devstack import resolve_state
from engram.devstack.processes import read_live_pid

PARTS = ("command", "projector", "indexer", "extractor", "recall", "kafka", "postgres")


class StackCpu:
    def __init__(self) -> None:
        paths = resolve_state()
        self.pids = {p: pid for p in PARTS if (pid := read_live_pid(paths.pidfile(p)))}
        self.missing = [p for p in PARTS if p not in self.pids]

    def sample(self, backends: dict[int, str] | None = None) -> dict[str, float]:
        """Seconds of CPU each part has used so far; with ``backends`` (see
        ``services_backends``), also each service's Postgres backends'."""
        seconds = {part: _seconds(pid, part == "postgres") for part, pid in self.pids.items()}
        seconds["benchmark"] = _seconds(None, False)
        for pid, service in (backends or {}).items():
            if (used := _seconds(pid, False)) > 0:  # 0: the backend has ended
                seconds[f"pg_{service}@{pid}"] = used
        return seconds

    @staticmethod
    def per_unit(before: dict[str, float], after: dict[str, float], units: int) -> dict[str, float]:
        """Milliseconds of CPU per request (or command) of each part, and their total (the
        ``pg_`` shares are in ``postgres`` already). A service's backend counts only when it
        is in both samples (``pg_<service>@<pid>``)."""
        used: dict[str, float] = {}
        for key in after.keys() & before.keys():
            part = key.split("@")[0]
            used[part] = used.get(part, 0.0) + after[key] - before[key]
        each = {p: round(v * 1000 / units, 3) for p, v in sorted(used.items())}
        total = sum(v for p, v in each.items() if not p.startswith("pg_"))
        return {**each, "total": round(total, 3)}


async def services_backends(pool: asyncpg.Pool) -> dict[int, str]:
    """Each Postgres backend a service holds, by pid: the service's name. A backend that
    opens or ends during a round is not in both samples and counts only in ``postgres``."""
    rows = await pool.fetch(
        "SELECT pid, application_name FROM pg_stat_activity WHERE application_name LIKE 'engram-%'"
    )
    return {r["pid"]: r["application_name"].removeprefix("engram-") for r in rows}


def _seconds(pid: int | None, with_children: bool) -> float:
    try:
        process = psutil.Process(pid)
        times = process.cpu_times()
        total = times.user + times.system
        if with_children:
            total += times.children_user + times.children_system
            for child in process.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    child_times = child.cpu_times()
                    total += child_times.user + child_times.system
        return total
    except psutil.Error:
        return 0.0


def cpu_times() -> tuple[int, int, int] | None:
    """The machine's (busy, steal, total) CPU time in jiffies from /proc/stat; None where
    there is none. Steal is time the hypervisor gave to other guests while this one wanted
    the CPU: on a shared host it slows every figure, and no change here can help it."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(v) for v in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return user + nice + system + irq + softirq, steal, sum(fields)


def python_speed(loops: int = 3_000_000) -> float:
    """Seconds this machine takes, at best of three, for a fixed pure-Python loop; run it
    while the stack is idle. Machines "of the same kind" differ from day to day, and every
    figure of a benchmark moves with the machine it ran on."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        total = 0
        for n in range(loops):
            total += n
        best = min(best, time.perf_counter() - started)
    return round(best, 3)
