"""The tracked follower with one slow step in front of its transaction.

``TrackedFollower`` runs its handler inside the transaction that stores the
offsets. Embedding is slow (a model run, a remote request with retries), and a
transaction must not stay open across it, so each batch is first *prepared*
(decoded, folded, embedded) with no transaction open, and only the short write
(recheck, vectors, offsets) runs inside it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

import asyncpg

from engram.tracking import Batches, Record, TrackedFollower

P = TypeVar("P")
DeadLetter = Callable[[Record, str], Awaitable[None]]
Prepare = Callable[[list[Record], DeadLetter], Awaitable[P]]
Write = Callable[[asyncpg.Connection, P], Awaitable[None]]


class PreparingFollower(TrackedFollower, Generic[P]):
    def __init__(self, *, prepare: Prepare[P], write: Write[P], **kwargs: Any) -> None:
        super().__init__(handle=self._write_prepared, **kwargs)
        self._prepare, self._write = prepare, write
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
        stored = await self.stored_offsets()
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
