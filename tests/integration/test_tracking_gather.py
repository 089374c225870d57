"""A follower that nobody waits on lets the broker gather its fetches: records that arrive
one by one within its window come to it in one or two batches, where a follower that
answers at once sees each on its own. Real broker, real Postgres, a topic and an offsets
table of the test's own."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from engram.db import create_pool
from engram.tracking import Record, TrackedFollower
from tests.support import eventually

pytestmark = pytest.mark.integration

RECORDS = 5


@pytest.fixture
async def pool(stack_settings: dict[str, str]) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(stack_settings["DATABASE_URL"], max_size=4)
    yield pool
    await pool.close()


@contextlib.asynccontextmanager
async def topic_and_offsets(bootstrap: str, pool: asyncpg.Pool) -> AsyncIterator[tuple[str, str]]:
    """A topic of one partition and an offsets table, both the test's own."""
    name = f"test-gather-{uuid.uuid4().hex[:8]}"
    table = f"public.{name.replace('-', '_')}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    await pool.execute(
        f"CREATE TABLE {table} (consumer text, topic text, partition integer, "
        "next_offset bigint, updated_at timestamptz DEFAULT now(), "
        "PRIMARY KEY (consumer, topic, partition))"
    )
    try:
        await admin.create_topics([NewTopic(name, 1, 1)])
        yield name, table
        await admin.delete_topics([name])
    finally:
        await admin.close()
        await pool.execute(f"DROP TABLE {table}")


async def batches_seen(bootstrap: str, pool: asyncpg.Pool, gather_ms: int) -> list[int]:
    """Publish RECORDS records 40 ms apart; return the sizes of the batches applied."""
    async with topic_and_offsets(bootstrap, pool) as (topic, offsets):
        return await follow(bootstrap, topic, offsets, pool, gather_ms)


async def follow(
    bootstrap: str, topic: str, offsets: str, pool: asyncpg.Pool, gather_ms: int
) -> list[int]:
    sizes: list[int] = []

    async def handle(conn: asyncpg.Connection, tp: TopicPartition, records: list[Record]) -> None:
        sizes.append(len(records))

    group = f"gather-{uuid.uuid4().hex[:8]}"
    follower = TrackedFollower(
        bootstrap=bootstrap,
        topic=topic,
        group_id=group,
        pool=pool,
        offsets_table=offsets,
        service="test",
        handle=handle,
        gather_ms=gather_ms,
    )
    task = asyncio.create_task(follower.run())
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        await eventually(
            lambda: asyncio.sleep(0, result=follower.consumer.assignment() or None),
            deadline=30,
            what="the follower's assignment",
        )
        start = follower.applied
        for n in range(RECORDS):
            await producer.send_and_wait(topic, f"record {n}".encode())
            await asyncio.sleep(0.04)  # the records arrive one by one
        sent = time.monotonic()
        await eventually(
            lambda: asyncio.sleep(0, result=follower.applied - start >= RECORDS or None),
            deadline=10,
            what="every record applied",
        )
        assert time.monotonic() - sent < 5  # gathered, not held back
        return sizes
    finally:
        await producer.stop()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_gathering_follower_gets_records_that_trickle_in_as_one_batch(
    stack_settings: dict[str, str], pool: asyncpg.Pool
) -> None:
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    at_once = await batches_seen(bootstrap, pool, gather_ms=0)
    gathered = await batches_seen(bootstrap, pool, gather_ms=1000)
    assert sum(at_once) == sum(gathered) == RECORDS
    assert len(at_once) >= 3, at_once  # woken for (nearly) every record
    assert len(gathered) <= 2, gathered  # a fetch held while they trickled in
