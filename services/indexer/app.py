"""Composition root of the indexer: events -> embeddings of current item text -> pgvector."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
from fastapi import FastAPI

from engram.budget import DailyBudget
from engram.crypto import MasterKey, load_master_key
from engram.db import migrate, migrate_shared
from engram.embeddings.providers import EmbeddingProvider, open_provider
from engram.embeddings.settings import EmbeddingSettings
from engram.http import Unanswered, ask_ready, install_health, install_problem_handlers
from engram.keystore import KeyStore
from engram.logging import configure_logging, get_logger
from engram.service import cancel, supervise
from engram.settings import CommonSettings
from engram.tracking import PreparingFollower
from services.indexer import metrics
from services.indexer.adapters.store import VectorStore, create_vector_pool
from services.indexer.handlers import EventIndexer, Prepared
from services.indexer.idle import WHY, Idle
from services.indexer.reindex import reindex_loop
from services.indexer.settings import IndexerSettings

SQL_DIR = Path(__file__).parent / "sql"
log = get_logger(__name__)


def create_app(
    settings: IndexerSettings | None = None,
    common: CommonSettings | None = None,
    embedding: EmbeddingSettings | None = None,
) -> FastAPI:
    settings = settings or IndexerSettings()
    common = common or CommonSettings()
    embedding = embedding or EmbeddingSettings()
    configure_logging("indexer", common.log_level)
    app = FastAPI(title="Engram indexer", lifespan=_lifespan(settings, common, embedding))
    install_problem_handlers(app)
    install_health(app, _readiness(app, embedding))
    return app


def _lifespan(
    settings: IndexerSettings, common: CommonSettings, embedding: EmbeddingSettings
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Each part's closing is pushed once it is open: a start that fails at a later
        # step closes what the earlier ones opened (in reverse) before the error goes on.
        async with AsyncExitStack() as stack:
            pool = await _open(common)
            stack.push_async_callback(pool.close)
            budget = DailyBudget(pool, embedding.daily_request_limit)
            provider = await stack.enter_async_context(
                open_provider(embedding, settings.tuning, budget)
            )
            await _ensure_model(pool, provider)
            follower = _follower(settings, common, pool, provider)
            idle = Idle(provider is not None, VectorStore(pool).any_vectors, settings.idle_check_s)
            app.state.follower, app.state.provider, app.state.idle = follower, provider, idle
            tasks = _supervised(follower, idle, pool, provider, settings)
            stack.push_async_callback(cancel, *tasks)
            log.info(
                "indexer_started",
                port=settings.port,
                model=_model(provider),
                provider=embedding.effective_provider,
            )
            yield

    return lifespan


async def _open(common: CommonSettings) -> asyncpg.Pool:
    await migrate_shared(common.database_url)
    await migrate(common.database_url, "indexer", SQL_DIR)
    return await create_vector_pool(common.database_url)


async def _ensure_model(pool: asyncpg.Pool, provider: EmbeddingProvider | None) -> None:
    if provider is not None:
        await VectorStore(pool).ensure_model(provider.model, provider.dimensions)


def _supervised(
    follower: PreparingFollower[Prepared],
    idle: Idle,
    pool: asyncpg.Pool,
    provider: EmbeddingProvider | None,
    settings: IndexerSettings,
) -> list[asyncio.Task[None]]:
    tasks = [supervise(_follow(idle, follower), "indexer-follower")]
    if provider is not None and settings.reindex_on_start:
        tasks.append(supervise(reindex_loop(pool, provider, settings), "indexer-reindex"))
    return tasks


async def _follow(idle: Idle, follower: PreparingFollower[Prepared]) -> None:
    await idle.wait()  # not a record read while there is nothing to index (idle.py)
    await follower.run()


def _readiness(
    app: FastAPI, embedding: EmbeddingSettings
) -> Callable[[], Awaitable[dict[str, Any]]]:
    async def ready() -> dict[str, Any]:
        follower: PreparingFollower[Prepared] = app.state.follower
        provider: EmbeddingProvider | None = app.state.provider
        detail = {
            "provider": embedding.effective_provider,
            "model": _model(provider),
            "applied": follower.applied,
            "positions": follower.positions,
        }
        if app.state.idle.idle:  # it reads no log: what it needs is the database
            idle = {**detail, "idle": True, "why_idle": WHY, "lag": None, "lag_total": None}
            looked = await ask_ready(app.state.idle.look())
            if isinstance(looked, Unanswered):
                return {**idle, "database": False, "error": looked.error}
            return {**idle, "database": True}
        lag = await _lag(follower)
        if isinstance(lag, Unanswered):
            # Why: the broker's or the database's error (the stored offsets are read from
            # Postgres), so that an operator knows which to look at.
            return {**detail, "kafka": False, "lag": None, "lag_total": None, "error": lag.error}
        return {**detail, "kafka": True, "lag": lag, "lag_total": sum(lag.values())}

    return ready


def _follower(
    settings: IndexerSettings,
    common: CommonSettings,
    pool: asyncpg.Pool,
    provider: EmbeddingProvider | None,
) -> PreparingFollower[Prepared]:
    keys = KeyStore(pool, MasterKey(load_master_key(common)))
    indexer = EventIndexer(VectorStore(pool), keys, provider, settings.embed_batch)
    return PreparingFollower(
        prepare=indexer.prepare,
        write=indexer.write,
        bootstrap=common.kafka_bootstrap_servers,
        topic=settings.topic,
        group_id=settings.group_id,
        pool=pool,
        offsets_table="indexer.offsets",
        service="indexer",
        max_batch=settings.max_batch,
        gather_ms=settings.fetch_gather_ms,
    )


def _model(provider: EmbeddingProvider | None) -> str | None:
    return provider.model if provider is not None else None


async def _lag(follower: PreparingFollower[Prepared]) -> dict[int, int] | Unanswered:
    """Lag per partition; ``Unanswered`` when Kafka, or the database its stored offsets are
    read from, does not answer quickly or meets a fault of the moment (health then says
    503)."""
    lag = await ask_ready(follower.lag())
    if isinstance(lag, Unanswered):
        log.warning("lag_unknown", error=lag.error)
        return lag
    for partition, behind in lag.items():
        metrics.LAG.labels(str(partition)).set(behind)
    return lag
