"""Put a replayed shadow in place of the live read models, atomically (DESIGN §8).

The shadow database (``replay``) holds the projector's tables rebuilt from offset 0 and,
in its ``projector.offsets``, how far into each partition it read. The swap:

1. brings the shadow up to the live projector's offsets (the log moved on while it was
   rebuilt), with no lock held;
2. in one transaction on the live database, locks every table of the projection
   (``ACCESS EXCLUSIVE``: the live projector's next write and every reader wait; the
   stream heads first, as the first statement of each projector batch reads them, so a
   batch either finished before or waits whole; a deadlock with a reader retries), brings the
   shadow up to the offsets again (what the projector committed meanwhile), then empties
   each live table and copies the shadow's rows in (binary ``COPY`` streamed through
   memory, never a file; the tables' own triggers off: the term index comes copied, not
   rebuilt);
3. compares the live checksum with the shadow's inside that transaction, and commits
   only when they match: a reader sees the old read models or the new ones, never a mix.

The live projector is not stopped. Its next batch starts at the offsets the swap kept,
which the new rows are exactly as of, so it goes on from there. Offsets and the anomaly
log stay as they are: they record the live consumers, not the projection.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import asyncpg

from contracts import topics
from engram.crypto import MasterKey
from engram.keystore import KeyStore
from services.projector.handlers import EventProjector
from services.projector.ranges import Progress, apply_range
from services.projector.replay import GROUP_ID, checksum, live_and_shadow

SCHEMAS = ("memory", "projector")
LOCK_ATTEMPTS = 5
KEPT = frozenset({"projector.offsets", "projector.anomalies"})  # the live ones stay
COPY_CHUNKS_HELD = 64  # chunks of a table in flight from the shadow to the live database


class SwapError(Exception):
    """The swap was rolled back; the live read models are as they were."""


@dataclass
class SwapReport:
    caught_up: int  # events applied to the shadow after its replay
    rows: dict[str, int] = field(default_factory=dict)  # per table, as copied
    checksum: str = ""
    seconds: float = 0.0


async def swap(
    live_dsn: str,
    shadow_dsn: str,
    bootstrap: str,
    master: MasterKey,
    *,
    group_id: str = GROUP_ID,
    lock_timeout_seconds: float = 60.0,
    progress: Progress | None = None,
) -> SwapReport:
    started = time.monotonic()
    async with live_and_shadow(live_dsn, shadow_dsn) as (live, shadow):
        run = _Swap(live, shadow, bootstrap, master, group_id, lock_timeout_seconds, progress)
        tables = await _tables_to_swap(run)
        async with live.acquire() as conn:
            report = SwapReport(caught_up=await _catch_up(run, conn))
            run.say(f"shadow caught up with the live projector ({report.caught_up} events)")
            await _swap_locked(run, conn, tables, report)
            report.seconds = round(time.monotonic() - started, 2)
            return report


@dataclass(frozen=True)
class _Swap:
    """One swap's two databases, and what catching the shadow up and locking take."""

    live: asyncpg.Pool
    shadow: asyncpg.Pool
    bootstrap: str
    master: MasterKey
    group_id: str
    lock_timeout_seconds: float
    progress: Progress | None

    def say(self, message: str) -> None:
        if self.progress:
            self.progress(message)


async def _tables_to_swap(run: _Swap) -> list[str]:
    """The projection's tables, once the live database has each and the shadow is whole."""
    tables = await _projection_tables(run.shadow)
    missing = set(tables) - set(await _projection_tables(run.live))
    if missing:
        raise SwapError(f"the live database lacks {sorted(missing)}: run `engram setup`")
    async with run.shadow.acquire() as conn:
        if await _offsets(conn, run.group_id) == {}:
            raise SwapError(
                "the shadow holds no whole replay (a replay of one org's streams cannot "
                "be swapped in): run `engram replay` without --org first"
            )
    return tables


async def _catch_up(run: _Swap, conn: asyncpg.Connection) -> int:
    """Apply to the shadow the events between its offsets and the live ones."""
    async with run.shadow.acquire() as s:
        have = await _offsets(s, run.group_id)
    want = await _offsets(conn, run.group_id)
    behind = {p: n for p, n in have.items() if want.get(p, 0) > n}
    if not behind:
        return 0
    projector = EventProjector(KeyStore(run.live, run.master), _skip_poison)
    stops = {p: want[p] for p in behind}
    return await apply_range(
        run.shadow, projector, run.bootstrap, behind, stops, run.progress, None, run.group_id
    )


