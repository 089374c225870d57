"""Apply a range of engram.events to a shadow database: the whole log for a replay, and
what the log gained since for a swap."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from contracts import topics
from engram.faults import UNSTORABLE
from engram.stored_offsets import OffsetRow
from services.projector.adapters.event_log import EventLog, reading
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
    async with reading(bootstrap) as events:
        ends = await events.ends(starts)
        run = _Range(shadow, projector, events, progress, prefix, group_id)
        for partition, start in starts.items():
            stop = ends[partition] if stops is None else stops[partition]
            await run.partition(partition, start, stop)
        return run.count


@dataclass
class _Range:
    """One ``apply_range``: its reader, where the records go, and how many went."""

    shadow: Pool
    projector: EventProjector
    events: EventLog
    progress: Progress | None
    prefix: bytes | None
    group_id: str | None
    count: int = 0

    async def partition(self, partition: int, start: int, stop: int) -> None:
        self.events.seek(partition, start)
        while (position := await self.events.position(partition)) < stop:
            records = await self.events.fetch(partition, stop)
            if not records:
                continue
            await self._batch(partition, records)
            if self.progress:
                self.progress(f"partition {partition}: {position}/{stop} ({self.count} events)")
        if self.group_id is not None:  # an empty partition, or one read to its end already
            await self._store_offset(partition, stop)

    async def _batch(self, partition: int, records: list[Any]) -> None:
        reached = records[-1].offset + 1
        if self.prefix is not None:  # only the streams of the org being compared
            records = [r for r in records if (r.key or b"").startswith(self.prefix)]
        try:
            await self._apply(partition, records, reached)
        except UNSTORABLE:  # a record Postgres refuses: find it and let it go, as live
            await self._one_by_one(partition, records)
            if self.group_id is not None:
                await self._store_offset(partition, reached)
        self.count += len(records)

    async def _one_by_one(self, partition: int, records: list[Any]) -> None:
        for one in records:
            try:
                await self._apply(partition, [one], one.offset + 1)
            except UNSTORABLE as exc:
                await self.projector.dead_letter(one, f"not storable: {exc!r}")

    async def _apply(self, partition: int, records: list[Any], reached: int) -> None:
        await apply_batch(
            self.shadow,
            lambda conn: self.projector.handle_batch(conn, records),
            self._offset(partition, reached),
        )

    async def _store_offset(self, partition: int, offset: int) -> None:
        if (row := self._offset(partition, offset)) is not None:  # the callers check the group
            await store_offset(self.shadow, row)

    def _offset(self, partition: int, offset: int) -> OffsetRow | None:
        """The offset to store with the rows (None: a replay of some orgs stores none)."""
        if self.group_id is None:
            return None
        return (self.group_id, topics.EVENTS, partition, offset)
