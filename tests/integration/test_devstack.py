"""The dev stack starts real Kafka and PostgreSQL + pgvector, idempotently.

The stack is left running at the end: other test modules and developers share it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from engram.devstack import resolve_state, stack
from tests.integration.conftest import scratch_topic

pytestmark = pytest.mark.integration

DEADLINE = 60.0


@pytest.fixture(scope="module")
def settings() -> dict[str, str]:
    return stack.up_infra()


def test_up_infra_is_idempotent(settings: dict[str, str]) -> None:
    pids_before = {part.name: part.pid for part in stack.infra_status()}

    report = stack.up_infra_report()

    assert report.settings == settings
    assert all(part.reused for part in report.parts), report.parts
    assert {part.name: part.pid for part in stack.infra_status()} == pids_before
    assert all(pid is not None for pid in pids_before.values())
    assert settings == {
        "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:29092",
        "DATABASE_URL": "postgresql://postgres@127.0.0.1:25432/engram",
    }
    env_lines = resolve_state().stack_env.read_text().splitlines()
    assert sorted(env_lines) == sorted(f"{key}={value}" for key, value in settings.items())


def test_status_reports_infra_healthy(settings: dict[str, str]) -> None:
    parts = {part.name: part for part in stack.infra_status()}

    assert parts["kafka"].healthy and parts["kafka"].running
    assert parts["postgres"].healthy and parts["postgres"].running


@pytest.fixture
async def topic(settings: dict[str, str]) -> AsyncIterator[str]:
    """A fresh single-partition topic, deleted afterwards (the broker is shared)."""
    async with scratch_topic(settings["KAFKA_BOOTSTRAP_SERVERS"], "devstack-test-") as name:
        yield name


async def _consume(
    bootstrap: str, topic: str, *, until: bytes, isolation_level: str = "read_uncommitted"
) -> list[bytes]:
    """Values read from the start of ``topic`` by a consumer group, up to ``until``."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"devstack-test-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level=isolation_level,
    )
    await asyncio.wait_for(consumer.start(), DEADLINE)
    values: list[bytes] = []
    try:
        async with asyncio.timeout(DEADLINE):
            while not values or values[-1] != until:
                record = await consumer.getone()
                assert record.value is not None
                values.append(record.value)
    finally:
        await consumer.stop()
    return values


async def test_kafka_round_trip(settings: dict[str, str], topic: str) -> None:
    bootstrap = settings["KAFKA_BOOTSTRAP_SERVERS"]
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await asyncio.wait_for(producer.start(), DEADLINE)
    try:
        await asyncio.wait_for(producer.send_and_wait(topic, b"hello", key=b"k"), DEADLINE)
    finally:
        await producer.stop()

    assert await _consume(bootstrap, topic, until=b"hello") == [b"hello"]


async def test_transactional_producer_commits(settings: dict[str, str], topic: str) -> None:
    bootstrap = settings["KAFKA_BOOTSTRAP_SERVERS"]
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=f"devstack-test-{uuid.uuid4().hex[:8]}"
    )
    # start() runs InitProducerId: it hangs forever when the transaction log cannot be created.
    await asyncio.wait_for(producer.start(), DEADLINE)
    try:
        async with asyncio.timeout(DEADLINE):
            await producer.begin_transaction()
            await producer.send_and_wait(topic, b"aborted")
            await producer.abort_transaction()
            async with producer.transaction():
                await producer.send_and_wait(topic, b"committed")
    finally:
        await producer.stop()

    values = await _consume(bootstrap, topic, until=b"committed", isolation_level="read_committed")
    assert values == [b"committed"]


async def test_broker_cleaner_buffer_fits_its_heap(settings: dict[str, str]) -> None:
    """The log cleaner's dedupe map lives on the broker's heap: at Kafka's default
    (128 MiB) it held G1 above its marking threshold for good (see server_properties)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings["KAFKA_BOOTSTRAP_SERVERS"])
    await asyncio.wait_for(admin.start(), DEADLINE)
    try:
        [response] = await asyncio.wait_for(
            admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")]), DEADLINE
        )
    finally:
        await admin.close()
    [(_, _, _, _, entries)] = response.resources
    values = {entry[0]: entry[1] for entry in entries}
    assert int(values["log.cleaner.dedupe.buffer.size"]) == 8 * 1024 * 1024


async def test_postgres_has_pgvector(settings: dict[str, str]) -> None:
    conn = await asyncpg.connect(settings["DATABASE_URL"], timeout=DEADLINE)
    try:
        assert await conn.fetchval("SELECT current_database()") == "engram"
        assert await conn.fetchval("SELECT '[1,2,3]'::vector::text") == "[1,2,3]"
        distance = await conn.fetchval("SELECT '[1,2,3]'::vector <-> '[1,2,4]'::vector")
        assert distance == pytest.approx(1.0)
        version = await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname='vector'")
        assert version
    finally:
        await conn.close()
