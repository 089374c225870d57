"""A transaction's records handed to the producer a record batch at a time
(``engram.kafka.PartitionBatches``): a read-committed reader sees every record once, in
the order appended, across as many batches as the size limit makes; the last offset is
the last record's; an aborted transaction's records are never seen."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from engram.kafka import PartitionBatches
from tests.integration.conftest import scratch_topic

pytestmark = pytest.mark.integration
DEADLINE = 60.0


@pytest.fixture
async def topic(stack_settings: dict[str, str]) -> AsyncIterator[str]:
    async with scratch_topic(stack_settings["KAFKA_BOOTSTRAP_SERVERS"], "test.batches.", 2) as name:
        yield name


async def committed(bootstrap: str, tp: TopicPartition, count: int) -> list[tuple[int, bytes]]:
    """(offset, value) of the first ``count`` committed records of the partition."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False
    )
    await asyncio.wait_for(consumer.start(), DEADLINE)
    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        seen: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + DEADLINE
        while len(seen) < count and time.monotonic() < deadline:
            batch = await consumer.getmany(tp, timeout_ms=500)
            seen += [(r.offset, r.value or b"") for r in batch.get(tp, [])]
        return seen
    finally:
        await consumer.stop()


async def test_records_go_a_batch_at_a_time_in_order_and_once(
    stack_settings: dict[str, str], topic: str
) -> None:
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    producer = AIOKafkaProducer(  # batches of 1 KiB: 60 records of 100 bytes make several
        bootstrap_servers=bootstrap,
        transactional_id=f"test-batches-{uuid.uuid4().hex[:8]}",
        enable_idempotence=True,
        max_batch_size=1024,
    )
    await asyncio.wait_for(producer.start(), DEADLINE)
    try:
        batches = PartitionBatches(producer, topic, 1)
        with pytest.raises(RuntimeError, match="give up"):  # aborted: never read
            async with producer.transaction():
                await batches.append(b"k", b"aborted")
                await batches.flush()
                raise RuntimeError("give up")
        batches = PartitionBatches(producer, topic, 1)  # one a transaction

        values = [f"{n:03d}".encode() * 33 for n in range(60)] + [b"x" * 5000]  # one too big
        async with producer.transaction():
            for value in values:
                await batches.append(b"k", value)
            await batches.flush()
        last = batches.last_offset()
        assert batches.records == len(values) and len(batches._sent) > 3
    finally:
        await producer.stop()

    seen = await committed(bootstrap, TopicPartition(topic, 1), len(values))
    assert [v for _, v in seen] == values  # each once, in order, the aborted one not at all
    assert last == seen[-1][0]
