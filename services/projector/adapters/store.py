"""Postgres adapter of the projector's handler: the statements that apply a batch
(``sql/queries.sql``). Its guard (``adapters/guard.py``) and its marks
(``adapters/marks.py``) are adapters of their own.

- ``apply_new_items``: a batch of new memories with its offsets, in one statement, outside
  a transaction (009_one_statement_batches.sql);
- ``write_rows`` then ``finish``: the full path's writes, one statement per kind of write,
  and the heads, the generations and the term counts at the end, in the follower's
  transaction.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, TypeAlias

import asyncpg

from engram.db import Connection, load_queries
from engram.tracking import OffsetRow
from services.projector.core import WRITE_ORDER, Decoded, audit_row

Q = load_queries(Path(__file__).parent.parent / "sql" / "queries.sql")
# A batch's writes as the handler plans them: each query's rows (``Write.args``), in order.
Writes: TypeAlias = defaultdict[str, list[tuple[Any, ...]]]

# Writes of a batch that run as one statement over all their rows (an array of a row type),
# not one execution per row: the term index's trigger then indexes the batch in one go.
ONE_STATEMENT = frozenset({"insert_item", "insert_revision"})


async def apply_new_items(
    conn: Connection,
    batch: list[Decoded],
    writes: Writes,
    spans: tuple[dict[str, int], dict[str, int]],
    bumped: Counter[tuple[str, str]],
    offsets: list[OffsetRow],
) -> bool:
    """Apply a batch of new memories, each stream's first and last seq in ``spans``, and
    store ``offsets``; True when done. False, with nothing written, when a stream does not
    go on from its head, or another applier recorded the batch first."""
    firsts, lasts = spans
    streams = list(firsts)
    try:
        applied: bool = await conn.fetchval(
            Q["apply_new_items"],
            [audit_row(env, event) for _, env, event in batch],
            writes["insert_item"],
            writes["insert_revision"],
            streams,
            [firsts[s] for s in streams],
            [lasts[s] for s in streams],
            *_generation_columns(bumped),
            *(list(column) for column in zip(*offsets, strict=True)),
        )
    except asyncpg.UniqueViolationError:  # applied by another, meanwhile
        return False
    return applied


async def write_rows(conn: Connection, writes: Writes) -> None:
    """The batch's writes, in ``WRITE_ORDER``: one statement per kind of write."""
    for query in WRITE_ORDER:
        if not (rows := writes.get(query)):
            continue
        if query in ONE_STATEMENT:
            await conn.execute(Q[query], rows)
        else:
            await conn.executemany(Q[query], rows)


async def finish(
    conn: Connection, batch: list[Decoded], heads: dict[str, int], bumped: Counter[tuple[str, str]]
) -> None:
    """After the writes: the heads of the streams written, the generations, and the term
    index's counts (once per batch, not per item), in one statement."""
    fresh_streams = list({env.stream_id for _, env, _ in batch})
    await conn.execute(
        Q["finish"],
        fresh_streams,
        [heads[s] for s in fresh_streams],
        *_generation_columns(bumped),
    )


def _generation_columns(bumped: Counter[tuple[str, str]]) -> tuple[list[Any], ...]:
    """Orgs, scopes and bumps, as the statements take them."""
    return (
        [org for org, _ in bumped],
        [scope for _, scope in bumped],
        list(bumped.values()),
    )
