"""Composition root of the command service: settings -> pools -> writer -> routes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
from fastapi import FastAPI
from starlette.datastructures import State

from contracts import topics
from engram.auth import TokenVerifier
from engram.crypto import MasterKey, load_master_key
from engram.db import create_pool, migrate, migrate_shared
from engram.http import Unanswered, ask_ready, install_health, install_problem_handlers
from engram.kafka import partition_count
from engram.keystore import KeyStore
from engram.log_pruner import GroupLogPruner
from engram.logging import configure_logging, get_logger
from engram.ratelimit import install_rate_limit
from engram.service import cancel, supervise
from engram.settings import CommonSettings
from services.command.adapters.copies import CopySources
from services.command.adapters.lookups import BatchLookups
from services.command.adapters.policies import OrgPolicies
from services.command.adapters.processor import CommandProcessor
from services.command.adapters.projection import ProjectionWatch
from services.command.adapters.replies import CommandGateway
from services.command.adapters.restore import Restorer
from services.command.adapters.targets import LinkTargets
from services.command.adapters.writer import PartitionWriter
from services.command.handlers import routes
from services.command.openapi import install_openapi
from services.command.settings import CommandSettings
from services.projector.settings import ProjectorSettings

SQL_DIR = Path(__file__).parent / "sql"
log = get_logger(__name__)


@dataclass(frozen=True)
class Opened:
    """What the lifespan opens first (the pool, the keys, the topics' partition counts):
    every partition's writer shares it."""

    pool: asyncpg.Pool
    keystore: KeyStore
    verifier: TokenVerifier
    restorer: Restorer
    partitions: int
    reply_partitions: int


def create_app(
    settings: CommandSettings | None = None, common: CommonSettings | None = None
) -> FastAPI:
    settings = settings or CommandSettings()
    common = common or CommonSettings()
    configure_logging("command", common.log_level)
    app = FastAPI(title="Engram command service", lifespan=_lifespan(settings, common))
    install_problem_handlers(app)
    install_rate_limit(app, common)
    install_health(app, _readiness(app))
    app.router.routes.extend(routes)
    install_openapi(app)
    return app


def _lifespan(
    settings: CommandSettings, common: CommonSettings
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Each part's closing is pushed once it is open: a start that fails at a later
        # step closes what the earlier ones opened (in reverse) before the error goes on.
        async with AsyncExitStack() as stack:
            opened = await _open(common, stack)
            # Shared by the partitions' writers (one cache of org limits, one projection watch).
            projection = await _watch_projection(opened.pool, settings, common)
            stack.push_async_callback(projection.stop)
            processor = _processor(opened, _lookups(opened, projection), settings, common)
            # Its consumer is made in its constructor and stopped when its run ends; a step
            # that fails before the run closes it here.
            stack.push_async_callback(processor.close)
            gateway = CommandGateway(common.kafka_bootstrap_servers, processor.submit)
            await gateway.start()
            stack.push_async_callback(gateway.stop)
            _publish(app.state, settings, opened, processor, gateway)
            pruner = GroupLogPruner(
                common.kafka_bootstrap_servers, topics.COMMANDS, settings.group_id
            )
            await pruner.start()
            stack.push_async_callback(pruner.stop)
            task = supervise(processor.run(), "command-processor")
            pruning = supervise(
                pruner.run(settings.prune_seconds, lambda: processor.writers), "command-pruner"
            )
            stack.push_async_callback(cancel, pruning, task)
            log.info("command_service_started", port=settings.port, partitions=opened.partitions)
            yield

    return lifespan


async def _open(common: CommonSettings, stack: AsyncExitStack) -> Opened:
    """The pool's closing goes on ``stack``: a key or a topic that is missing closes it."""
    await migrate_shared(common.database_url)
    await migrate(common.database_url, "command", SQL_DIR)
    pool = await create_pool(common.database_url, max_size=8)
    stack.push_async_callback(pool.close)
    keystore = KeyStore(pool, MasterKey(load_master_key(common)))
    verifier = TokenVerifier(common)
    partitions = await partition_count(common.kafka_bootstrap_servers, topics.EVENTS)
    reply_partitions = await partition_count(common.kafka_bootstrap_servers, topics.REPLIES)
    restorer = Restorer(pool, common.kafka_bootstrap_servers, keystore.master)
    return Opened(pool, keystore, verifier, restorer, partitions, reply_partitions)


async def _watch_projection(
    pool: asyncpg.Pool, settings: CommandSettings, common: CommonSettings
) -> ProjectionWatch:
    projection = ProjectionWatch(
        pool,
        common.kafka_bootstrap_servers,
        group=ProjectorSettings().group_id,  # its offsets rows are by its group id
        timeout=settings.projection_wait_seconds,
    )
    await projection.start()
    return projection


def _lookups(opened: Opened, projection: ProjectionWatch) -> BatchLookups:
    pool = opened.pool
    return BatchLookups(
        opened.verifier,
        LinkTargets(pool),
        OrgPolicies(pool),
        CopySources(pool),
        projection,
        opened.partitions,
    )


def _processor(
    opened: Opened, lookups: BatchLookups, settings: CommandSettings, common: CommonSettings
) -> CommandProcessor:
    def make_writer(partition: int) -> PartitionWriter:
        return PartitionWriter(
            partition,
            common.kafka_bootstrap_servers,
            settings.group_id,
            opened.keystore,
            opened.verifier,
            opened.restorer,
            opened.partitions,
            opened.reply_partitions,
            settings.checkpoint_every,
            settings.cached_items,
            lookups,
        )

    return CommandProcessor(
        common.kafka_bootstrap_servers,
        settings.group_id,
        opened.pool,
        opened.keystore,
        make_writer,
        settings.max_batch,
        opened.partitions,
    )


def _publish(
    state: State,
    settings: CommandSettings,
    opened: Opened,
    processor: CommandProcessor,
    gateway: CommandGateway,
) -> None:
    """What the routes and the health check read from ``app.state``."""
    state.settings, state.verifier, state.gateway = settings, opened.verifier, gateway
    state.processor, state.keystore = processor, opened.keystore
    state.pool = opened.pool


def _readiness(app: FastAPI) -> Callable[[], Awaitable[dict[str, Any]]]:
    async def ready() -> dict[str, Any]:
        state = app.state
        stuck = state.processor.stuck
        return {
            "database": await _database_answers(state),
            "gateway": state.gateway.healthy,
            "kafka": await state.gateway.broker_answers(),
            "partitions": sorted(state.processor.writers),
            "writing": not stuck,  # False: unhealthy, a partition's batch keeps failing
            "stuck_partitions": stuck,
        }

    return ready


async def _database_answers(state: State) -> bool:
    return not isinstance(await ask_ready(state.pool.fetchval("SELECT 1")), Unanswered)
