"""Composition root of the recall service: packets, contexts, generations, reads."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from engram.auth import TokenVerifier
from engram.db import create_pool, migrate, migrate_shared, with_user
from engram.http import install_health, install_problem_handlers
from engram.logging import configure_logging, get_logger
from engram.settings import CommonSettings
from engram.setup import service_sql_dirs
from services.recall.adapters.store import RecallStore
from services.recall.handlers import router
from services.recall.settings import RecallSettings

log = get_logger(__name__)


def create_app(
    settings: RecallSettings | None = None, common: CommonSettings | None = None
) -> FastAPI:
    settings = settings or RecallSettings()
    common = common or CommonSettings()
    configure_logging("recall", common.log_level)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Recall's policies and grants cover the shared, the projector's and the indexer's
        # tables: theirs first.
        await migrate_shared(common.database_url)
        for owner, path in service_sql_dirs():
            await migrate(common.database_url, owner, path)
            if owner == "recall":
                break
        dsn = settings.database_url or with_user(common.database_url, settings.database_role)
        pool = await create_pool(dsn, max_size=10)
        app.state.settings, app.state.store = settings, RecallStore(pool)
        app.state.verifier, app.state.pool = TokenVerifier(common), pool
        app.state.embedder = None
        log.info("recall_started", port=settings.port)
        try:
            yield
        finally:
            await pool.close()

    app = FastAPI(title="Engram recall service", lifespan=lifespan)
    install_problem_handlers(app)

    async def ready() -> dict[str, Any]:
        try:
            await app.state.pool.fetchval("SELECT 1")
        except Exception as exc:
            return {"database": False, "error": str(exc)}
        return {"database": True}

    install_health(app, ready)
    app.include_router(router)
    return app
