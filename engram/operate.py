"""What an operator asks of a running Engram from outside it: how far behind each
consumer is, and what is in the dead-letter topics (DESIGN §8).

Lag: the command service's group keeps its offsets in Kafka; the projector, the indexer
and the extractor keep theirs in Postgres (``<service>.offsets``, written with their rows).
Each is measured against its topic's last stable offset, and the gap is then counted in
records: a transaction's commit marker takes an offset but holds no record, so a consumer
that has applied everything sits one offset short of the end for good.

Dead letters: a letter (``engram.kafka.dead_letter``) carries the original record's bytes,
where it came from and the error. One whose record came from an input topic
(``engram.commands``, ``engram.conversations``) can be re-driven: published there again,
with its key, where command ids and turn ids make a second delivery harmless. An event is
never published again: ``engram.events`` has one writer; a consumer fixed after a poison
event re-reads it by a replay.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import GroupCoordinatorNotAvailableError

from contracts import topics
from engram.kafka import partition_count

# Consumers that keep their offsets in Postgres, by the schema that holds them.
POSTGRES_TRACKED = ("projector", "indexer", "extractor")
COMMAND_GROUP = "engram-command"
COUNT_AT_MOST = 10_000  # records read to count a gap exactly; past it, offsets are shown
READ_SECONDS = 15.0  # how long one partition's read may take before it gives up
REDRIVABLE = (topics.COMMANDS, topics.CONVERSATIONS)


@dataclass(frozen=True)
class Lag:
    consumer: str
    topic: str
    partition: int
    at: int  # the next offset the consumer will read
    end: int  # the partition's last stable offset
    behind: int  # records between the two (offsets, when more than COUNT_AT_MOST)
    exact: bool  # False: ``behind`` counts offsets, markers included


@dataclass(frozen=True)
class Letter:
    service: str
    offset: int  # in engram.dlq.<service>
    body: dict[str, Any]  # the letter: topic, partition, offset, key, value, error, failed_at


class OperateError(Exception):
    """A request an operator can correct: named service, offset or letter."""


async def consumer_lag(bootstrap: str, database_url: str) -> list[Lag]:
    """Each consumer's lag on every partition of the topics it reads; a partition it has
    stored no offset for yet it reads from the start."""
    positions = await _postgres_positions(database_url) + await _command_positions(bootstrap)
    existing = await _topics(bootstrap)  # an offset row may outlive its topic
    positions = [p for p in positions if p[1] in existing]
    if not positions:
        return []
    kafka = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False
    )
    await kafka.start()
    try:
        stored = {(c, t, p) for c, t, p, _ in positions}
        for consumer, topic in sorted({(c, t) for c, t, _, _ in positions}):
            parts = [
                TopicPartition(topic, p) for p in range(await partition_count(bootstrap, topic))
            ]
            starts = await kafka.beginning_offsets(parts)
            positions += [
                (consumer, topic, tp.partition, starts[tp])
                for tp in parts
                if (consumer, topic, tp.partition) not in stored
            ]
        tps = sorted({TopicPartition(t, p) for _, t, p, _ in positions})
        ends = await kafka.end_offsets(tps) if tps else {}
        out = []
        for consumer, topic, partition, at in sorted(positions):
            end = ends[TopicPartition(topic, partition)]
            behind, exact = await _records_between(kafka, TopicPartition(topic, partition), at, end)
            out.append(Lag(consumer, topic, partition, at, end, behind, exact))
        return out
    finally:
        await kafka.stop()


async def _postgres_positions(database_url: str) -> list[tuple[str, str, int, int]]:
    conn = await asyncpg.connect(database_url)
    try:
        rows = []
        for schema in POSTGRES_TRACKED:
            if await conn.fetchval("SELECT to_regclass($1)", f"{schema}.offsets") is None:
                continue  # that service has never started against this database
            rows += await conn.fetch(
                f"SELECT consumer, topic, partition, next_offset FROM {schema}.offsets"
            )
        return [(r["consumer"], r["topic"], r["partition"], r["next_offset"]) for r in rows]
    finally:
        await conn.close()


async def _command_positions(bootstrap: str) -> list[tuple[str, str, int, int]]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        # A fresh broker makes its offsets topic when a group is first looked up, and
        # answers "no coordinator" until it has.
        deadline = time.monotonic() + READ_SECONDS
        while True:
            try:
                committed = await admin.list_consumer_group_offsets(COMMAND_GROUP)
                break
            except GroupCoordinatorNotAvailableError as exc:
                if time.monotonic() > deadline:
                    raise OperateError(
                        "the broker's group coordinator is not available yet; try again"
                    ) from exc
                await asyncio.sleep(0.5)
    finally:
        await admin.close()
    return [
        (COMMAND_GROUP, tp.topic, tp.partition, meta.offset)
        for tp, meta in committed.items()
        if tp.topic == topics.COMMANDS and meta.offset >= 0
    ]


async def _topics(bootstrap: str) -> set[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return set(await admin.list_topics())
    finally:
        await admin.close()


async def _records_between(
    kafka: AIOKafkaConsumer, tp: TopicPartition, start: int, end: int
) -> tuple[int, bool]:
    if end <= start:
        return 0, True
    if end - start > COUNT_AT_MOST:
        return end - start, False
    kafka.assign([tp])
    kafka.seek(tp, start)
    count, deadline = 0, time.monotonic() + READ_SECONDS
    # A fetch steps over markers and aborted records, so the position reaches the end.
    while await kafka.position(tp) < end:
        if time.monotonic() > deadline:
            return end - start, False
        batch = await kafka.getmany(tp, timeout_ms=1000, max_records=1000)
        count += sum(1 for r in batch.get(tp, []) if r.offset < end)
    return count, True


async def dead_letters(bootstrap: str, service: str, last: int) -> tuple[int, list[Letter]]:
    """How many letters the service's dead-letter topic holds, and the ``last`` newest."""
    async with _letters(bootstrap, service) as (kafka, tp, start, end):
        letters = await _read(kafka, tp, max(start, end - last), end) if last > 0 else []
    return end - start, letters


