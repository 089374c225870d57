"""The writer's watch on the projector (a promotion's, a fork's or a link's read of the read
model waits for it): caught up once no committed record lies between the projector's
stored offset and the partition's end as the question found it; commit and abort
markers, and aborted records, are nothing to wait for."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from engram.kafka import transactional_producer
from services.command.adapters.projection import ProjectionWatch

pytestmark = pytest.mark.integration


@pytest.fixture
async def watched(
    stack_settings: dict[str, str], pool: asyncpg.Pool
) -> AsyncIterator[tuple[str, str, ProjectionWatch]]:
    """A private topic and offsets rows under a group of its own (the projector's rows
    stay untouched), and a watch on them."""
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    topic, group = f"test-watch-{uuid.uuid4().hex[:8]}", f"test-group-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic(topic, 1, 1)])
    watch = ProjectionWatch(pool, bootstrap, topic=topic, group=group, timeout=0.5)
    await watch.start()
    try:
        yield topic, group, watch
    finally:
        await watch.stop()
        await admin.delete_topics([topic])
        await admin.close()
        await pool.execute("DELETE FROM projector.offsets WHERE consumer = $1", group)


async def applied(pool: asyncpg.Pool, group: str, topic: str, next_offset: int) -> None:
    await pool.execute(
        "INSERT INTO projector.offsets (consumer, topic, partition, next_offset) "
        "VALUES ($1, $2, 0, $3) ON CONFLICT (consumer, topic, partition) "
        "DO UPDATE SET next_offset = EXCLUDED.next_offset",
        group,
        topic,
        next_offset,
    )


async def test_caught_up_once_only_markers_and_aborted_records_remain(
    stack_settings: dict[str, str],
    pool: asyncpg.Pool,
    watched: tuple[str, str, ProjectionWatch],
) -> None:
    topic, group, watch = watched
    producer = transactional_producer(
        stack_settings["KAFKA_BOOTSTRAP_SERVERS"], f"test-watch-{uuid.uuid4().hex[:8]}"
    )
    await producer.start()
    try:
        async with producer.transaction():  # offsets 0-2, its commit marker 3
            for n in range(3):
                await producer.send(topic, f"event {n}".encode(), partition=0)
        assert await watch.caught_up([0]) is False  # nothing applied yet
        await applied(pool, group, topic, 2)
        assert await watch.caught_up([0]) is False  # one event short
        await applied(pool, group, topic, 3)
        assert await watch.caught_up([0]) is True  # only the commit marker remains

        await producer.begin_transaction()  # offsets 4-5, its abort marker 6
        for n in range(2):
            await producer.send(topic, f"aborted {n}".encode(), partition=0)
        await producer.abort_transaction()
        assert await watch.caught_up([0]) is True  # an aborted write is never applied

        async with producer.transaction():  # offset 7, its commit marker 8
            await producer.send(topic, b"event 3", partition=0)
        # It waits for the projector, polling, and answers as soon as it has applied it.
        later = asyncio.get_running_loop().call_later(
            0.15, lambda: asyncio.ensure_future(applied(pool, group, topic, 8))
        )
        try:
            assert await watch.caught_up([0]) is True
        finally:
            later.cancel()
    finally:
        await producer.stop()
    assert await watch.caught_up([]) is True  # nothing to wait for
