"""How a tracked follower groups records into transactions, on the real broker and real
Postgres, with a topic and an offsets table of the test's own:
- a follower that nobody waits on lets the broker gather its fetches: records that arrive
  one by one within its window come to it in one or two batches, where a follower that
  answers at once sees each on its own;
- a fetch of several partitions is one transaction (one handler call, every partition's
  offset stored), unless a parallel follower splits a large fetch by partition."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from engram.db import create_pool
from engram.tracking import Record, TrackedFollower
from tests.support import eventually

pytestmark = pytest.mark.integration

RECORDS = 5


@contextlib.asynccontextmanager
async def topic_and_offsets(
    bootstrap: str, pool: asyncpg.Pool, partitions: int = 1
) -> AsyncIterator[tuple[str, str]]:
    """A topic and an offsets table, both the test's own."""
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
        await admin.create_topics([NewTopic(name, partitions, 1)])
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

    async def handle(conn: asyncpg.Connection, records: list[Record]) -> None:
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
        # A first record applied: the follower is assigned, positioned and fetching.
        await producer.send_and_wait(topic, b"warm-up")
        await eventually(
            lambda: asyncio.sleep(0, result=follower.applied >= 1 or None),
            deadline=30,
            what="the warm-up record applied",
        )
        sizes.clear()
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


async def partitions_per_call(
    bootstrap: str, pool: asyncpg.Pool, per_partition: int, split_above: int
) -> tuple[list[set[int]], dict[int, int]]:
    """Publish ``per_partition`` records to each of 4 partitions, then start a parallel
    follower; return the partitions each handler call held, and the stored offsets."""
    calls: list[set[int]] = []

    async def handle(conn: asyncpg.Connection, records: list[Record]) -> None:
        calls.append({r.partition for r in records})

    async with topic_and_offsets(bootstrap, pool, partitions=4) as (topic, offsets):
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            for p in range(4):
                for n in range(per_partition):
                    await producer.send_and_wait(topic, f"record {n}".encode(), partition=p)
        finally:
            await producer.stop()
        follower = TrackedFollower(
            bootstrap=bootstrap,
            topic=topic,
            group_id=f"split-{uuid.uuid4().hex[:8]}",
            pool=pool,
            offsets_table=offsets,
            service="test",
            handle=handle,
            parallel=True,
            split_above=split_above,
        )
        task = asyncio.create_task(follower.run())
        try:
            await eventually(
                lambda: asyncio.sleep(0, result=follower.applied >= 4 * per_partition or None),
                deadline=30,
                what="every record applied",
            )
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        stored = {r["partition"]: r["next_offset"] for r in await pool.fetch(f"TABLE {offsets}")}
        return calls, stored


async def test_a_small_fetch_of_several_partitions_is_one_transaction(
    stack_settings: dict[str, str], pool: asyncpg.Pool
) -> None:
    calls, stored = await partitions_per_call(
        stack_settings["KAFKA_BOOTSTRAP_SERVERS"], pool, per_partition=2, split_above=200
    )
    assert any(len(partitions) > 1 for partitions in calls), calls
    assert stored == {p: 2 for p in range(4)}


async def test_a_parallel_follower_splits_a_large_fetch_by_partition(
    stack_settings: dict[str, str], pool: asyncpg.Pool
) -> None:
    calls, stored = await partitions_per_call(
        stack_settings["KAFKA_BOOTSTRAP_SERVERS"], pool, per_partition=5, split_above=3
    )
    assert all(len(partitions) == 1 for partitions in calls), calls
    assert stored == {p: 5 for p in range(4)}


