"""The swap's database work (``swap``): what the projection's tables and stored offsets
are, and, in one transaction on the live database, its locks and each table's rows
replaced by the shadow's. Postgres's errors leave the transaction as the small ones below,
so the swap says what happened without knowing the driver."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import asyncpg

from contracts import topics
from engram.db import load_queries
from services.projector.adapters.shadow import Connection, Pool

Q = load_queries(Path(__file__).parent.parent / "sql" / "queries.sql")
COPY_CHUNKS_HELD = 64  # chunks of a table in flight from the shadow to the live database


class Deadlocked(Exception):
    """Postgres broke a deadlock by rolling the transaction back."""


class StatementRefused(Exception):
    """Postgres refused a statement (e.g. a table whose columns differ): rolled back."""


class LockTimedOut(Exception):
    """A table stayed locked by others past the transaction's lock timeout."""


async def schema_tables(db: Pool, schemas: Sequence[str]) -> list[str]:
    """The tables of ``schemas``, as ``schema.table``, in order."""
    rows = await db.fetch(Q["schema_tables"], list(schemas))
    return [r["t"] for r in rows]


async def stored_offsets(db: Pool | Connection, group_id: str) -> dict[int, int]:
    """The next offset of engram.events the group stored, by partition."""
    rows = await db.fetch(Q["stored_offsets"], group_id, topics.EVENTS)
    return {r["partition"]: r["next_offset"] for r in rows}


@contextlib.asynccontextmanager
async def transaction(conn: Connection) -> AsyncIterator[None]:
    """A transaction on ``conn``; a Postgres error in it, whichever database raised it,
    comes out as ``Deadlocked`` or ``StatementRefused`` once it is rolled back."""
    try:
        async with conn.transaction():
            yield
    except asyncpg.DeadlockDetectedError as exc:
        raise Deadlocked(str(exc)) from exc
    except asyncpg.PostgresError as exc:
        raise StatementRefused(f"{exc.__class__.__name__}: {exc}") from exc


async def set_lock_timeout(conn: Connection, milliseconds: int) -> None:
    """How long each lock of the transaction may wait."""
    await conn.execute(f"SET LOCAL lock_timeout = '{milliseconds}ms'")


async def lock_tables(conn: Connection, tables: Sequence[str]) -> None:
    """Lock ``tables`` in one statement, for the rest of the transaction."""
    try:
        await conn.execute(f"LOCK TABLE {', '.join(tables)} IN ACCESS EXCLUSIVE MODE")
    except asyncpg.LockNotAvailableError as exc:
        raise LockTimedOut(str(exc)) from exc


async def truncate_tables(conn: Connection, tables: Sequence[str]) -> None:
    await conn.execute(f"TRUNCATE {', '.join(tables)}")


async def copy_rows(shadow: Pool, conn: Connection, table: str) -> int:
    """Copy the shadow's rows of ``table`` into the live one (emptied before), its own
    triggers off: the term index comes copied, not rebuilt. Returns how many rows."""
    schema, name = table.split(".")
    columns = await _columns(conn, schema, name)
    await conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
    async with shadow.acquire() as source:
        status = await _stream(source, conn, schema, name, columns)
    await conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")
    return int(status.split()[-1])


async def _columns(conn: Connection, schema: str, table: str) -> list[str]:
    """The stored columns, in order (a generated one is computed again on the way in)."""
    rows = await conn.fetch(Q["stored_columns"], schema, table)
    return [r["column_name"] for r in rows]


async def _stream(
    source: Connection,
    target: Connection,
    schema: str,
    name: str,
    columns: list[str],
) -> str:
    """One table's rows from the shadow into the live database, as binary ``COPY`` in
    chunks through memory: the read models hold memories' text, and a file of them left
    behind by a killed swap is text no forget reaches. A failure on either side fails the
    copy (and so the caller's transaction)."""
    chunks: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=COPY_CHUNKS_HELD)

    async def dump() -> None:
        try:
            await source.copy_from_table(
                name, schema_name=schema, columns=columns, output=chunks.put, format="binary"
            )
        finally:
            await chunks.put(None)

    async def received() -> AsyncIterator[bytes]:
        while (chunk := await chunks.get()) is not None:
            yield chunk

    dumping = asyncio.create_task(dump())
    try:
        status = await target.copy_to_table(
            name, schema_name=schema, columns=columns, source=received(), format="binary"
        )
    except BaseException:
        dumping.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await dumping
        raise
    await dumping  # a dump that failed after its last chunk still fails the copy
    return str(status)
