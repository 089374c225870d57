"""What an operator asks of a running Engram from outside it: how far behind each
consumer is (DESIGN §8; the dead-letter topics are ``engram.letters``'s).

Lag: the command service's group keeps its offsets in Kafka; the projector, the indexer
and the extractor keep theirs in Postgres (``<service>.offsets``, written with their rows).
Each is measured against its topic's last stable offset, and the gap is then counted in
records: a transaction's commit marker takes an offset but holds no record, so a consumer
that has applied everything sits one offset short of the end for good. A consumer that is
no service's (a test's, a tool's) is told apart from the services' groups.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import GroupCoordinatorNotAvailableError

from contracts import topics
from engram.db import connect
from engram.kafka import partition_count
from engram.topic_reads import READ_SECONDS, OperateError, records_between

# Consumers that keep their offsets in Postgres, by the schema that holds them.
POSTGRES_TRACKED = ("projector", "indexer", "extractor")
COMMAND_GROUP = "engram-command"


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
class _Position:
    stored_in: str
    consumer: str
    topic: str
    partition: int
    at: int


async def consumer_lag(
    bootstrap: str,
    database_url: str,
    *,
    groups: Mapping[str, str],
    expected: Collection[tuple[str, str, str]] = (),
) -> list[Lag]:
    """Each consumer's lag on every partition of the topics it reads; a partition it has
    stored no offset for yet it reads from the start. ``groups`` maps the services' group
    ids to their services: any other consumer (a test's left behind, a tool's) comes after
    them, with no service."""
    command = next((g for g, s in groups.items() if s == "command"), COMMAND_GROUP)
    stored, tables = await _postgres_positions(database_url)
    positions = stored + await _command_positions(bootstrap, command)
    existing = await _topics(bootstrap)  # an offset row may outlive its topic
    positions = [p for p in positions if p.topic in existing]
    if not positions and not any(e[0] in tables and e[2] in existing for e in expected):
        return []
    kafka = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False
    )
    try:
        await kafka.start()  # in the try: a start that fails halfway is stopped too
        positions += await _unstored(kafka, bootstrap, positions, expected, tables, existing)
        tps = sorted({TopicPartition(p.topic, p.partition) for p in positions})
        ends = await kafka.end_offsets(tps) if tps else {}
        out = []
        for p in sorted(positions, key=lambda p: (p.consumer not in groups, _key(p))):
            tp = TopicPartition(p.topic, p.partition)
            behind, exact = await records_between(kafka, tp, p.at, ends[tp])
            where = (p.consumer, groups.get(p.consumer), p.stored_in, p.topic, p.partition)
            out.append(Lag(*where, p.at, ends[tp], behind, exact))
        return out
    finally:
        await kafka.stop()


def _key(p: _Position) -> tuple[str, str, int]:
    return p.consumer, p.topic, p.partition


async def _unstored(
    kafka: AIOKafkaConsumer,
    bootstrap: str,
    positions: list[_Position],
    expected: Collection[tuple[str, str, str]],
    tables: set[str],
    existing: set[str],
) -> list[_Position]:
    """The partitions of a consumer's topics it has stored no offset for: at their start;
    ``expected`` (offsets table, consumer, topic) counts too, once its table exists (QA: the
    extractor's consumer of turns was missing until it had handled one)."""
    stored = {(p.consumer, p.topic, p.partition) for p in positions}
    read = {(p.stored_in, p.consumer, p.topic) for p in positions}
    read |= {e for e in expected if e[0] in tables and e[2] in existing}
    out = []
    for where, consumer, topic in sorted(read):
        parts = [TopicPartition(topic, n) for n in range(await partition_count(bootstrap, topic))]
        starts = await kafka.beginning_offsets(parts)
        out += [
            _Position(where, consumer, topic, tp.partition, starts[tp])
            for tp in parts
            if (consumer, topic, tp.partition) not in stored
        ]
    return out


async def _postgres_positions(database_url: str) -> tuple[list[_Position], set[str]]:
    """The offsets stored in Postgres, and the offsets tables that exist."""
    conn = await connect(database_url)
    try:
        out, tables = [], set()
        for schema in POSTGRES_TRACKED:
            if await conn.fetchval("SELECT to_regclass($1)", f"{schema}.offsets") is None:
                continue  # that service has never started against this database
            tables.add(f"{schema}.offsets")
            rows = await conn.fetch(
                f"SELECT consumer, topic, partition, next_offset FROM {schema}.offsets"
            )
            out += [
                _Position(f"{schema}.offsets", *r.values())  # consumer, topic, partition, next
                for r in rows
            ]
        return out, tables
    finally:
        await conn.close()


async def _command_positions(bootstrap: str, group: str) -> list[_Position]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        await admin.start()  # in the try: a start that fails halfway is stopped too
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
    try:
        await admin.start()  # in the try: a start that fails halfway is stopped too
        return set(await admin.list_topics())
    finally:
        await admin.close()
