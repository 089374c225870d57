"""The whole dev stack as plain functions, for the CLI, test fixtures and CI scripts.

    from engram.devstack import stack
    settings = stack.up_infra()        # {"KAFKA_BOOTSTRAP_SERVERS": ..., "DATABASE_URL": ...}
    stack.start_services()             # the five services, once the infrastructure is up
    stack.status()                     # [PartStatus, ...]
    stack.down(wipe=False)

Every function is idempotent, safe to call from sync or async code, and serialised across
processes by a lock in the state folder.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from engram.devstack import (
    DATABASE_URL,
    KAFKA_BOOTSTRAP_SERVERS,
    DevstackError,
    PartStatus,
    Progress,
    StartResult,
    StatePaths,
    default_progress,
    kafka,
    postgres,
    resolve_state,
    services,
    state_lock,
)
from engram.devstack.processes import (
    run_sync,
)

KAFKA_TIMEOUT = 90.0
POSTGRES_TIMEOUT = 60.0
SERVICE_TIMEOUT = 60.0
KAFKA_STOP_GRACE = 30.0
POSTGRES_STOP_GRACE = 30.0
SERVICE_STOP_GRACE = 10.0

StateDir = str | Path | None


@dataclass(frozen=True)
class UpReport:
    settings: dict[str, str]
    parts: list[StartResult] = field(default_factory=list)


def settings() -> dict[str, str]:
    """How clients reach the stack (fixed loopback ports)."""
    return {"KAFKA_BOOTSTRAP_SERVERS": KAFKA_BOOTSTRAP_SERVERS, "DATABASE_URL": DATABASE_URL}


def write_stack_env(paths: StatePaths) -> Path:
    """``<state>/stack.env``: KEY=value lines, usable with ``set -a; . stack.env``."""
    lines = [f"{key}={value}" for key, value in settings().items()]
    paths.stack_env.write_text("\n".join(lines) + "\n")
    return paths.stack_env


def _raise_on_errors(outcomes: Iterable[object]) -> None:
    errors = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise DevstackError("\n\n".join(str(error) for error in errors))


async def _up_infra(
    paths: StatePaths, *, kafka_timeout: float, postgres_timeout: float, progress: Progress
) -> UpReport:
    # Both parts start side by side: each mostly waits on its own JVM or postmaster.
    outcomes = await asyncio.gather(
        kafka.start(paths, timeout=kafka_timeout, progress=progress),
        postgres.start(paths, timeout=postgres_timeout, progress=progress),
        return_exceptions=True,
    )
    _raise_on_errors(outcomes)
    parts = [outcome for outcome in outcomes if isinstance(outcome, StartResult)]
    for part in parts:
        progress(part.describe())
    write_stack_env(paths)
    return UpReport(settings(), parts)


def up_infra_report(
    state_dir: StateDir = None,
    *,
    kafka_timeout: float = KAFKA_TIMEOUT,
    postgres_timeout: float = POSTGRES_TIMEOUT,
    progress: Progress = default_progress,
) -> UpReport:
    """Like ``up_infra`` but also says, per part, whether it was reused and how long it took."""
    paths = resolve_state(state_dir)
    with state_lock(paths, progress):
        return run_sync(
            _up_infra(
                paths,
                kafka_timeout=kafka_timeout,
                postgres_timeout=postgres_timeout,
                progress=progress,
            )
        )


def up_infra(
    state_dir: StateDir = None,
    *,
    kafka_timeout: float = KAFKA_TIMEOUT,
    postgres_timeout: float = POSTGRES_TIMEOUT,
    progress: Progress = default_progress,
) -> dict[str, str]:
    """Start Kafka and PostgreSQL (or reuse them) and return the connection settings."""
    return up_infra_report(
        state_dir, kafka_timeout=kafka_timeout, postgres_timeout=postgres_timeout, progress=progress
    ).settings


def start_services(
    state_dir: StateDir = None,
    names: Iterable[str] | None = None,
    *,
    timeout: float = SERVICE_TIMEOUT,
    ensure_infra: bool = True,
    progress: Progress = default_progress,
) -> list[StartResult]:
    """Start the services (all five by default); the infrastructure first unless told not to,
    since no service can become healthy without it."""
    paths = resolve_state(state_dir)
    with state_lock(paths, progress):
        if ensure_infra:
            up_infra(paths.root, progress=progress)
        results = run_sync(services.start(paths, names, timeout=timeout, progress=progress))
    for result in results:
        progress(result.describe())
    return results


def stop_services(
    state_dir: StateDir = None,
    names: Iterable[str] | None = None,
    *,
    grace: float = SERVICE_STOP_GRACE,
    progress: Progress = default_progress,
) -> list[str]:
    """Stop the services (all five by default); returns the names that were running."""
    paths = resolve_state(state_dir)
    with state_lock(paths, progress):
        return services.stop(paths, names, grace=grace, progress=progress)


def down(
    state_dir: StateDir = None, *, wipe: bool = False, progress: Progress = default_progress
) -> None:
    """Stop services, then Kafka, then PostgreSQL; ``wipe`` also deletes their data (the Kafka
    jar cache and the logs are kept)."""
    paths = resolve_state(state_dir)
    with state_lock(paths, progress):
        services.stop(paths, grace=SERVICE_STOP_GRACE, progress=progress)
        kafka.stop(paths, grace=KAFKA_STOP_GRACE, progress=progress)
        postgres.stop(paths, grace=POSTGRES_STOP_GRACE, progress=progress)
        if wipe:
            progress(f"deleting Kafka and PostgreSQL data under {paths.root} …")
            kafka.wipe(paths)
            postgres.wipe(paths)
            paths.stack_env.unlink(missing_ok=True)


async def _infra_status(paths: StatePaths) -> list[PartStatus]:
    return list(await asyncio.gather(kafka.status(paths), postgres.status(paths)))


async def _status(paths: StatePaths) -> list[PartStatus]:
    infra, apps = await asyncio.gather(_infra_status(paths), services.status(paths))
    return [*infra, *apps]


def infra_status(state_dir: StateDir = None) -> list[PartStatus]:
    return run_sync(_infra_status(resolve_state(state_dir)))


def status(state_dir: StateDir = None) -> list[PartStatus]:
    """Kafka, PostgreSQL and each service."""
    return run_sync(_status(resolve_state(state_dir)))


# `engram status`'s exit codes, as `systemctl is-active` and LSB init scripts have them.
ALL_HEALTHY, RUNNING_UNHEALTHY, NOT_RUNNING = 0, 1, 3


def status_code(parts: Iterable[PartStatus], *, services_expected: bool = True) -> int:
    """For scripts: 0 when every part runs and is healthy; 1 when a running part is not
    healthy; else 3 when a part is not running. Kafka and PostgreSQL are always expected;
    the services only when ``services_expected`` (infra-only is a valid dev stack)."""
    parts = list(parts)
    if any(part.running and not part.healthy for part in parts):
        return RUNNING_UNHEALTHY
    if not_running(parts, services_expected=services_expected):
        return NOT_RUNNING
    return ALL_HEALTHY


def not_running(parts: Iterable[PartStatus], *, services_expected: bool = True) -> list[str]:
    """The expected parts that are not running, by name."""
    infra_names = {kafka.NAME, postgres.NAME}
    expected = [p for p in parts if services_expected or p.name in infra_names]
    return [part.name for part in expected if not part.running]


def status_ok(parts: Iterable[PartStatus]) -> bool:
    """Healthy enough for scripts: Kafka and PostgreSQL healthy, and every running service
    healthy (services that are not running are not counted: infra-only is a valid stack)."""
    return status_code(parts, services_expected=False) == ALL_HEALTHY
