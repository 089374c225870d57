"""The command consumer keeps its group membership through a restore that outlasts the
session timeout: the restore runs beside the consumer (its partitions paused), not in
the rebalance callback, during which aiokafka sends no heartbeats."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from contracts import topics
from contracts.envelope import CommandEnvelope
from engram.settings import CommonSettings
from services.command.adapters.processor import CommandProcessor
from services.command.adapters.writer import Cleanup
from tests.support import eventually, send_commands

pytestmark = pytest.mark.integration

SESSION_TIMEOUT_S = 10  # aiokafka's default, which the processor keeps


class SlowWriter:
    """A writer whose restore takes longer than the session timeout."""

    def __init__(self, partition: int, log: dict[str, Any]) -> None:
        self.partition, self._log = partition, log

    async def start(self) -> None:
        self._log["starts"].append(self.partition)
        await asyncio.sleep(SESSION_TIMEOUT_S + 2)

    async def process(self, records: list[Any]) -> Cleanup:
        self._log["seen"] += [r.value for r in records]
        return Cleanup()

    async def stop(self) -> None:
        pass


async def test_a_restore_longer_than_the_session_timeout_keeps_the_partitions(
    stack_settings: dict[str, str],
) -> None:
    log: dict[str, Any] = {"starts": [], "seen": []}
    pool = await asyncpg.create_pool(stack_settings["DATABASE_URL"], min_size=1, max_size=2)
    assert pool is not None
    group = f"test-processor-{uuid.uuid4().hex[:8]}"
    # Start at the end of engram.commands: the backlog other tests left is not this test's.
    await _commit_end_offsets(stack_settings["KAFKA_BOOTSTRAP_SERVERS"], group)
    processor = CommandProcessor(
        stack_settings["KAFKA_BOOTSTRAP_SERVERS"],
        group,
        pool,
        None,  # type: ignore[arg-type]  # the slow writers never clean up keys
        lambda p: SlowWriter(p, log),  # type: ignore[arg-type,return-value]
        max_batch=100,
    )
    run = asyncio.create_task(processor.run())
    try:
        partitions = CommonSettings().partitions
        await eventually(
            lambda: _ready(processor, partitions), deadline=60, what="every writer ready"
        )
        marker = f"slow-restore-{uuid.uuid4()}"
        await send_commands(
            stack_settings["KAFKA_BOOTSTRAP_SERVERS"],
            [
                CommandEnvelope(
                    command_id=marker,
                    type="RememberMemory",
                    token="t",
                    stream_id=f"org-{uuid.uuid4().hex[:6]}/shared",
                    payload={"content": "x"},
                )
            ],
        )
        await eventually(
            lambda: _seen(log, marker), deadline=30, what="the command reached its writer"
        )
        # Each partition was restored once: no expulsion, no rebalance storm.
        assert sorted(log["starts"]) == list(range(partitions))
    finally:
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        await pool.close()


async def _commit_end_offsets(bootstrap: str, group: str) -> None:
    kafka = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await kafka.start()
    try:
        tps = [TopicPartition(topics.COMMANDS, p) for p in range(CommonSettings().partitions)]
        kafka.assign(tps)
        await kafka.commit(await kafka.end_offsets(tps))
    finally:
        await kafka.stop()


async def _ready(processor: CommandProcessor, partitions: int) -> bool:
    return sorted(processor.writers) == list(range(partitions))


async def _seen(log: dict[str, Any], marker: str) -> bool:
    return any(marker.encode() in (value or b"") for value in log["seen"])