async def redrive(bootstrap: str, service: str, offset: int) -> tuple[str, int, int]:
    """Publish the record of the letter at ``offset`` again where it came from; returns
    the topic, partition and offset it now has."""
    async with _letters(bootstrap, service) as (kafka, tp, start, end):
        letters = await _read(kafka, tp, offset, offset + 1) if start <= offset < end else []
    if not letters or letters[0].offset != offset:
        held = f"its letters are at {start} to {end - 1}" if end > start else "it is empty"
        raise OperateError(f"{tp.topic} holds no letter at offset {offset}: {held}")
    body = letters[0].body
    source = body.get("topic")
    if source not in REDRIVABLE:
        raise OperateError(
            f"the letter at {offset} holds a record of {source}, which is not re-driven: "
            f"only {' and '.join(REDRIVABLE)} take a record again (engram.events has one "
            "writer; a consumer fixed after a poison event re-reads it by `engram replay`)"
        )
    if not isinstance(body.get("value"), str):
        raise OperateError(f"the letter at {offset} holds no record value to publish")
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        key = body["key"].encode() if isinstance(body.get("key"), str) else None
        sent = await producer.send_and_wait(source, body["value"].encode(), key=key)
    finally:
        await producer.stop()
    return source, sent.partition, sent.offset


@asynccontextmanager
async def _letters(
    bootstrap: str, service: str
) -> AsyncIterator[tuple[AIOKafkaConsumer, TopicPartition, int, int]]:
    """A reader of the service's dead-letter topic, with its first and end offsets."""
    if service not in topics.SERVICES:
        raise OperateError(f"no service {service!r}: one of {', '.join(topics.SERVICES)}")
    tp = TopicPartition(topics.dead_letter_topic(service), 0)
    kafka = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False
    )
    await kafka.start()
    try:
        start = (await kafka.beginning_offsets([tp]))[tp]
        end = (await kafka.end_offsets([tp]))[tp]
        yield kafka, tp, start, end
    finally:
        await kafka.stop()


async def _read(kafka: AIOKafkaConsumer, tp: TopicPartition, start: int, end: int) -> list[Letter]:
    kafka.assign([tp])
    kafka.seek(tp, start)
    letters: list[Letter] = []
    deadline = time.monotonic() + READ_SECONDS
    while await kafka.position(tp) < end:
        if time.monotonic() > deadline:
            raise OperateError(f"{tp.topic} did not answer within {READ_SECONDS:.0f} s")
        batch = await kafka.getmany(tp, timeout_ms=1000)
        for record in batch.get(tp, []):
            if record.offset >= end:
                break
            try:
                body = json.loads(record.value or b"")
            except ValueError:
                body = {"error": "(not a dead letter: not JSON)"}
            service = tp.topic.removeprefix(topics.DLQ_PREFIX)
            letters.append(Letter(service, record.offset, body))
    return letters
