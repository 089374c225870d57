"""Composition root of the command service: settings -> pools -> writer -> routes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from contracts import topics
from engram.auth import TokenVerifier
from engram.crypto import MasterKey, load_master_key
from engram.db import create_pool, migrate, migrate_shared
from engram.faults import of_the_moment
from engram.http import install_health, install_problem_handlers
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


def create_app(
    settings: CommandSettings | None = None, common: CommonSettings | None = None
) -> FastAPI:
    settings = settings or CommandSettings()
    common = common or CommonSettings()
    configure_logging("command", common.log_level)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await migrate_shared(common.database_url)
        await migrate(common.database_url, "command", SQL_DIR)
        pool = await create_pool(common.database_url, max_size=8)
        keystore = KeyStore(pool, MasterKey(load_master_key(common)))
        verifier = TokenVerifier(common)
        partitions = await partition_count(common.kafka_bootstrap_servers, topics.EVENTS)
        reply_partitions = await partition_count(common.kafka_bootstrap_servers, topics.REPLIES)
        restorer = Restorer(pool, common.kafka_bootstrap_servers, keystore.master)
        # Shared by the partitions' writers (one cache of org limits, one projection watch).
        projection = ProjectionWatch(
            pool,
            common.kafka_bootstrap_servers,
            group=ProjectorSettings().group_id,  # its offsets rows are by its group id
            timeout=settings.projection_wait_seconds,
        )
        await projection.start()
        lookups = BatchLookups(
            verifier,
            LinkTargets(pool),
            OrgPolicies(pool),
            CopySources(pool),
            projection,
            partitions,
        )

        def make_writer(partition: int) -> PartitionWriter:
            return PartitionWriter(
                partition,
                common.kafka_bootstrap_servers,
                settings.group_id,
                keystore,
                verifier,
                restorer,
                partitions,
                reply_partitions,
                settings.checkpoint_every,
                settings.cached_items,
                lookups,
            )

        processor = CommandProcessor(
            common.kafka_bootstrap_servers,
            settings.group_id,
            pool,
            keystore,
            make_writer,
            settings.max_batch,
            partitions,
        )
        gateway = CommandGateway(common.kafka_bootstrap_servers, processor.submit)
        await gateway.start()
        app.state.settings, app.state.verifier, app.state.gateway = settings, verifier, gateway
        app.state.processor, app.state.keystore = processor, keystore
        app.state.pool = pool
        pruner = GroupLogPruner(common.kafka_bootstrap_servers, topics.COMMANDS, settings.group_id)
        await pruner.start()
        task = supervise(processor.run(), "command-processor")
        pruning = supervise(
            pruner.run(settings.prune_seconds, lambda: processor.writers), "command-pruner"
        )
        log.info("command_service_started", port=settings.port, partitions=partitions)
        try:
            yield
        finally:
            await cancel(pruning, task)
            await pruner.stop()
            await gateway.stop()
            await projection.stop()
            await pool.close()

    app = FastAPI(title="Engram command service", lifespan=lifespan)
    install_problem_handlers(app)
    install_rate_limit(app, common)

    async def ready() -> dict[str, Any]:
        stuck = app.state.processor.stuck
        try:
            await asyncio.wait_for(app.state.pool.fetchval("SELECT 1"), 2.0)
            database = True
        except Exception as exc:
            if not of_the_moment(exc):
                raise
            database = False
        return {
            "database": database,
            "gateway": app.state.gateway.healthy,
            "kafka": await app.state.gateway.broker_answers(),
            "partitions": sorted(app.state.processor.writers),
            "writing": not stuck,  # False: unhealthy, a partition's batch keeps failing
            "stuck_partitions": stuck,
        }

    install_health(app, ready)
    app.router.routes.extend(routes)
    install_openapi(app)
    return app
