"""Keeping the term index's delta table small.

A batch's updates and removals of items append count deltas (new items' counts go to
``memory.term_counts`` directly, 008_statement_terms.sql), and its fold
(``memory.fold_term_counts``) deletes them, so the table holds nothing live between
transactions, but each fold scans all of its pages, dead rows included. After a burst of
writes that was thousands of empty pages a batch, until autovacuum came by (at most once a
minute): about 0.8 ms of Postgres CPU per request at eight writers. Vacuuming it every few
seconds while the projector writes keeps it at a page or two; VACUUM takes no lock that
stops the projector's writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import asyncpg

from engram.logging import get_logger

log = get_logger(__name__)


DELTAS = "memory.term_deltas"


async def vacuum_deltas(
    pool: asyncpg.Pool, applied: Callable[[], int], every: float, table: str = DELTAS
) -> None:
    """Every ``every`` seconds in which events were applied, VACUUM the delta table."""
    seen = applied()
    while True:
        await asyncio.sleep(every)
        before, seen = seen, applied()
        if seen == before:
            continue
        try:
            await pool.execute(f"VACUUM {table}")
        except asyncpg.PostgresError as exc:  # a busy moment; the next round tries again
            log.warning("term_deltas_vacuum_failed", error=str(exc))