async def _swap_locked(
    run: _Swap, conn: asyncpg.Connection, tables: list[str], report: SwapReport
) -> None:
    """The swap's transaction, begun again after a deadlock with a reader."""
    for attempt in range(1, LOCK_ATTEMPTS + 1):
        try:
            await _swap_once(run, conn, tables, report)
            return
        except asyncpg.DeadlockDetectedError:
            if attempt == LOCK_ATTEMPTS:
                raise SwapError(
                    f"{LOCK_ATTEMPTS} deadlocks with readers in a row; nothing was "
                    "swapped: try again"
                ) from None
            run.say("deadlock with a reader while locking: rolled back, trying again")
        except asyncpg.PostgresError as exc:  # e.g. a table whose columns differ
            raise SwapError(f"{exc.__class__.__name__}: {exc}; rolled back") from exc


async def _swap_once(
    run: _Swap, conn: asyncpg.Connection, tables: list[str], report: SwapReport
) -> None:
    """Lock, catch up, copy and compare in one transaction: it commits only on a match."""
    async with conn.transaction():
        await _lock(conn, tables, run.lock_timeout_seconds)
        run.say("live read models locked")
        report.caught_up += await _catch_up(run, conn)
        report.rows = await _copy(run.shadow, conn, tables, run.say)
        async with run.shadow.acquire() as s:
            report.checksum = await checksum(s)
        if await checksum(conn) != report.checksum:
            raise SwapError("the copied rows differ from the shadow's: rolled back")


async def _lock(conn: asyncpg.Connection, tables: list[str], timeout_seconds: float) -> None:
    await conn.execute(f"SET LOCAL lock_timeout = '{int(timeout_seconds * 1000)}ms'")
    rest = sorted({*tables, "projector.offsets"} - {"projector.stream_heads"})
    try:
        await conn.execute("LOCK TABLE projector.stream_heads IN ACCESS EXCLUSIVE MODE")
        await conn.execute(f"LOCK TABLE {', '.join(rest)} IN ACCESS EXCLUSIVE MODE")
    except asyncpg.LockNotAvailableError as exc:
        raise SwapError(
            f"the read models stayed busy for {timeout_seconds:.0f} s; nothing was "
            "swapped: try again"
        ) from exc


async def _copy(
    shadow: asyncpg.Pool, conn: asyncpg.Connection, tables: list[str], say: Progress
) -> dict[str, int]:
    """Replace each live table's rows by the shadow's, inside the caller's transaction."""
    rows: dict[str, int] = {}
    await conn.execute(f"TRUNCATE {', '.join(tables)}")
    for table in tables:
        schema, name = table.split(".")
        columns = await _columns(conn, schema, name)
        await conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        async with shadow.acquire() as source:
            status = await _stream(source, conn, schema, name, columns)
        await conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")
        rows[table] = int(status.split()[-1])
        say(f"{table}: {rows[table]} rows")
    return rows


async def _stream(
    source: asyncpg.Connection,
    target: asyncpg.Connection,
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


async def _projection_tables(pool: asyncpg.Pool) -> list[str]:
    rows = await pool.fetch(
        "SELECT schemaname || '.' || tablename AS t FROM pg_tables "
        "WHERE schemaname = ANY($1) ORDER BY 1",
        list(SCHEMAS),
    )
    return [r["t"] for r in rows if r["t"] not in KEPT]


async def _columns(conn: asyncpg.Connection, schema: str, table: str) -> list[str]:
    """The stored columns, in order (a generated one is computed again on the way in)."""
    rows = await conn.fetch(
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_schema = $1 AND table_name = $2 AND is_generated = 'NEVER' "
        "ORDER BY ordinal_position",
        schema,
        table,
    )
    return [r["column_name"] for r in rows]


async def _offsets(conn: asyncpg.Connection | asyncpg.Pool, group_id: str) -> dict[int, int]:
    rows = await conn.fetch(
        "SELECT partition, next_offset FROM projector.offsets WHERE consumer = $1 AND topic = $2",
        group_id,
        topics.EVENTS,
    )
    return {r["partition"]: r["next_offset"] for r in rows}


async def _skip_poison(record: object, error: str) -> None:
    """The live projector dead-lettered it already."""
