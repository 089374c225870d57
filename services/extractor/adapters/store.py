"""Postgres adapter of the extractor's handlers: the turns handled, recall's policy
switches, and the sources recorded and suppressed (``sql/queries.sql``).

Each function takes the follower's connection: what it writes commits with the offset.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import asyncpg

from engram.db import Connection, load_queries
from services.extractor.core import Method, TurnKey

Q = load_queries(Path(__file__).parent.parent / "sql" / "queries.sql")


async def turn_method(conn: Connection, key: TurnKey) -> str | None:
    """How the turn was handled, whatever the method; None when it was not yet."""
    method: str | None = await conn.fetchval(Q["turn_method"], *key)
    return method


async def turn_done(conn: Connection, key: TurnKey, method: Method, proposals: int) -> None:
    await conn.execute(Q["turn_done"], *key, method, proposals)


async def memory_on(conn: Connection, org: str) -> bool:
    """The org's memory switch (seed 004's memory capability)."""
    return await _switched_on(conn, "memory", org)


async def generate_on(conn: Connection, org: str, session: str, fork_of: str | None) -> bool:
    """The session's ``generate`` switch as it applies (seed 002)."""
    return await _switched_on(conn, "generate", org, session, fork_of)


async def agent_memory_on(conn: Connection, org: str) -> bool:
    """The org's agent memory switch (seed 002)."""
    return await _switched_on(conn, "agent_memory", org)


async def _switched_on(conn: Connection, query: str, *args: Any) -> bool:
    """A switch of recall's policies (a session's ``generate``, the org's agent memory)."""
    try:
        async with conn.transaction():  # a savepoint: a failure here spoils no batch
            return bool(await conn.fetchval(Q[query], *args))
    except (
        asyncpg.UndefinedFunctionError,
        asyncpg.UndefinedTableError,
        asyncpg.UndefinedColumnError,
    ):  # recall's migrations have not run: all on
        return True


async def suppressed(conn: Connection, org: str, ids: list[str], stream_id: str) -> bool:
    """Whether any of the looked-up ids is a forgotten item's source, in this stream."""
    return bool(await conn.fetchval(Q["suppressed"], org, ids, stream_id))


async def record_sources(
    conn: Connection, org: str, hashes: list[str], item_id: str, stream: str
) -> None:
    await conn.execute(Q["record_sources"], org, hashes, item_id, stream)


async def suppress_sources(conn: Connection, org: str, item_id: str) -> None:
    """Suppress the forgotten item's sources, then its own id as a source."""
    await conn.execute(Q["suppress_sources"], org, item_id)
    await conn.execute(Q["suppress_item_id"], org, item_id)
