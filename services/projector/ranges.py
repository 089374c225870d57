"""Apply a range of engram.events to a shadow database: the whole log for a replay, and
what the log gained since for a swap."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from contracts import topics
from engram.faults import UNSTORABLE
from engram.kafka import consumer
from engram.stored_offsets import OffsetRow
from services.projector.adapters.shadow import Pool, apply_batch, store_offset
from services.projector.handlers import EventProjector

Progress = Callable[[str], None]


async def apply_range(
    shadow: Pool,
    projector: EventProjector,
    bootstrap: str,
    starts: dict[int, int],
    stops: dict[int, int] | None,
    progress: Progress | None,
    prefix: bytes | None,
    group_id: str | None,
) -> int:
    """Apply each partition's events from ``starts`` to ``stops`` (default: its end as of
    now) into the shadow; with ``group_id``, store the offsets reached with the rows."""
    async with _reading(bootstrap) as events:
        tps = [TopicPartition(topics.EVENTS, p) for p in starts]
        events.assign(tps)
        ends = await events.end_offsets(tps)
        run = _Range(shadow, projector, events, progress, prefix, group_id)
        for tp in tps:
            stop = ends[tp] if stops is None else stops[tp.partition]
            await run.partition(tp, starts[tp.partition], stop)
        return run.count


@contextlib.asynccontextmanager
async def _reading(bootstrap: str) -> AsyncIterator[AIOKafkaConsumer]:
    events = consumer(bootstrap)
    try:
        await events.start()  # in the try: a start that fails halfway is stopped too
        yield events
    finally:
        await events.stop()


@dataclass
class _Range:
    """One ``apply_range``: its reader, where the records go, and how many went."""

    shadow: Pool
    projector: EventProjector
    events: AIOKafkaConsumer
    progress: Progress | None
    prefix: bytes | None
    group_id: str | None
    count: int = 0

    async def partition(self, tp: TopicPartition, start: int, stop: int) -> None:
        self.events.seek(tp, start)
        while (position := await self.events.position(tp)) < stop:
            records = await self._fetch(tp, stop)
            if not records:
                continue
            await self._batch(tp, records)
            if self.progress:
                self.progress(f"partition {tp.partition}: {position}/{stop} ({self.count} events)")
        if self.group_id is not None:  # an empty partition, or one read to its end already
            await self._store_offset(tp, stop)

    async def _fetch(self, tp: TopicPartition, stop: int) -> list[Any]:
        fetched = await self.events.getmany(tp, timeout_ms=500, max_records=2000)
        return [r for r in fetched.get(tp, []) if r.offset < stop]

    async def _batch(self, tp: TopicPartition, records: list[Any]) -> None:
        reached = records[-1].offset + 1
        if self.prefix is not None:  # only the streams of the org being compared
            records = [r for r in records if (r.key or b"").startswith(self.prefix)]
        try:
            await self._apply(tp, records, reached)
        except UNSTORABLE:  # a record Postgres refuses: find it and let it go, as live
            await self._one_by_one(tp, records)
            if self.group_id is not None:
                await self._store_offset(tp, reached)
        self.count += len(records)

    async def _one_by_one(self, tp: TopicPartition, records: list[Any]) -> None:
        for one in records:
            try:
                await self._apply(tp, [one], one.offset + 1)
            except UNSTORABLE as exc:
                await self.projector.dead_letter(one, f"not storable: {exc!r}")

    async def _apply(self, tp: TopicPartition, records: list[Any], reached: int) -> None:
        await apply_batch(
            self.shadow,
            lambda conn: self.projector.handle_batch(conn, records),
            self._offset(tp, reached),
        )

    async def _store_offset(self, tp: TopicPartition, offset: int) -> None:
        if (row := self._offset(tp, offset)) is not None:  # the callers check the group
            await store_offset(self.shadow, row)

    def _offset(self, tp: TopicPartition, offset: int) -> OffsetRow | None:
        """The offset to store with the rows (None: a replay of some orgs stores none)."""
        if self.group_id is None:
            return None
        return (self.group_id, tp.topic, tp.partition, offset)
