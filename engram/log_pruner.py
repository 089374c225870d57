"""Deletes from an input topic what its one reader has already handled.

Two topics carry a person's words in plain: a Kafka caller's command on engram.commands,
and a conversation turn on engram.conversations. Kafka's log is immutable, so a forgotten
memory's text would stay in their segment files until retention (a week) removed them.
Once handled, a record is of no more use (a command's text is in its events, sealed; a
turn's proposals are commands of their own), so every pass of a pruner, per partition,

1. advances the partition's log start to the reader's committed offset (DeleteRecords);
   the broker deletes every segment wholly below it at its next retention check
   (``log.retention.check.interval.ms``) and the file a second later (the topic's
   ``file.delete.delay.ms``);
2. appends a roll marker (``contracts.topics.ROLL_MARKER_HEADER``) while records it has
   handled may still lie in an open segment. A segment is deleted only once it is closed,
   and the broker closes the active one only when a record arrives ``segment.ms`` or more
   after the segment's first; the marker is that record. So the pruner appends one on every
   pass until one went a segment's age after it first saw those records handled (they were
   appended before that, so their segment is that old; QA: a single marker sent sooner
   landed in the same open segment, which then stayed on a quiet partition for good). The
   reader commits the marker's offset and does nothing else with it.

So a handled record is off the disk within a segment's age plus about two passes and the
broker's check; an unhandled one is never deleted. Only the one reader is waited for: each
of these topics has no other.
"""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable

import asyncpg
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from aiokafka.errors import KafkaError

from contracts import topics
from engram.kafka import partition_count, stopped_on_failure
from engram.logging import get_logger

log = get_logger(__name__)


class LogPruner(ABC):
    """Prunes one topic up to where its reader has committed (``committed``)."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        segment_ms: int = topics.PRUNED_SEGMENT_MS,
        clock: Callable[[], float] = time.monotonic,
        kafka: tuple[AIOKafkaAdminClient, AIOKafkaProducer] | None = None,
    ) -> None:
        self._bootstrap = bootstrap
        self.topic = topic
        self._segment_s = segment_ms / 1000  # the topic's segment.ms
        self._clock = clock
        self._admin, self._producer = kafka or (
            AIOKafkaAdminClient(bootstrap_servers=bootstrap),
            AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True),
        )
        self._pruned: dict[int, int] = {}  # partition -> log start this pruner set
        # partition -> the offset below which every record's segment is closed (by a marker
        # this pruner appended), and when handled records past it were first seen
        self._rolled: dict[int, int] = {}
        self._seen: dict[int, float] = {}

    @abstractmethod
    async def committed(self, partitions: list[int]) -> dict[int, int]:
        """The reader's committed offsets (the next it reads), of those of these partitions
        it has committed."""

    async def start(self) -> None:
        """A start that fails closes what it had opened (the admin client, when the
        producer does not start), before the error goes on."""
        async with stopped_on_failure(self.stop, "log_pruner"):
            await self._admin.start()
            await self._producer.start()

    async def stop(self) -> None:
        try:
            await self._producer.stop()
        finally:  # a producer that fails to stop leaves no admin client open
            await self._admin.close()

    async def all_partitions(self) -> list[int]:
        return list(range(await partition_count(self._bootstrap, self.topic)))

    async def prune_once(self, partitions: Iterable[int]) -> dict[int, int]:
        """One pass over these partitions; returns each one's log start as set now."""
        wanted = list(partitions)
        handled = await self.committed(wanted) if wanted else {}
        if deletable := {
            TopicPartition(self.topic, p): RecordsToDelete(offset)
            for p, offset in handled.items()
            if offset > self._pruned.get(p, 0)
        }:
            started = await self._admin.delete_records(deletable)
            for tp, low in started.items():
                self._pruned[tp.partition] = low
        for p, offset in handled.items():
            if offset <= self._rolled.get(p, 0):
                continue  # their segments are closed
            seen = self._seen.setdefault(p, self._clock())
            sent = await self._producer.send_and_wait(
                self.topic,
                b"",
                partition=p,
                headers=[(topics.ROLL_MARKER_HEADER, b"1")],
            )
            if self._clock() - seen >= self._segment_s:  # it came a segment's age after
                self._rolled[p] = sent.offset + 1  # the marker itself opened a segment
                del self._seen[p]
        return {p: self._pruned[p] for p in handled if p in self._pruned}

    async def run(self, period: float, owned: Callable[[], Iterable[int]]) -> None:
        """A pass every ``period`` seconds over the partitions ``owned`` names. A failed
        pass is logged and the next one tries again: nothing is deleted that the reader
        has not committed, so a missed pass only delays the deletion."""
        while True:
            await asyncio.sleep(period)
            try:
                if pruned := await self.prune_once(sorted(owned())):
                    log.debug("topic_pruned", topic=self.topic, log_start=pruned)
            except KafkaError as exc:
                log.warning("topic_prune_failed", topic=self.topic, error=str(exc))


class GroupLogPruner(LogPruner):
    """A pruner of a topic whose reader commits its offsets to Kafka, as a group (the
    command service, of engram.commands)."""

    def __init__(
        self, bootstrap: str, topic: str, group_id: str, segment_ms: int = topics.PRUNED_SEGMENT_MS
    ) -> None:
        super().__init__(bootstrap, topic, segment_ms)
        self._group_id = group_id

    async def committed(self, partitions: list[int]) -> dict[int, int]:
        tps = [TopicPartition(self.topic, p) for p in partitions]
        offsets = await self._admin.list_consumer_group_offsets(self._group_id, partitions=tps)
        return {tp.partition: c.offset for tp, c in offsets.items() if c.offset >= 0}


class TableLogPruner(LogPruner):
    """A pruner of a topic whose reader stores its offsets in Postgres with what it wrote
    (a ``TrackedFollower``: the extractor, of engram.conversations)."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        pool: asyncpg.Pool,
        offsets_table: str,
        consumer: str,
        segment_ms: int = topics.PRUNED_SEGMENT_MS,
    ) -> None:
        super().__init__(bootstrap, topic, segment_ms)
        self._pool = pool
        self._query = (
            f"SELECT partition, next_offset FROM {offsets_table} "
            "WHERE consumer = $1 AND topic = $2 AND partition = ANY($3::integer[])"
        )
        self._consumer = consumer

    async def committed(self, partitions: list[int]) -> dict[int, int]:
        rows = await self._pool.fetch(self._query, self._consumer, self.topic, partitions)
        return {r["partition"]: r["next_offset"] for r in rows}
