"""A Kafka follower that stores its offsets in Postgres, with the rows it writes.

The tracking record commits in the same transaction as the projection, so a
crash can never apply a batch without moving the offset, or move it without
applying. On assignment each partition seeks to its stored offset; the Kafka
group is used only to share partitions among replicas.

A fetch is applied in one transaction, whatever partitions it holds (one handler call,
one commit, the offsets of all of them). Only a parallel follower with a large fetch
splits it: one transaction per partition, applied concurrently. A follower may also have
a one-statement path (``one_statement``) that applies a fetch and stores its offsets in a
single statement, without a transaction of its own, when it can; when it cannot (it has
written nothing), the fetch takes the transaction.

``PreparingFollower`` puts a step in front of that: each fetch is first *prepared*
(decoded, and for the indexer folded and embedded) with no transaction open, once; its
one-statement path and its write then both take the prepared batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Generic, TypeVar

import asyncpg
from aiokafka import ConsumerRebalanceListener, TopicPartition
from prometheus_client import Counter

from engram.dead_lettering import DeadLettering
from engram.faults import UNSTORABLE, of_the_moment
from engram.kafka import broker_answers, consumer
from engram.logging import get_logger
from engram.stored_offsets import OFFSETS_UPSERT as OFFSETS_UPSERT  # the projector stores too
from engram.stored_offsets import RECOVERY_FIRST_SECONDS, OffsetRow, StoredOffsets

log = get_logger(__name__)

# On every follower's /metrics (the projector's, the indexer's, the extractor's).
APPLIED = Counter("engram_records_applied_total", "Records applied, offsets stored", ["service"])
Record = Any  # aiokafka.ConsumerRecord[bytes, bytes]
# The records of one fetch (of one or several partitions), in one transaction.
BatchHandler = Callable[[asyncpg.Connection, list[Record]], Awaitable[None]]
Batches = dict[TopicPartition, list[Record]]
# Apply the records and store the offsets in one statement; False when it wrote nothing.
OneStatement = Callable[[asyncpg.Connection, list[Record], list[OffsetRow]], Awaitable[bool]]
P = TypeVar("P")
DeadLetter = Callable[[Record, str], Awaitable[None]]
Prepare = Callable[[list[Record], DeadLetter], Awaitable[P]]
Write = Callable[[asyncpg.Connection, P], Awaitable[None]]
PreparedOneStatement = Callable[[asyncpg.Connection, P, list[OffsetRow]], Awaitable[bool]]


class PoisonMessageError(Exception):
    """A record that can never be applied: it goes to the dead-letter topic."""


class _Seek(ConsumerRebalanceListener):
    def __init__(self, follower: TrackedFollower) -> None:
        self._f = follower

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        async with self._f.lock:  # let the batch in flight finish first
            log.info("partitions_revoked", partitions=[tp.partition for tp in revoked])

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        # aiokafka starts fetching (from the group's offset: none, so 0) as soon as the
        # assignment exists: pause before the first await, seek, then resume.
        self._f.consumer.pause(*assigned)
        offsets = await self._f.seek_stored(assigned)
        self._f.consumer.resume(*assigned)
        log.info("partitions_assigned", partitions=sorted(offsets), offsets=offsets)


class TrackedFollower:
    """Follows ``topic`` as ``group_id``: each fetch applied by ``handle`` (or
    ``one_statement``), its offsets stored in ``offsets_table`` in the same transaction.

    ``parallel``: split a fetch of more than ``split_above`` records into one
    transaction per partition, applied concurrently; only for a handler whose writes
    never share rows across partitions (and the pool needs a connection per partition,
    plus what the handler takes). A smaller fetch is one transaction: under a light
    load a fetch holds a few records of several partitions, and one commit for all of
    them costs less than one each.

    ``gather_ms``: let the broker hold each fetch until a megabyte has gathered or this
    long has passed (0: answer as soon as anything arrives). For a follower nobody
    waits on: under a light load it wakes a few times a second instead of for every
    transaction, which saves the broker and itself several milliseconds of CPU each."""

    def __init__(
        self,
        *,
        bootstrap: str,
        topic: str,
        group_id: str,
        pool: asyncpg.Pool,
        offsets_table: str,
        service: str,
        handle: BatchHandler,
        max_batch: int = 1000,
        parallel: bool = False,
        split_above: int = 200,
        gather_ms: int = 0,
        one_statement: OneStatement | None = None,
    ) -> None:
        self.lock = asyncio.Lock()
        self.topic = topic
        gather = {"fetch_min_bytes": 1 << 20, "fetch_max_wait_ms": gather_ms} if gather_ms else {}
        self.consumer = consumer(bootstrap, group_id=group_id, max_poll_records=max_batch, **gather)
        self._letters = DeadLettering(bootstrap, service)
        self._pool, self._service = pool, service
        self._stored = StoredOffsets(
            pool, table=offsets_table, group=group_id, topic=topic, service=service
        )
        self._handle, self._one_statement = handle, one_statement
        self._max_batch, self._parallel, self._split_above = max_batch, parallel, split_above
        self.applied = 0
        self.positions: dict[int, int] = {}
        self.next_offset: dict[TopicPartition, int] = {}

    async def run(self) -> None:
        try:
            # Inside the try: a start that fails, or is cancelled while the group assigns
            # partitions, still stops both clients (their stop is safe before a start).
            await self._letters.producer.start()
            self.consumer.subscribe([self.topic], listener=_Seek(self))
            await self.consumer.start()
            while True:
                fetched = await self.consumer.getmany(timeout_ms=200, max_records=self._max_batch)
                async with self.lock:
                    # A fetch that raced the seek may hand back records already applied.
                    done = self.next_offset
                    batches = {
                        tp: fresh
                        for tp, records in fetched.items()
                        if (fresh := [r for r in records if r.offset >= done.get(tp, 0)])
                    }
                    if not batches:
                        continue
                    self._letters.next_fetch()
                    try:
                        try:
                            await self._apply_fetch(batches)
                        except* UNSTORABLE:  # some record's data: find it, and let it go
                            await self._one_by_one(batches)
                    except Exception as exc:
                        if not of_the_moment(exc):
                            raise
                        await self._recover(exc)
        finally:
            await self.consumer.stop()
            await self._letters.producer.stop()

    async def _recover(self, fault: BaseException) -> None:
        """After a fault of the moment (the database restarting, a connection cut, the
        broker away), wait for the database, then go back to the offsets it stored: they
        are the truth. A commit whose answer was lost may or may not have happened, and a
        crash of Postgres may have lost the last commits; the consumer's own position would
        skip what they held (QA: a killed backend's crash recovery left a gap for good, and
        the follower's task died, taking its service down)."""
        log.warning("follower_fault_of_the_moment", service=self._service, error=repr(fault)[:300])
        await asyncio.sleep(RECOVERY_FIRST_SECONDS)
        offsets = await self.seek_stored(self.consumer.assignment())
        log.info("follower_recovered", service=self._service, offsets=offsets)

    async def seek_stored(self, partitions: Iterable[TopicPartition]) -> dict[int, int]:
        """Put these partitions at their stored offsets (0 for one never stored), once the
        database answers; the offsets, by partition."""
        stored = await self._stored.read_when_readable()
        offsets = {}
        for tp in partitions:
            offsets[tp.partition] = offset = stored.get(tp.partition, 0)
            self.next_offset[tp] = self.positions[tp.partition] = offset
            self.consumer.seek(tp, offset)
        return offsets

    async def _apply_fetch(self, batches: Batches) -> None:
        large = sum(map(len, batches.values())) > self._split_above
        if self._parallel and large and len(batches) > 1:
            # A failure cancels the others: their transactions roll back.
            async with asyncio.TaskGroup() as group:
                for tp, records in batches.items():
                    group.create_task(self._apply({tp: records}))
        else:
            await self._apply(batches)

    async def _one_by_one(self, batches: Batches) -> None:
        """A fetch Postgres refused for what a record holds: each record not yet applied is
        applied alone, and one Postgres refuses is dead-lettered, its offset stored, so the
        follower goes on (a record another producer wrote, past what the decoders bound)."""
        for tp, records in batches.items():
            for record in records:
                if record.offset < self.next_offset.get(tp, 0):
                    continue  # applied before the failure, in another partition's batch
                try:
                    await self._apply({tp: [record]})
                except UNSTORABLE as exc:
                    await self.dead_letter(record, f"not storable: {exc!r}")
                    async with self._pool.acquire() as conn:
                        await self._stored.store(conn, [self._stored.row(tp, record.offset + 1)])
                    self.positions[tp.partition] = self.next_offset[tp] = record.offset + 1

    async def _apply(self, batches: Batches) -> None:
        """The records and each partition's offset: in one statement when the follower has
        a one-statement path that takes them, else in one transaction with the handler."""
        records = [r for part in batches.values() for r in part]
        offsets = [self._stored.row(tp, part[-1].offset + 1) for tp, part in batches.items()]
        async with self._pool.acquire() as conn:
            fast = self._one_statement
            if fast is None or not await fast(conn, records, offsets):
                async with conn.transaction():
                    await self._handle(conn, records)
                    await self._stored.store(conn, offsets)
        self.applied += len(records)
        APPLIED.labels(self._service).inc(len(records))
        for tp, part in batches.items():
            self.positions[tp.partition] = self.next_offset[tp] = part[-1].offset + 1

    async def broker_answers(self) -> bool:
        return await broker_answers(self.consumer)

    async def dead_letter(self, record: Record, error: str) -> None:
        """Publish a poison record with its error before its offset is stored; once."""
        await self._letters.send(record, error)


class PreparingFollower(TrackedFollower, Generic[P]):
    """A follower whose fetches are prepared once, outside the transaction: ``write``
    (in the transaction, with the offsets) and ``one_statement`` (if given) both take the
    prepared batch. ``prepare`` publishes its dead letters before the offset is stored."""

    def __init__(
        self,
        *,
        prepare: Prepare[P],
        write: Write[P],
        one_statement: PreparedOneStatement[P] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            handle=self._write_prepared,
            one_statement=self._one_statement_prepared if one_statement else None,
            **kwargs,
        )
        self._prepare, self._write = prepare, write
        self._one_prepared = one_statement
        # What each transaction in flight writes, by its first record (one per fetch, or
        # per partition when a parallel follower splits a large fetch).
        self._prepared: dict[tuple[str, int, int], P] = {}

    async def _apply(self, batches: Batches) -> None:
        records = [r for part in batches.values() for r in part]
        # Dead letters are published here, before the batch's offset is stored.
        key = _first(records)
        self._prepared[key] = await self._prepare(records, self.dead_letter)
        try:
            await super()._apply(batches)
        finally:
            self._prepared.pop(key, None)

    async def _write_prepared(self, conn: asyncpg.Connection, records: list[Record]) -> None:
        await self._write(conn, self._prepared[_first(records)])

    async def _one_statement_prepared(
        self, conn: asyncpg.Connection, records: list[Record], offsets: list[OffsetRow]
    ) -> bool:
        assert self._one_prepared is not None
        return await self._one_prepared(conn, self._prepared[_first(records)], offsets)

    async def lag(self) -> dict[int, int]:
        """Records between each assigned partition's position and its end (last stable offset).

        A transaction's commit marker takes an offset but carries no record, so the last
        applied record is one short of the end for good; an idle follower therefore counts
        from the consumer's position, which has stepped over the markers.
        """
        assigned = list(self.consumer.assignment())
        if not assigned:
            return {}
        ends = await self.consumer.end_offsets(assigned)
        stored = await self._stored.read()
        busy = self.lock.locked()  # a fetched batch is being applied: count it as lag
        lag: dict[int, int] = {}
        for tp in assigned:
            position = self.positions.get(tp.partition, stored.get(tp.partition, 0))
            if not busy:
                position = max(position, await self.consumer.position(tp))
            lag[tp.partition] = max(0, ends[tp] - position)
        return lag


def _first(records: list[Record]) -> tuple[str, int, int]:
    return (records[0].topic, records[0].partition, records[0].offset)
