"""Composition root of the extractor: conversation turns -> candidate commands.

Two followers share one pool: one reads ``engram.conversations`` and proposes,
the other reads ``engram.events`` to learn which sources a forget suppresses.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from fastapi import FastAPI

from engram.auth import TokenVerifier
from engram.budget import DailyBudget, utc_today
from engram.crypto import MasterKey, load_master_key
from engram.db import create_pool, migrate, migrate_shared
from engram.http import install_health, install_problem_handlers
from engram.log_pruner import TableLogPruner
from engram.logging import configure_logging, get_logger
from engram.service import cancel, supervise
from engram.settings import CommonSettings
from engram.tracking import BatchHandler, TrackedFollower
from services.extractor.adapters.ai import ChatExtractor
from services.extractor.adapters.commands import CommandPublisher
from services.extractor.adapters.sources import rehash_sources
from services.extractor.handlers import SourceRecorder, TurnExtractor
from services.extractor.settings import ExtractorSettings

SQL_DIR = Path(__file__).parent / "sql"
OFFSETS = "extractor.offsets"
log = get_logger(__name__)


@dataclass(frozen=True)
class Opened:
    """What the lifespan opens before the followers (the pool, the command producer, the AI
    path's client, the master key): both followers share it; it is closed after them."""

    pool: asyncpg.Pool
    publisher: CommandPublisher
    client: httpx.AsyncClient
    ai: ChatExtractor | None
    master: MasterKey


def create_app(
    settings: ExtractorSettings | None = None,
    common: CommonSettings | None = None,
    *,
    today: Callable[[], date] = utc_today,
) -> FastAPI:
    """``today`` names the budget's day; tests pass their own so they never spend the real one."""
    settings = settings or ExtractorSettings()
    common = common or CommonSettings()
    configure_logging("extractor", common.log_level)
    app = FastAPI(title="Engram extractor", lifespan=_lifespan(settings, common, today))
    install_problem_handlers(app)
    install_health(app, _readiness(app, settings))
    return app


def _lifespan(
    settings: ExtractorSettings, common: CommonSettings, today: Callable[[], date]
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Each part's closing is pushed once it is open: a start that fails at a later
        # step closes what the earlier ones opened (in reverse) before the error goes on.
        async with AsyncExitStack() as stack:
            opened = await _open(settings, common, today, stack)
            followers = _followers(opened, settings, common)
            app.state.followers = followers
            tasks = [supervise(f.run(), f"extractor-{n}") for n, f in followers.items()]
            stack.push_async_callback(cancel, *tasks)  # when the pruner does not start
            pruner = await _pruner(opened.pool, settings, common)
            stack.push_async_callback(pruner.stop)
            tasks.append(_pruning(pruner, followers["turns"], settings))
            stack.push_async_callback(cancel, *tasks)  # every task stops before the pruner
            log.info("extractor_started", port=settings.port, ai="on" if opened.ai else "off")
            yield

    return lifespan


async def _open(
    settings: ExtractorSettings,
    common: CommonSettings,
    today: Callable[[], date],
    stack: AsyncExitStack,
) -> Opened:
    """Each part's closing goes on ``stack`` as it opens: a missing master key, or sources
    that cannot be hashed, close the pool, the producer and the client."""
    await migrate_shared(common.database_url)  # the AI budget, before the extractor's
    await migrate(common.database_url, "extractor", SQL_DIR)
    pool = await create_pool(common.database_url, max_size=4)
    stack.push_async_callback(pool.close)
    publisher = CommandPublisher(common.kafka_bootstrap_servers)
    await publisher.start()
    stack.push_async_callback(publisher.stop)
    client = httpx.AsyncClient()
    stack.push_async_callback(client.aclose)
    ai = _chat_extractor(settings, pool, client, today)
    master = MasterKey(load_master_key(common))
    await rehash_sources(pool, master)
    return Opened(pool, publisher, client, ai, master)


def _followers(
    opened: Opened, settings: ExtractorSettings, common: CommonSettings
) -> dict[str, TrackedFollower]:
    turns = TurnExtractor(
        TokenVerifier(common), opened.publisher, opened.ai, lambda: datetime.now(UTC), opened.master
    )
    sources = SourceRecorder(opened.master)
    turns.follower = _follower(common, settings, opened.pool, "turns", turns.handle_batch)
    sources.follower = _follower(common, settings, opened.pool, "events", sources.handle_batch)
    return {"turns": turns.follower, "events": sources.follower}


async def _pruner(
    pool: asyncpg.Pool, settings: ExtractorSettings, common: CommonSettings
) -> TableLogPruner:
    # Handled turns leave the topic's disk (a turn may hold words a forget erases).
    pruner = TableLogPruner(
        common.kafka_bootstrap_servers,
        settings.conversations_topic,
        pool,
        OFFSETS,
        settings.group_id,
    )
    await pruner.start()
    return pruner


def _pruning(
    pruner: TableLogPruner, turns: TrackedFollower, settings: ExtractorSettings
) -> asyncio.Task[None]:
    reading = turns.consumer
    return supervise(
        pruner.run(settings.prune_seconds, lambda: {tp.partition for tp in reading.assignment()}),
        "extractor-pruner",
    )


def _readiness(
    app: FastAPI, settings: ExtractorSettings
) -> Callable[[], Awaitable[dict[str, Any]]]:
    async def ready() -> dict[str, Any]:
        followers: dict[str, TrackedFollower] = app.state.followers
        broker = await next(iter(followers.values())).broker_answers()
        return (
            {"kafka": broker}
            | {
                name: {"applied": f.applied, "positions": f.positions}
                for name, f in followers.items()
            }
            | {"ai": "on" if settings.ai_enabled else "off"}
        )

    return ready


def _chat_extractor(
    settings: ExtractorSettings,
    pool: asyncpg.Pool,
    client: httpx.AsyncClient,
    today: Callable[[], date],
) -> ChatExtractor | None:
    """The AI path only when an endpoint, a model and a non-zero budget are configured."""
    if not settings.ai_enabled:
        return None
    budget = DailyBudget(pool, settings.ai_daily_request_limit, today)
    return ChatExtractor(client, settings, budget)


def _follower(
    common: CommonSettings,
    settings: ExtractorSettings,
    pool: asyncpg.Pool,
    which: str,
    handle: BatchHandler,
) -> TrackedFollower:
    topic, group, batch = (
        (settings.conversations_topic, settings.group_id, settings.max_batch)
        if which == "turns"
        else (settings.events_topic, settings.events_group_id, 1000)
    )
    return TrackedFollower(
        bootstrap=common.kafka_bootstrap_servers,
        topic=topic,
        group_id=group,
        pool=pool,
        offsets_table=OFFSETS,
        service="extractor",
        handle=handle,
        max_batch=batch,
        gather_ms=settings.fetch_gather_ms,
    )
