"""What an operator asks of a running Engram from outside it: how far behind each
consumer is, and what is in the dead-letter topics (DESIGN §8).

Lag: the command service's group keeps its offsets in Kafka; the projector, the indexer
and the extractor keep theirs in Postgres (``<service>.offsets``, written with their rows).
Each is measured against its topic's last stable offset, and the gap is then counted in
records: a transaction's commit marker takes an offset but holds no record, so a consumer
that has applied everything sits one offset short of the end for good. A consumer that is
no service's (a test's, a tool's) is told apart from the services' groups.

Dead letters: a letter (``engram.kafka.dead_letter``) carries the original record's bytes,
where it came from and the error; they are counted as records too (a letter written in a
transaction is followed by its marker). One whose record came from an input topic
(``engram.commands``, ``engram.conversations``) can be re-driven: published there again,
with its key, where command ids and turn ids make a second delivery harmless. An event is
never published again: ``engram.events`` has one writer; a consumer fixed after a poison
event re-reads it by a replay.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
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
    service: str | None  # whose group it is; None: no service's (a test's, a tool's)
    stored_in: str  # where its offsets are: "kafka" or "<schema>.offsets"
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


@dataclass(frozen=True)
class DeadLetters:
    topic: str
    count: int  # letters (read committed); offsets, markers included, when not exact
    exact: bool
    newest: list[Letter]


class OperateError(Exception):
    """A request an operator can correct: named service, offset or letter."""


@dataclass(frozen=True)
class _Position:
    stored_in: str
    consumer: str
    topic: str
    partition: int
    at: int


async def consumer_lag(
    bootstrap: str, database_url: str, *, groups: Mapping[str, str]
) -> list[Lag]:
    """Each consumer's lag on every partition of the topics it reads; a partition it has
    stored no offset for yet it reads from the start. ``groups`` maps the services' group
    ids to their services: any other consumer (a test's left behind, a tool's) comes after
    them, with no service."""
    command = next((g for g, s in groups.items() if s == "command"), COMMAND_GROUP)
    positions = await _postgres_positions(database_url) + await _command_positions(
        bootstrap, command
    )
    existing = await _topics(bootstrap)  # an offset row may outlive its topic
    positions = [p for p in positions if p.topic in existing]
    if not positions:
        return []
    kafka = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False
    )
    await kafka.start()
    try:
        positions += await _unstored(kafka, bootstrap, positions)
        tps = sorted({TopicPartition(p.topic, p.partition) for p in positions})
        ends = await kafka.end_offsets(tps) if tps else {}
        out = []
        for p in sorted(positions, key=lambda p: (p.consumer not in groups, _key(p))):
            tp = TopicPartition(p.topic, p.partition)
            behind, exact = await _records_between(kafka, tp, p.at, ends[tp])
            where = (p.consumer, groups.get(p.consumer), p.stored_in, p.topic, p.partition)
            out.append(Lag(*where, p.at, ends[tp], behind, exact))
        return out
    finally:
        await kafka.stop()


def _key(p: _Position) -> tuple[str, str, int]:
    return p.consumer, p.topic, p.partition


async def _unstored(
    kafka: AIOKafkaConsumer, bootstrap: str, positions: list[_Position]
) -> list[_Position]:
    """The partitions of a consumer's topics it has stored no offset for: at their start."""
    stored = {(p.consumer, p.topic, p.partition) for p in positions}
    out = []
    for where, consumer, topic in sorted({(p.stored_in, p.consumer, p.topic) for p in positions}):
        parts = [TopicPartition(topic, n) for n in range(await partition_count(bootstrap, topic))]
        starts = await kafka.beginning_offsets(parts)
        out += [
            _Position(where, consumer, topic, tp.partition, starts[tp])
            for tp in parts
            if (consumer, topic, tp.partition) not in stored
        ]
    return out


async def _postgres_positions(database_url: str) -> list[_Position]:
    conn = await asyncpg.connect(database_url)
    try:
        out = []
        for schema in POSTGRES_TRACKED:
            if await conn.fetchval("SELECT to_regclass($1)", f"{schema}.offsets") is None:
                continue  # that service has never started against this database
            rows = await conn.fetch(
                f"SELECT consumer, topic, partition, next_offset FROM {schema}.offsets"
            )
            out += [
                _Position(f"{schema}.offsets", *r.values())  # consumer, topic, partition, next
                for r in rows
            ]
        return out
    finally:
        await conn.close()


