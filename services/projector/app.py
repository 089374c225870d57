"""Composition root of the projector: events -> read-model tables in Postgres."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from contracts import topics
from engram.crypto import MasterKey, load_master_key
from engram.db import create_pool, migrate, migrate_shared
from engram.faults import of_the_moment
from engram.http import install_health, install_problem_handlers
from engram.keystore import KeyStore
from engram.logging import configure_logging, get_logger
from engram.service import cancel, supervise
from engram.settings import CommonSettings
from engram.tracking import PreparingFollower
from services.projector.adapters.deltas import vacuum_deltas
from services.projector.handlers import Decoded, EventProjector
from services.projector.settings import ProjectorSettings

SQL_DIR = Path(__file__).parent / "sql"
log = get_logger(__name__)


def create_app(
    settings: ProjectorSettings | None = None, common: CommonSettings | None = None
) -> FastAPI:
    settings = settings or ProjectorSettings()
    common = common or CommonSettings()
    configure_logging("projector", common.log_level)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await migrate_shared(common.database_url)
        await migrate(common.database_url, "projector", SQL_DIR)
        # Partitions are applied in parallel; each may also take a connection for keys.
        # Commits wait for the WAL flush (Postgres's default): with synchronous_commit off,
        # a crash of Postgres (a killed backend is enough) lost the last commits, offsets
        # and all, while the follower's position had moved past them, so they were never
        # applied (QA). A flush costs about 0.2 ms here, once a batch.
        pool = await create_pool(common.database_url, max_size=2 * common.partitions + 2)
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
        app.state.follower, app.state.projector, app.state.pool = follower, projector, pool
        task = supervise(follower.run(), "projector-follower")
        vacuum = (
            supervise(
                vacuum_deltas(pool, lambda: follower.applied, settings.deltas_vacuum_seconds),
                "projector-deltas-vacuum",
            )
            if settings.deltas_vacuum_seconds
            else None
        )
        log.info("projector_started", port=settings.port)
        try:
            yield
        finally:
            await cancel(task, vacuum)
            await pool.close()

    app = FastAPI(title="Engram projector", lifespan=lifespan)
    install_problem_handlers(app)

    async def ready() -> dict[str, Any]:
        try:
            # As the table holds them (QA: a count in memory counted again an anomaly of
            # a batch rolled back and retried record by record, and began at 0 on restart).
            anomalies = await app.state.pool.fetchval("SELECT count(*) FROM projector.anomalies")
        except Exception as exc:
            if not of_the_moment(exc):
                raise
            return {"database": False, "error": repr(exc)[:300]}
        return {
            "kafka": await app.state.follower.broker_answers(),
            "applied": app.state.follower.applied,
            "positions": app.state.follower.positions,
            "anomalies": anomalies,
        }

    install_health(app, ready)
    return app
