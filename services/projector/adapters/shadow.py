"""The replay's database work (``replay``, ``ranges``): a shadow database made anew on the
live server and given the live schemas, a small pool on each database, the rows a checksum
covers, and a batch applied to the shadow with the offset it reached."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from engram.db import (
    Connection,
    Pool,
    connect,
    create_pool,
    load_queries,
    migrate,
    migrate_shared,
)
from engram.stored_offsets import OffsetRow
from engram.tracking import OFFSETS_UPSERT

SQL_DIR = Path(__file__).parent.parent / "sql"
Q = load_queries(SQL_DIR / "queries.sql")
STORE_OFFSET = OFFSETS_UPSERT.format(table="projector.offsets")
# The tables a checksum covers, in the order it reads them (queries ``checksum_<table>``).
CHECKSUMMED = ("items", "revisions", "tombstones", "generations", "links", "proposals")


@contextlib.asynccontextmanager
async def live_server(live_dsn: str) -> AsyncIterator[Connection]:
    """One connection to the live database, for the server's catalogue; closed after."""
    conn = await connect(live_dsn)
    try:
        yield conn
    finally:
        await conn.close()


async def current_database(server: Connection) -> str:
    name: str = await server.fetchval(Q["current_database"])
    return name


async def database_comment(server: Connection, name: str) -> tuple[bool, str | None]:
    """Whether the server holds a database ``name``, and its comment (None: it has none)."""
    row = await server.fetchrow(Q["database_comment"], name)
    return (False, None) if row is None else (True, row["mark"])


async def make_database(server: Connection, name: str, comment: str) -> None:
    """Drop a database ``name`` if there is one, and make it anew with ``comment``. The
    name is quoted, not checked: the caller checks it."""
    await server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await server.execute(f'CREATE DATABASE "{name}"')
    await server.execute(f"COMMENT ON DATABASE \"{name}\" IS '{comment}'")


async def migrate_shadow(shadow_dsn: str) -> None:
    """The shared schema and the projector's, as the live database has them."""
    await migrate_shared(shadow_dsn)
    await migrate(shadow_dsn, "projector", SQL_DIR)


@contextlib.asynccontextmanager
async def live_and_shadow(live_dsn: str, shadow_dsn: str) -> AsyncIterator[tuple[Pool, Pool]]:
    """A small pool on each database, both closed on the way out (the live one first):
    the shadow's even when the live one's close fails, the live one's when the shadow's
    does not open."""
    live = await create_pool(live_dsn, max_size=2)
    try:
        shadow = await create_pool(shadow_dsn, max_size=2)
    except BaseException:
        await live.close()
        raise
    try:
        yield live, shadow
    finally:
        try:
            await live.close()
        finally:
            await shadow.close()


def connection(pool: Pool) -> contextlib.AbstractAsyncContextManager[Connection]:
    """One of the pool's connections, for the ``async with`` block."""
    acquired: contextlib.AbstractAsyncContextManager[Connection] = pool.acquire()
    return acquired


async def checksummed_rows(
    conn: Connection, org_pattern: str
) -> AsyncIterator[tuple[str, Iterator[tuple[Any, ...]]]]:
    """Each table a checksum covers, by name, with its rows of the orgs LIKE
    ``org_pattern`` (each a tuple of its values), one table read at a time."""
    for name in CHECKSUMMED:
        rows = await conn.fetch(Q[f"checksum_{name}"], org_pattern)
        yield name, (tuple(row.values()) for row in rows)


async def apply_batch(
    shadow: Pool, write: Callable[[Connection], Awaitable[None]], reached: OffsetRow | None
) -> None:
    """``write`` a batch and, with ``reached``, store the offset it reached, in one
    transaction on the shadow."""
    async with shadow.acquire() as conn, conn.transaction():
        await write(conn)
        if reached is not None:
            await conn.execute(STORE_OFFSET, *reached)


async def store_offset(shadow: Pool, reached: OffsetRow) -> None:
    async with shadow.acquire() as conn:
        await conn.execute(STORE_OFFSET, *reached)
