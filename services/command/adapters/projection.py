"""Whether the projector has applied what the log held when a command came.

A promotion's or a fork's source memories, and a link's target in another stream, are read
from the read model, which trails the log by about a projector batch. A fork copies once
and for good, so before such a read the writer waits, for a bounded time, until the
projector holds every event committed on the partitions concerned at that moment.

The projector stores, per partition, the offset after the last event it applied
(``projector.offsets``). That is not the partition's end: a transaction's commit marker
takes an offset but holds no record, and an aborted transaction's records are never
applied. So the gap between the two is read, read committed, one record at most: the
projector has everything once no record lies in it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection

import asyncpg
from aiokafka import AIOKafkaConsumer, TopicPartition

from contracts import topics
from engram.kafka import consumer, stopped_on_failure
from engram.logging import get_logger
from engram.topic_reads import scan

log = get_logger(__name__)


class ProjectionWatch:
    def __init__(
        self,
        pool: asyncpg.Pool,
        bootstrap: str,
        *,
        topic: str = topics.EVENTS,
        group: str,
        timeout: float = 3.0,
        poll: float = 0.01,
    ) -> None:
        self._pool, self._topic, self._group = pool, topic, group
        self._timeout, self._poll = timeout, poll
        # No group: it only looks at offsets, for whichever writer asks.
        self._kafka: AIOKafkaConsumer = consumer(bootstrap, fetch_max_wait_ms=20)
        self._lock = asyncio.Lock()  # one consumer: one question at a time

    async def start(self) -> None:
        # A start that failed after it connected: close the connections.
        async with stopped_on_failure(self._kafka.stop, "projection_watch"):
            await self._kafka.start()

    async def stop(self) -> None:
        await self._kafka.stop()

    async def caught_up(self, partitions: Collection[int]) -> bool:
        """True once the projector has applied every event committed on these partitions
        before the call; False when it has not within the timeout (it is down or far
        behind)."""
        if not partitions:
            return True
        deadline = time.monotonic() + self._timeout
        waiting = [TopicPartition(self._topic, p) for p in sorted(set(partitions))]
        async with self._lock:
            ends = await self._kafka.end_offsets(waiting)  # the log as the command found it
            while True:
                applied = await self._applied(waiting)
                waiting = [tp for tp in waiting if not await self._none_between(tp, applied, ends)]
                if not waiting:
                    return True
                if time.monotonic() >= deadline:
                    log.warning(
                        "projection_behind",
                        partitions=[tp.partition for tp in waiting],
                        applied=[applied.get(tp.partition) for tp in waiting],
                        ends=[ends[tp] for tp in waiting],
                    )
                    return False
                await asyncio.sleep(self._poll)

    async def _applied(self, tps: list[TopicPartition]) -> dict[int, int]:
        rows = await self._pool.fetch(
            "SELECT partition, next_offset FROM projector.offsets "
            "WHERE consumer = $1 AND topic = $2 AND partition = ANY($3)",
            self._group,
            self._topic,
            [tp.partition for tp in tps],
        )
        return {r["partition"]: r["next_offset"] for r in rows}

    async def _none_between(
        self, tp: TopicPartition, applied: dict[int, int], ends: dict[TopicPartition, int]
    ) -> bool:
        """No committed record from the projector's next offset to the end."""
        start = applied.get(tp.partition)
        if start is None:  # it has applied nothing there yet: from the log's start
            start = (await self._kafka.beginning_offsets([tp]))[tp]
        # A committed record in the gap is one the projector has still to apply.
        count, read, _ = await scan(self._kafka, tp, start, ends[tp], at_most=1, seconds=0.2)
        return read and count == 0
