"""Running a service: background tasks that stop the process when they fail.

A consumer loop that dies must not leave a process that answers health checks
while doing nothing: the failure is logged and the server shuts down, so a
supervisor (or the e2e test) sees it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar
from urllib.parse import urlsplit

import asyncpg
from pydantic import ValidationError
from pydantic_settings import BaseSettings

from engram.db import connect
from engram.logging import get_logger
from engram.settings import CommonSettings

log = get_logger(__name__)


class StartupRefused(Exception):
    """A service cannot start, for a reason its operator can fix (a model not fetched)."""


def supervise(coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
    task = asyncio.create_task(coro, name=name)
    task.add_done_callback(_on_done)
    return task


def _on_done(task: asyncio.Task[None]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.error("background_task_failed", task=task.get_name(), error=repr(exc), exc_info=exc)
        os.kill(os.getpid(), signal.SIGTERM)


async def cancel(*tasks: asyncio.Task[Any] | None) -> None:
    """Stop tasks started by ``supervise`` and wait for them. A task's own failure is not
    raised again here: its done-callback has logged it and stopped the process already."""
    for task in tasks:
        if task and not task.done():
            task.cancel()
    for task in tasks:
        if task:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


S = TypeVar("S", bound=BaseSettings)
INFRA_TIMEOUT_SECONDS = 5.0


def load_settings(model: type[S]) -> S:
    """A settings model read from the environment; a bad value refuses the start with the
    variable's name and what is wrong with it (never the value: it may be a secret)."""
    try:
        return model()
    except ValidationError as exc:
        raise StartupRefused(settings_problem(model, exc)) from None


def settings_problem(model: type[BaseSettings], exc: ValidationError) -> str:
    wrong = []
    for e in exc.errors():
        msg = str(e["msg"]).removeprefix("Value error, ")
        # A check of several variables together has no field: its message names them.
        wrong.append(f"{_variable(model, e['loc'])}: {msg}" if e["loc"] else msg)
    return "invalid settings: " + "; ".join(wrong)


def _variable(model: type[BaseSettings], loc: tuple[int | str, ...]) -> str:
    name = str(loc[0]) if loc else ""
    field = model.model_fields.get(name)
    if field is not None and field.alias:
        return field.alias
    return f"{model.model_config.get('env_prefix', '')}{name}".upper()


def require_reachable(common: CommonSettings, *, kafka: bool = True) -> None:
    """Raise a ``StartupRefused`` saying what to start or set unless PostgreSQL (and, when
    asked, Kafka) answers."""
    bootstrap = common.kafka_bootstrap_servers if kafka else None
    if problem := asyncio.run(unreachable(common.database_url, bootstrap)):
        raise StartupRefused(problem)


async def unreachable(database_url: str, kafka_bootstrap: str | None) -> str | None:
    """Why PostgreSQL (and Kafka, when given) cannot be used, or None when both answer.
    Each gets a few seconds; Kafka needs one bootstrap server that accepts a connection."""
    problem = await _postgres_problem(database_url)
    if problem is None and kafka_bootstrap is not None:
        problem = await _kafka_problem(kafka_bootstrap)
    return problem


async def _postgres_problem(database_url: str) -> str | None:
    try:
        where = _address(database_url)
        conn = await connect(database_url, timeout=INFRA_TIMEOUT_SECONDS)
    except (ValueError, asyncpg.ClientConfigurationError) as exc:
        return f"DATABASE_URL is not a PostgreSQL URL (postgresql://user@host:port/db): {exc}"
    except (OSError, TimeoutError) as exc:
        reason = getattr(exc, "strerror", None) or "no answer"
        return (
            f"cannot reach PostgreSQL at {where} (DATABASE_URL): {reason}; {_hint('DATABASE_URL')}"
        )
    except asyncpg.PostgresError as exc:
        return f"PostgreSQL at {where} (DATABASE_URL) refused the connection: {exc}"
    await conn.close()
    return None


async def _kafka_problem(bootstrap: str) -> str | None:
    errors = []
    for server in (s.strip() for s in bootstrap.split(",")):
        host, _, port = server.rpartition(":")
        try:
            _, writer = await asyncio.wait_for(
                asyncio.open_connection(host.strip("[]"), int(port)), INFRA_TIMEOUT_SECONDS
            )
        except ValueError:
            errors.append(f"{server}: not host:port")
            continue
        except (OSError, TimeoutError) as exc:
            errors.append(f"{server}: {getattr(exc, 'strerror', None) or 'no answer'}")
            continue
        writer.close()
        return None
    variable = "KAFKA_BOOTSTRAP_SERVERS"
    return f"cannot reach Kafka ({variable}): {', '.join(errors)}; {_hint(variable)}"


def _hint(variable: str) -> str:
    return f"start the dev stack with `engram up`, or set {variable} to a running server"


def _address(dsn: str) -> str:
    """host:port of a database URL, without its user or password."""
    parts = urlsplit(dsn)
    return f"{parts.hostname or 'localhost'}:{parts.port or 5432}"


def ready_settings(kafka: bool = True) -> CommonSettings:
    """The connection settings for a CLI command, once PostgreSQL (and Kafka) answer; else
    a StartupRefused that says what to start or set."""
    common = load_settings(CommonSettings)
    require_reachable(common, kafka=kafka)
    return common