async def _command_positions(bootstrap: str, group: str) -> list[_Position]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        # A fresh broker makes its offsets topic when a group is first looked up, and
        # answers "no coordinator" until it has.
        deadline = time.monotonic() + READ_SECONDS
        while True:
            try:
                committed = await admin.list_consumer_group_offsets(group)
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
        _Position("kafka", group, tp.topic, tp.partition, meta.offset)
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
    """Records between two offsets, counted exactly when there are at most COUNT_AT_MOST
    offsets and they are read within READ_SECONDS; else the offsets, and False."""
    if end - start > COUNT_AT_MOST:
        return end - start, False
    count, done, _ = await _scan(kafka, tp, start, end)
    return (count, True) if done else (end - start, False)


async def _scan(
    kafka: AIOKafkaConsumer, tp: TopicPartition, start: int, end: int, keep: int = 0
) -> tuple[int, bool, list[ConsumerRecord[bytes, bytes]]]:
    """Read the records (committed ones, as the consumer was made) at ``start`` to
    ``end - 1``: how many there are, whether all were read within READ_SECONDS, and the
    last ``keep`` of them."""
    if end <= start:
        return 0, True, []
    kafka.assign([tp])
    kafka.seek(tp, start)
    count, kept = 0, deque[ConsumerRecord[bytes, bytes]](maxlen=keep)
    deadline = time.monotonic() + READ_SECONDS
    # A fetch steps over markers and aborted records, so the position reaches the end.
    while await kafka.position(tp) < end:
        if time.monotonic() > deadline:
            return count, False, list(kept)
        batch = await kafka.getmany(tp, timeout_ms=1000, max_records=1000)
        records = [r for r in batch.get(tp, []) if r.offset < end]
        count += len(records)
        kept.extend(records)
    return count, True, list(kept)


async def dead_letters(bootstrap: str, service: str, last: int) -> DeadLetters:
    """How many letters the service's dead-letter topic holds, and the ``last`` newest."""
    return await letters_in(bootstrap, _dead_letter_topic(service), last)


def _dead_letter_topic(service: str) -> str:
    if service not in topics.SERVICES:
        raise OperateError(f"no service {service!r}: one of {', '.join(topics.SERVICES)}")
    return topics.dead_letter_topic(service)


async def letters_in(bootstrap: str, topic: str, last: int) -> DeadLetters:
    """The letters of a dead-letter topic: counted as records, not offsets (a letter
    written in a transaction is followed by its commit marker), as ``engram lag`` counts,
    within the same bounds; past them, the offsets, and the count says it is not exact."""
    if last < 0:
        raise OperateError(f"the number of letters to show is 0 or more, not {last}")
    async with _reader(bootstrap, topic) as (kafka, tp, start, end):
        if end - start <= COUNT_AT_MOST:
            count, done, kept = await _scan(kafka, tp, start, end, keep=last)
            if done:
                return DeadLetters(topic, count, True, [_letter(tp, r) for r in kept])
        newest = await _newest(kafka, tp, start, end, last)
        return DeadLetters(topic, end - start, False, [_letter(tp, r) for r in newest])


async def _newest(
    kafka: AIOKafkaConsumer, tp: TopicPartition, start: int, end: int, last: int
) -> list[ConsumerRecord[bytes, bytes]]:
    """The ``last`` newest records, read back from the end twice as far each time: a
    marker or an aborted record takes an offset too."""
    span = 2 * last
    while last > 0:
        since = max(start, end - span)
        _, done, kept = await _scan(kafka, tp, since, end, keep=last)
        if not done:
            raise OperateError(f"{tp.topic} did not answer within {READ_SECONDS:.0f} s")
        if len(kept) >= last or since == start:
            return kept
        span *= 2
    return []


async def redrive(bootstrap: str, service: str, offset: int) -> tuple[str, int, int]:
    """Publish the record of the letter at ``offset`` again where it came from; returns
    the topic, partition and offset it now has."""
    async with _reader(bootstrap, _dead_letter_topic(service)) as (kafka, tp, start, end):
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
async def _reader(
    bootstrap: str, topic: str
) -> AsyncIterator[tuple[AIOKafkaConsumer, TopicPartition, int, int]]:
    """A reader of a dead-letter topic (one partition), with its first and end offsets."""
    tp = TopicPartition(topic, 0)
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
    _, done, records = await _scan(kafka, tp, start, end, keep=end - start)
    if not done:
        raise OperateError(f"{tp.topic} did not answer within {READ_SECONDS:.0f} s")
    return [_letter(tp, r) for r in records]


def _letter(tp: TopicPartition, record: ConsumerRecord[bytes, bytes]) -> Letter:
    try:
        body = json.loads(record.value or b"")
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {"error": "(not a dead letter: not a JSON object)"}
    return Letter(tp.topic.removeprefix(topics.DLQ_PREFIX), record.offset, body)