async def test_a_record_postgres_cannot_store_is_dead_lettered_and_the_rest_applied(
    stack_settings: dict[str, str], pool: asyncpg.Pool
) -> None:
    """A batch Postgres refuses for a record's data is applied record by record: the one
    it refuses goes to the dead letters with its error, every other one is applied, and
    the follower goes on (it used to stop, and stop again on the same record at start)."""
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    stored: list[bytes] = []
    letters: list[tuple[bytes, str]] = []

    async def handle(conn: asyncpg.Connection, records: list[Record]) -> None:
        for record in records:  # int4 cannot hold the poison's number
            await conn.execute("SELECT $1::text::int4", (record.value or b"").decode())
        stored.extend(r.value or b"" for r in records)

    async with topic_and_offsets(bootstrap, pool) as (topic, offsets):
        follower = TrackedFollower(
            bootstrap=bootstrap,
            topic=topic,
            group_id=f"unstorable-{uuid.uuid4().hex[:8]}",
            pool=pool,
            offsets_table=offsets,
            service="test",
            handle=handle,
            gather_ms=1000,
        )

        async def dead_letter(record: Record, error: str) -> None:
            letters.append((record.value or b"", error))

        follower.dead_letter = dead_letter  # type: ignore[method-assign]
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            for value in (b"1", b"2", b"99999999999", b"4"):
                await producer.send(topic, value)
            await producer.flush()
        finally:
            await producer.stop()
        task = asyncio.create_task(follower.run())
        try:
            await eventually(
                lambda: asyncio.sleep(0, result=len(stored) == 3 or None),
                deadline=30,
                what="the storable records applied",
            )
            assert stored == [b"1", b"2", b"4"] and not task.done()
            assert [v for v, _ in letters] == [b"99999999999"]
            assert "not storable" in letters[0][1]
            next_offset = await pool.fetchval(f"SELECT next_offset FROM {offsets}")
            assert next_offset == 4
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_a_fault_of_the_moment_is_outlived_from_the_stored_offsets(
    stack_settings: dict[str, str], pool: asyncpg.Pool
) -> None:
    """Chaos QA: a connection cut mid-batch (here its backend terminated, as a restart of
    Postgres does) stopped the follower's task, and its service with it. Now the follower
    waits, reads its offsets from the database again and fetches from there: what the
    database holds is the truth (here its stored offset is set back, as a crash of Postgres
    that lost the last commits would leave it), so the records after it are applied again."""
    bootstrap, name = stack_settings["KAFKA_BOOTSTRAP_SERVERS"], f"recover-{uuid.uuid4().hex[:8]}"
    seen: list[bytes] = []
    held, release = asyncio.Event(), asyncio.Event()
    rows = f"public.{name.replace('-', '_')}_rows"
    await pool.execute(f"CREATE TABLE {rows} (value text PRIMARY KEY)")
    own = await create_pool(
        stack_settings["DATABASE_URL"], max_size=2, settings={"application_name": name}
    )

    async def handle(conn: asyncpg.Connection, records: list[Record]) -> None:
        for record in records:
            if record.value == b"hold" and not release.is_set():
                held.set()
                await release.wait()
            seen.append(record.value or b"")
            await conn.execute(
                f"INSERT INTO {rows} VALUES ($1) ON CONFLICT DO NOTHING",
                (record.value or b"").decode(),
            )

    try:
        async with topic_and_offsets(bootstrap, pool) as (topic, offsets):
            follower = TrackedFollower(
                bootstrap=bootstrap,
                topic=topic,
                group_id=name,
                pool=own,
                offsets_table=offsets,
                service="test",
                handle=handle,
            )
            task = asyncio.create_task(follower.run())
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
            await producer.start()
            try:
                for value in (b"1", b"2"):
                    await producer.send_and_wait(topic, value)
                await eventually(
                    lambda: asyncio.sleep(0, result=follower.applied == 2 or None),
                    deadline=30,
                    what="the first records applied",
                )
                await producer.send_and_wait(topic, b"hold")
                await asyncio.wait_for(held.wait(), 30)
                await pool.execute(f"UPDATE {offsets} SET next_offset = 1")  # "2" was lost
                cut = await pool.fetchval(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE application_name = $1",
                    name,
                )
                assert cut >= 1
                release.set()
                await producer.send_and_wait(topic, b"4")

                async def all_stored() -> bool | None:
                    stored = await pool.fetchval(f"SELECT next_offset FROM {offsets}")
                    return stored == 4 or None

                await eventually(all_stored, deadline=30, what="every record applied")
                values = {r["value"] for r in await pool.fetch(f"SELECT value FROM {rows}")}
                assert values == {"1", "2", "hold", "4"}
                assert seen.count(b"2") == 2  # applied again from the stored offset
                assert not task.done()
            finally:
                await producer.stop()
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    finally:
        await own.close()
        await pool.execute(f"DROP TABLE {rows}")
