"""Process manager for the five Engram services (``python -m services.<name>``).

``SERVICES`` is the one table of names and ports; import it rather than repeating ports.
Each service gets ``KAFKA_BOOTSTRAP_SERVERS``, ``DATABASE_URL``, ``ENGRAM_STATE_DIR`` and every
service's ``ENGRAM_<NAME>_PORT`` in its environment and must answer 200 on ``GET /health``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import httpx

from engram.devstack import (
    DATABASE_URL,
    HOST,
    KAFKA_BOOTSTRAP_SERVERS,
    REPO_ROOT,
    DevstackError,
    PartStatus,
    Progress,
    StartResult,
    StatePaths,
)
from engram.devstack.processes import (
    adopt_listener,
    describe_listener,
    port_open,
    read_live_pid,
    spawn_detached,
    terminate,
    wait_until,
    write_pidfile,
)


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    port: int

    @property
    def module(self) -> str:
        return f"services.{self.name}"

    @property
    def port_env(self) -> str:
        return f"ENGRAM_{self.name.upper()}_PORT"

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def health_url(self) -> str:
        return f"http://{HOST}:{self.port}/health"


SERVICES: tuple[ServiceSpec, ...] = (
    ServiceSpec("command", 8081),
    ServiceSpec("projector", 8082),
    ServiceSpec("indexer", 8083),
    ServiceSpec("extractor", 8084),
    ServiceSpec("recall", 8085),
)
SERVICES_BY_NAME: dict[str, ServiceSpec] = {spec.name: spec for spec in SERVICES}


def select(names: Iterable[str] | None = None) -> list[ServiceSpec]:
    """The specs for ``names`` (all five when None), in table order."""
    if names is None:
        return list(SERVICES)
    wanted = set(names)
    unknown = sorted(wanted - SERVICES_BY_NAME.keys())
    if unknown:
        raise DevstackError(
            f"unknown service(s): {', '.join(unknown)}; known: {', '.join(SERVICES_BY_NAME)}"
        )
    return [spec for spec in SERVICES if spec.name in wanted]


def service_env(paths: StatePaths, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a service runs with: ours plus the stack's connection settings."""
    env = dict(os.environ if base is None else base)
    env["KAFKA_BOOTSTRAP_SERVERS"] = KAFKA_BOOTSTRAP_SERVERS
    env["DATABASE_URL"] = DATABASE_URL
    env["ENGRAM_STATE_DIR"] = str(paths.root)
    # Every port, not only its own: services may call each other.
    for spec in SERVICES:
        env[spec.port_env] = str(spec.port)
    # Logs reach the log file as they are written, not when a buffer fills.
    env["PYTHONUNBUFFERED"] = "1"
    return env


def find_pid(paths: StatePaths, spec: ServiceSpec) -> int | None:
    return read_live_pid(paths.pidfile(spec.name)) or adopt_listener(spec.port, f"-m {spec.module}")


async def is_healthy(
    spec: ServiceSpec, client: httpx.AsyncClient | None = None, timeout: float = 2.0
) -> bool:
    try:
        if client is None:
            async with httpx.AsyncClient(timeout=timeout) as own:
                response = await own.get(spec.health_url)
        else:
            response = await client.get(spec.health_url, timeout=timeout)
    except httpx.HTTPError:
        return False
    return response.status_code == 200


async def start(
    paths: StatePaths,
    names: Iterable[str] | None = None,
    *,
    timeout: float,
    progress: Progress,
    python: str = sys.executable,
) -> list[StartResult]:
    """Start the services concurrently (reusing healthy ones) and wait for their health."""
    specs = select(names)
    outcomes = await asyncio.gather(
        *(
            _start_one(paths, spec, timeout=timeout, progress=progress, python=python)
            for spec in specs
        ),
        return_exceptions=True,
    )
    errors = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
    if errors:
        raise DevstackError("\n\n".join(str(error) for error in errors))
    return [outcome for outcome in outcomes if isinstance(outcome, StartResult)]


async def _start_one(
    paths: StatePaths, spec: ServiceSpec, *, timeout: float, progress: Progress, python: str
) -> StartResult:
    started = time.monotonic()
    what = f"service {spec.name} at {spec.health_url}"
    log = paths.log(spec.name)
    pid = find_pid(paths, spec)
    if await is_healthy(spec):
        return StartResult(spec.name, pid, reused=True, seconds=time.monotonic() - started)
    if pid is not None:
        await wait_until(
            lambda: is_healthy(spec),
            what=what,
            timeout=timeout,
            log_path=log,
            progress=progress,
            pid=pid,
        )
        return StartResult(spec.name, pid, reused=True, seconds=time.monotonic() - started)
    if await port_open(spec.port):
        raise DevstackError(f"cannot start {spec.name}: {describe_listener(spec.port)}")
    proc = spawn_detached(
        [python, "-m", spec.module], log_path=log, what=what, cwd=REPO_ROOT, env=service_env(paths)
    )
    write_pidfile(paths.pidfile(spec.name), proc.pid)
    try:
        await wait_until(
            lambda: is_healthy(spec),
            what=what,
            timeout=timeout,
            log_path=log,
            progress=progress,
            proc=proc,
        )
    except DevstackError:
        # Do not leave a half-started service behind holding its port.
        terminate([proc.pid], grace=5, group=True)
        paths.pidfile(spec.name).unlink(missing_ok=True)
        raise
    return StartResult(spec.name, proc.pid, reused=False, seconds=time.monotonic() - started)


def stop(
    paths: StatePaths, names: Iterable[str] | None = None, *, grace: float, progress: Progress
) -> list[str]:
    """SIGTERM the services (whole process group), SIGKILL after ``grace``; returns the names
    that were running."""
    targets: dict[str, int] = {}
    for spec in select(names):
        pid = find_pid(paths, spec)
        paths.pidfile(spec.name).unlink(missing_ok=True)
        if pid is not None:
            targets[spec.name] = pid
    if not targets:
        return []
    progress("stopping services: " + ", ".join(f"{n} (pid {p})" for n, p in targets.items()))
    killed = terminate(list(targets.values()), grace=grace, group=True)
    for name, pid in targets.items():
        if pid in killed:
            progress(f"{name} did not stop within {grace:.0f} s and was killed")
    return list(targets)


async def status(paths: StatePaths, names: Iterable[str] | None = None) -> list[PartStatus]:
    specs = select(names)
    async with httpx.AsyncClient(timeout=2.0) as client:
        health = await asyncio.gather(*(is_healthy(spec, client) for spec in specs))
    result = []
    for spec, healthy in zip(specs, health, strict=True):
        pid = find_pid(paths, spec)
        result.append(
            PartStatus(
                spec.name,
                running=pid is not None or healthy,
                healthy=healthy,
                pid=pid,
                address=spec.health_url,
            )
        )
    return result
