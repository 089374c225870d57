"""The operator's view from outside (engram lag, engram dlq) against the real broker and
database: gaps counted in records, letters read back, and only input records re-driven."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from contracts import topics
from engram import letters
from engram.db import migrate, migrate_shared
from engram.kafka import dead_letter
from engram.letters import dead_letters, letters_in, redrive
from engram.operate import consumer_lag
from engram.topic_reads import OperateError

pytestmark = pytest.mark.integration
PROJECTOR_SQL = Path(__file__).parents[2] / "services" / "projector" / "sql"


@pytest.fixture
async def stored_offsets(stack_settings: dict[str, str]) -> AsyncIterator[str]:
    """A consumer of engram.events of the test's own, in the projector's offsets table."""
    name = f"test-lag-{uuid.uuid4().hex[:8]}"
    await migrate_shared(stack_settings["DATABASE_URL"])
    await migrate(stack_settings["DATABASE_URL"], "projector", PROJECTOR_SQL)
    conn = await asyncpg.connect(stack_settings["DATABASE_URL"])
    try:
        yield name
    finally:
        await conn.execute("DELETE FROM projector.offsets WHERE consumer = $1", name)
        await conn.close()


@pytest.fixture
async def lag_topic(stack_settings: dict[str, str]) -> AsyncIterator[str]:
    name = f"test-lag-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=stack_settings["KAFKA_BOOTSTRAP_SERVERS"])
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, 1, 1)])
        yield name
        await admin.delete_topics([name])
    finally:
        await admin.close()


async def test_lag_counts_records_not_markers(
    stack_settings: dict[str, str], stored_offsets: str, lag_topic: str
) -> None:
    bootstrap, dsn = stack_settings["KAFKA_BOOTSTRAP_SERVERS"], stack_settings["DATABASE_URL"]
    topic = lag_topic
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=topic)
    await producer.start()
    try:
        for n in range(3):  # three transactions: three records, three commit markers
            async with producer.transaction():
                await producer.send_and_wait(topic, f"r{n}".encode(), partition=0)
    finally:
        await producer.stop()
    conn = await asyncpg.connect(dsn)
    try:
        # Applied the first record only; and a consumer that applied all three.
        await conn.executemany(
            "INSERT INTO projector.offsets (consumer, topic, partition, next_offset) "
            "VALUES ($1, $2, 0, $3)",
            [(stored_offsets, topic, 1), (f"{stored_offsets}-done", topic, 5)],
        )
        groups = {stored_offsets: "projector", f"{stored_offsets}-new": "projector"}
        # A consumer that has stored nothing yet is listed from the topic's start (QA: the
        # extractor's consumer of turns was missing until it had handled one).
        expected = [("projector.offsets", f"{stored_offsets}-new", topic)]
        rows = {
            r.consumer: r
            for r in await consumer_lag(bootstrap, dsn, groups=groups, expected=expected)
            if r.topic == topic
        }
    finally:
        await conn.execute(
            "DELETE FROM projector.offsets WHERE consumer = $1", f"{stored_offsets}-done"
        )
        await conn.close()

    assert rows[stored_offsets].end == 6  # records at 0, 2, 4; markers at 1, 3, 5
    assert (rows[stored_offsets].behind, rows[stored_offsets].exact) == (2, True)
    assert rows[f"{stored_offsets}-done"].behind == 0  # only the last marker is left
    # Labelled: whose group it is, and where a stale one's offsets are to be deleted.
    assert (rows[stored_offsets].service, rows[stored_offsets].stored_in) == (
        "projector",
        "projector.offsets",
    )
    assert rows[f"{stored_offsets}-done"].service is None
    fresh = rows[f"{stored_offsets}-new"]
    assert (fresh.at, fresh.behind, fresh.service) == (0, 3, "projector")


async def test_letters_are_counted_as_records_not_offsets(
    stack_settings: dict[str, str], lag_topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A letter written in a transaction is followed by its commit marker, and an aborted
    one takes offsets too: the count is what a reader gets, and `--last N` shows N."""
    bootstrap, topic = stack_settings["KAFKA_BOOTSTRAP_SERVERS"], lag_topic
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=topic)
    await producer.start()
    try:
        for n in range(3):  # three letters, three commit markers
            async with producer.transaction():
                await producer.send_and_wait(topic, letter(n), partition=0)
        await producer.begin_transaction()  # one aborted letter and its abort marker
        await producer.send_and_wait(topic, letter(99), partition=0)
        await producer.abort_transaction()
        async with producer.transaction():
            await producer.send_and_wait(topic, letter(3), partition=0)
    finally:
        await producer.stop()

    shown = await letters_in(bootstrap, topic, last=10)
    assert (shown.count, shown.exact) == (4, True)
    assert [x.body["error"] for x in shown.newest] == ["e0", "e1", "e2", "e3"]
    newest = await letters_in(bootstrap, topic, last=2)
    assert (newest.count, [x.body["error"] for x in newest.newest]) == (4, ["e2", "e3"])
    assert (await letters_in(bootstrap, topic, last=0)).newest == []
    with pytest.raises(OperateError, match="0 or more"):
        await letters_in(bootstrap, topic, last=-1)

    # Past the bound the count is of offsets, and says so; the newest are still letters.
    monkeypatch.setattr(letters, "COUNT_AT_MOST", 3)
    rough = await letters_in(bootstrap, topic, last=3)
    assert (rough.count, rough.exact) == (10, False)
    assert [x.body["error"] for x in rough.newest] == ["e1", "e2", "e3"]


def letter(n: int) -> bytes:
    return json.dumps({"topic": topics.COMMANDS, "error": f"e{n}"}).encode()


async def test_dead_letters_are_listed_and_only_input_records_redriven(
    stack_settings: dict[str, str],
) -> None:
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    marker = uuid.uuid4().hex
    command = json.dumps({"poison": marker}).encode()
    letters = [
        dead_letter(
            "extractor",
            topic=topics.CONVERSATIONS,
            partition=0,
            offset=7,
            key=b"k-" + marker.encode(),
            value=command,
            error=f"broken {marker}",
        ),
        dead_letter(
            "extractor",
            topic=topics.EVENTS,
            partition=1,
            offset=9,
            key=None,
            value=b"{}",
            error="an event",
        ),
    ]
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        sent = [await producer.send_and_wait(t, v, key=k) for t, k, v in letters]
    finally:
        await producer.stop()

    shown = await dead_letters(bootstrap, "extractor", last=2)
    assert shown.count >= 2
    assert [(x.offset, x.body["error"]) for x in shown.newest] == [
        (sent[0].offset, f"broken {marker}"),
        (sent[1].offset, "an event"),
    ]

    with pytest.raises(OperateError, match="not re-driven"):
        await redrive(bootstrap, "extractor", sent[1].offset)
    with pytest.raises(OperateError, match="holds no letter at offset"):
        await redrive(bootstrap, "extractor", sent[1].offset + 1_000_000)
    with pytest.raises(OperateError, match="no service"):
        await redrive(bootstrap, "nobody", 0)
    topic, partition, offset = await redrive(bootstrap, "extractor", sent[0].offset)
    assert topic == topics.CONVERSATIONS
    assert await _value_at(bootstrap, TopicPartition(topic, partition), offset) == (
        b"k-" + marker.encode(),
        command,
    )


async def _value_at(bootstrap: str, tp: TopicPartition, offset: int) -> tuple[bytes, bytes]:
    kafka = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await kafka.start()
    try:
        kafka.assign([tp])
        kafka.seek(tp, offset)
        record = await kafka.getone(tp)
        return record.key or b"", record.value or b""
    finally:
        await kafka.stop()
