"""Composition root of the projector: events -> read-model tables in Postgres."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
from fastapi import FastAPI

from contracts import topics
from engram.crypto import MasterKey, load_master_key
from engram.db import create_pool, migrate, migrate_shared
from engram.http import Unanswered, ask_ready, install_health, install_problem_handlers
from engram.keystore import KeyStore
from engram.logging import configure_logging, get_logger
from engram.service import cancel, supervise
from engram.settings import CommonSettings
from engram.tracking import PreparingFollower
from services.projector.adapters.deltas import vacuum_deltas
from services.projector.core import Decoded
from services.projector.handlers import EventProjector
from services.projector.settings import ProjectorSettings

SQL_DIR = Path(__file__).parent / "sql"
log = get_logger(__name__)


def create_app(
    settings: ProjectorSettings | None = None, common: CommonSettings | None = None
) -> FastAPI:
    settings = settings or ProjectorSettings()
    common = common or CommonSettings()
    configure_logging("projector", common.log_level)
    app = FastAPI(title="Engram projector", lifespan=_lifespan(settings, common))
    install_problem_handlers(app)
    install_health(app, _readiness(app))
    return app


def _lifespan(
    settings: ProjectorSettings, common: CommonSettings
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # The pool's closing is pushed once it is open: a missing master key closes it.
        async with AsyncExitStack() as stack:
            pool = await _open(common)
            stack.push_async_callback(pool.close)
            projector, follower = _projection(pool, settings, common)
            app.state.follower, app.state.projector, app.state.pool = follower, projector, pool
            task = supervise(follower.run(), "projector-follower")
            vacuum = _vacuum(pool, follower, settings)
            stack.push_async_callback(cancel, task, vacuum)
            log.info("projector_started", port=settings.port)
            yield

    return lifespan


async def _open(common: CommonSettings) -> asyncpg.Pool:
    await migrate_shared(common.database_url)
    await migrate(common.database_url, "projector", SQL_DIR)
    # Partitions are applied in parallel; each may also take a connection for keys.
    # Commits wait for the WAL flush (Postgres's default): with synchronous_commit off,
    # a crash of Postgres (a killed backend is enough) lost the last commits, offsets
    # and all, while the follower's position had moved past them, so they were never
    # applied (QA). A flush costs about 0.2 ms here, once a batch.
    return await create_pool(common.database_url, max_size=2 * common.partitions + 2)


def _projection(
    pool: asyncpg.Pool, settings: ProjectorSettings, common: CommonSettings
) -> tuple[EventProjector, PreparingFollower[list[Decoded]]]:
    # The dead-letter callback binds late: the follower owns the producer.
    projector = EventProjector(
        KeyStore(pool, MasterKey(load_master_key(common))),
        lambda record, error: follower.dead_letter(record, error),
    )
    follower: PreparingFollower[list[Decoded]] = PreparingFollower(
        prepare=projector.prepare,
        write=projector.write,
        one_statement=projector.apply_new_items,
        bootstrap=common.kafka_bootstrap_servers,
        topic=topics.EVENTS,
        group_id=settings.group_id,
        pool=pool,
        offsets_table="projector.offsets",
        service="projector",
        max_batch=settings.max_batch,
        # Every row the projector writes belongs to one stream, so to one partition.
        parallel=True,
    )
    return projector, follower


def _vacuum(
    pool: asyncpg.Pool, follower: PreparingFollower[list[Decoded]], settings: ProjectorSettings
) -> asyncio.Task[None] | None:
    if not settings.deltas_vacuum_seconds:
        return None
    return supervise(
        vacuum_deltas(pool, lambda: follower.applied, settings.deltas_vacuum_seconds),
        "projector-deltas-vacuum",
    )


def _readiness(app: FastAPI) -> Callable[[], Awaitable[dict[str, Any]]]:
    async def ready() -> dict[str, Any]:
        state = app.state
        # Bounded: a database that hangs is "not ready", not a health check that hangs too.
        anomalies = await ask_ready(_anomalies(state.pool))
        if isinstance(anomalies, Unanswered):
            return {"database": False, "error": anomalies.error}
        return {
            "kafka": await state.follower.broker_answers(),
            "applied": state.follower.applied,
            "positions": state.follower.positions,
            "anomalies": anomalies,
        }

    return ready


async def _anomalies(pool: asyncpg.Pool) -> int:
    # As the table holds them (QA: a count in memory counted again an anomaly of
    # a batch rolled back and retried record by record, and began at 0 on restart).
    count: int = await pool.fetchval("SELECT count(*) FROM projector.anomalies")
    return count
