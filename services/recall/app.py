"""Composition root of the recall service: packets, contexts, generations, reads."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import asyncpg
from fastapi import FastAPI
from starlette.datastructures import State

from engram.auth import TokenVerifier
from engram.db import create_pool, migrate, migrate_shared, with_user
from engram.embeddings.settings import EmbeddingSettings
from engram.http import Unanswered, ask_ready, install_health, install_problem_handlers
from engram.logging import configure_logging, get_logger
from engram.ratelimit import install_rate_limit
from engram.settings import CommonSettings
from engram.setup import service_sql_dirs
from services.recall import aliases, billing
from services.recall.adapters.embedder import CachedEmbedder, open_embedder
from services.recall.adapters.store import RecallStore
from services.recall.handlers import router
from services.recall.settings import RecallSettings

log = get_logger(__name__)


def create_app(
    settings: RecallSettings | None = None,
    common: CommonSettings | None = None,
    embedding: EmbeddingSettings | None = None,
) -> FastAPI:
    settings = settings or RecallSettings()
    common = common or CommonSettings()
    embedding = embedding or EmbeddingSettings()
    configure_logging("recall", common.log_level)
    app = FastAPI(title="Engram recall service", lifespan=_lifespan(settings, common, embedding))
    install_problem_handlers(app)
    install_rate_limit(app, common)
    install_health(app, _readiness(app))
    app.include_router(router)
    app.include_router(billing.router)
    app.include_router(aliases.router)
    return app


def _lifespan(
    settings: RecallSettings, common: CommonSettings, embedding: EmbeddingSettings
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        pool = await _open(settings, common)
        try:
            async with open_embedder(embedding, settings, pool) as embedder:
                _publish(app.state, settings, common, pool, embedder)
                log.info("recall_started", port=settings.port, model=_model(app))
                if embedder is not None:
                    _check_cut(
                        settings.semantic_max_distance, embedder.model, embedder.max_distance
                    )
                yield
        finally:
            await pool.close()

    return lifespan


async def _open(settings: RecallSettings, common: CommonSettings) -> asyncpg.Pool:
    await _migrate(common.database_url)
    dsn = settings.database_url or with_user(common.database_url, settings.database_role)
    return await create_pool(dsn, max_size=10)  # the principal is set per transaction


def _publish(
    state: State,
    settings: RecallSettings,
    common: CommonSettings,
    pool: asyncpg.Pool,
    embedder: CachedEmbedder | None,
) -> None:
    """What the routes and the health check read from ``app.state``."""
    state.settings, state.store = settings, RecallStore(pool)
    state.verifier, state.pool = TokenVerifier(common), pool
    state.embedder = embedder


def _readiness(app: FastAPI) -> Callable[[], Awaitable[dict[str, Any]]]:
    async def ready() -> dict[str, Any]:
        # Bounded, and only a fault of the moment is "not ready", as the command service's.
        answer = await ask_ready(app.state.pool.fetchval("SELECT 1"))
        if isinstance(answer, Unanswered):
            return {"database": False, "error": answer.error}
        return {"database": True, "model": _model(app)}

    return ready


def _check_cut(configured: float | None, model: str, own: float) -> None:
    """A cut far above the model's own lets nearly every vector match: a value chosen for
    another model (MiniLM suited 0.5-0.65; e5's unrelated text starts near 0.2)."""
    if configured is not None and configured > 1.5 * own:
        log.warning(
            "semantic_cut_far_above_model",
            configured=configured,
            model=model,
            model_cut=own,
            hint="unset MEMORY_SEMANTIC_MAX_DISTANCE to use the model's own cut",
        )


async def _migrate(database_url: str) -> None:
    """Recall's policies and grants cover the shared, the projector's and the indexer's
    tables: theirs first, as the owner (recall itself then reads as its restricted role)."""
    await migrate_shared(database_url)
    for owner, path in service_sql_dirs():
        await migrate(database_url, owner, path)
        if owner == "recall":
            break


def _model(app: FastAPI) -> str | None:
    """The embedding model queries are embedded with; None: full text only."""
    embedder = app.state.embedder
    return embedder.model if embedder is not None else None
