"""The projector vacuums the term index's delta table while it applies events, so the
fold's scan of that table stays a page or two after a burst of writes (real Postgres; a
table of the same shape stands in for memory.term_deltas, which the running projector
vacuums too)."""

from __future__ import annotations

import asyncio
import itertools
import uuid

import asyncpg
import pytest

from services.projector.adapters.deltas import vacuum_deltas
from tests.support import eventually

pytestmark = pytest.mark.integration


async def test_the_delta_table_is_vacuumed_only_while_events_are_applied(
    stack_settings: dict[str, str],
) -> None:
    table = f"public.test_deltas_{uuid.uuid4().hex[:8]}"
    pool = await asyncpg.create_pool(stack_settings["DATABASE_URL"], min_size=1, max_size=2)
    assert pool is not None
    try:
        await pool.execute(f"CREATE UNLOGGED TABLE {table} (LIKE memory.term_deltas INCLUDING ALL)")
        # What folds leave behind: rows appended and deleted again, pages full of dead rows.
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute(
                f"INSERT INTO {table} (stream_id, lexeme, docs) "
                "SELECT 'o/s', 'word' || g, 1 FROM generate_series(1, 20000) AS g"
            )
            await conn.execute(f"DELETE FROM {table}")

        async def size() -> int:
            return int(await pool.fetchval("SELECT pg_relation_size($1::regclass)", table))

        assert await size() > 0
        # Nothing applied: nothing vacuumed.
        idle = asyncio.create_task(vacuum_deltas(pool, lambda: 7, 0.05, table))
        await asyncio.sleep(0.5)
        idle.cancel()
        assert await size() > 0

        # Events applied between rounds: the table is vacuumed down to nothing.
        counter = itertools.count()
        busy = asyncio.create_task(vacuum_deltas(pool, lambda: next(counter), 0.05, table))
        try:

            async def emptied() -> bool:
                return await size() == 0

            await eventually(emptied, deadline=30, what="the delta table vacuumed")
        finally:
            busy.cancel()
    finally:
        await pool.execute(f"DROP TABLE IF EXISTS {table}")
        await pool.close()
