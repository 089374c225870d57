"""Where a follower resumes: the offsets it stores in Postgres with the rows it writes.

They are the truth, not the Kafka group's offsets: a follower reads them at each
assignment and after a fault of the moment, and while the database is away it waits for
them rather than fetch from anywhere else.
"""

from __future__ import annotations

import asyncio

import asyncpg
from aiokafka import TopicPartition

from engram.faults import of_the_moment
from engram.logging import get_logger

log = get_logger(__name__)

OffsetRow = tuple[str, str, int, int]  # consumer (the group id), topic, partition, next offset
# How long a follower waits after a fault of the moment before it reads its stored offsets
# again, doubling while the database stays away.
RECOVERY_FIRST_SECONDS = 0.5
RECOVERY_MAX_SECONDS = 10.0
OFFSETS_UPSERT = (
    "INSERT INTO {table} (consumer, topic, partition, next_offset) "
    "VALUES ($1, $2, $3, $4) ON CONFLICT (consumer, topic, partition) "
    "DO UPDATE SET next_offset = EXCLUDED.next_offset, updated_at = now()"
)


class StoredOffsets:
    """One consumer group's stored offsets of one topic, in ``table``."""

    def __init__(
        self, pool: asyncpg.Pool, *, table: str, group: str, topic: str, service: str
    ) -> None:
        self._pool = pool
        self._table = table
        self._group = group
        self._topic = topic
        self._service = service

    def row(self, tp: TopicPartition, next_offset: int) -> OffsetRow:
        return (self._group, tp.topic, tp.partition, next_offset)

    async def store(self, conn: asyncpg.Connection, rows: list[OffsetRow]) -> None:
        await conn.executemany(OFFSETS_UPSERT.format(table=self._table), rows)

    async def read(self) -> dict[int, int]:
        """The next offset of each partition stored, by partition."""
        rows = await self._pool.fetch(
            f"SELECT partition, next_offset FROM {self._table} WHERE consumer = $1 AND topic = $2",
            self._group,
            self._topic,
        )
        return {r["partition"]: r["next_offset"] for r in rows}

    async def read_when_readable(self) -> dict[int, int]:
        """The stored offsets, waiting out a fault of the moment (0.5 s, doubling to 10 s):
        a partition assigned while the database is away stays paused until they are read,
        never fetched from anywhere else."""
        delay = RECOVERY_FIRST_SECONDS
        while True:
            try:
                return await self.read()
            except Exception as fault:
                if not of_the_moment(fault):
                    raise
                log.warning(
                    "stored_offsets_unreadable",
                    service=self._service,
                    error=repr(fault)[:300],
                    retry_seconds=delay,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECOVERY_MAX_SECONDS)
