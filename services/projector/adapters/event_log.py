"""Reading engram.events for a replay or a swap (``ranges``): a consumer of its own,
assigned the partitions a range covers and moved by partition number, that fetches one
partition's records below where the range stops."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from contracts import topics
from engram.kafka import consumer


@contextlib.asynccontextmanager
async def reading(bootstrap: str) -> AsyncIterator[EventLog]:
    """A reader of engram.events, stopped when the range is done or fails."""
    events = consumer(bootstrap)
    try:
        await events.start()  # in the try: a start that fails halfway is stopped too
        yield EventLog(events)
    finally:
        await events.stop()


class EventLog:
    """The partitions of engram.events a range reads, by number."""

    def __init__(self, events: AIOKafkaConsumer) -> None:
        self._events = events

    async def ends(self, partitions: Iterable[int]) -> dict[int, int]:
        """Assign ``partitions`` to this reader; the offset each ends at as of now."""
        tps = [TopicPartition(topics.EVENTS, p) for p in partitions]
        self._events.assign(tps)
        ends = await self._events.end_offsets(tps)
        return {tp.partition: end for tp, end in ends.items()}

    def seek(self, partition: int, offset: int) -> None:
        self._events.seek(TopicPartition(topics.EVENTS, partition), offset)

    async def position(self, partition: int) -> int:
        return await self._events.position(TopicPartition(topics.EVENTS, partition))

    async def fetch(self, partition: int, stop: int) -> list[Any]:
        """The next records of ``partition`` (none if none came in time), below ``stop``."""
        tp = TopicPartition(topics.EVENTS, partition)
        fetched = await self._events.getmany(tp, timeout_ms=500, max_records=2000)
        return [r for r in fetched.get(tp, []) if r.offset < stop]
