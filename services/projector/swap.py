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

import time
from dataclasses import dataclass, field

from engram.crypto import MasterKey
from engram.keystore import KeyStore
from services.projector.adapters.shadow import Connection, Pool, connection, live_and_shadow
from services.projector.adapters.swapping import (
    Deadlocked,
    LockTimedOut,
    StatementRefused,
    copy_rows,
    lock_tables,
    schema_tables,
    set_lock_timeout,
    stored_offsets,
    transaction,
    truncate_tables,
)
from services.projector.handlers import EventProjector
from services.projector.ranges import Progress, apply_range
from services.projector.replay import GROUP_ID, checksum

SCHEMAS = ("memory", "projector")
LOCK_ATTEMPTS = 5
KEPT = frozenset({"projector.offsets", "projector.anomalies"})  # the live ones stay


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
        async with connection(live) as conn:
            report = SwapReport(caught_up=await _catch_up(run, conn))
            run.say(f"shadow caught up with the live projector ({report.caught_up} events)")
            await _swap_locked(run, conn, tables, report)
            report.seconds = round(time.monotonic() - started, 2)
            return report


@dataclass(frozen=True)
class _Swap:
    """One swap's two databases, and what catching the shadow up and locking take."""

    live: Pool
    shadow: Pool
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
    if await stored_offsets(run.shadow, run.group_id) == {}:
        raise SwapError(
            "the shadow holds no whole replay (a replay of one org's streams cannot "
            "be swapped in): run `engram replay` without --org first"
        )
    return tables


async def _catch_up(run: _Swap, conn: Connection) -> int:
    """Apply to the shadow the events between its offsets and the live ones."""
    have = await stored_offsets(run.shadow, run.group_id)
    want = await stored_offsets(conn, run.group_id)
    behind = {p: n for p, n in have.items() if want.get(p, 0) > n}
    if not behind:
        return 0
    projector = EventProjector(KeyStore(run.live, run.master), _skip_poison)
    stops = {p: want[p] for p in behind}
    return await apply_range(
        run.shadow, projector, run.bootstrap, behind, stops, run.progress, None, run.group_id
    )


async def _swap_locked(run: _Swap, conn: Connection, tables: list[str], report: SwapReport) -> None:
    """The swap's transaction, begun again after a deadlock with a reader."""
    for attempt in range(1, LOCK_ATTEMPTS + 1):
        try:
            await _swap_once(run, conn, tables, report)
            return
        except Deadlocked:
            if attempt == LOCK_ATTEMPTS:
                raise SwapError(
                    f"{LOCK_ATTEMPTS} deadlocks with readers in a row; nothing was "
                    "swapped: try again"
                ) from None
            run.say("deadlock with a reader while locking: rolled back, trying again")
        except StatementRefused as exc:  # e.g. a table whose columns differ
            raise SwapError(f"{exc}; rolled back") from exc


async def _swap_once(run: _Swap, conn: Connection, tables: list[str], report: SwapReport) -> None:
    """Lock, catch up, copy and compare in one transaction: it commits only on a match."""
    async with transaction(conn):
        await _lock(conn, tables, run.lock_timeout_seconds)
        run.say("live read models locked")
        report.caught_up += await _catch_up(run, conn)
        report.rows = await _copy(run.shadow, conn, tables, run.say)
        async with connection(run.shadow) as s:
            report.checksum = await checksum(s)
        if await checksum(conn) != report.checksum:
            raise SwapError("the copied rows differ from the shadow's: rolled back")


async def _lock(conn: Connection, tables: list[str], timeout_seconds: float) -> None:
    await set_lock_timeout(conn, int(timeout_seconds * 1000))
    rest = sorted({*tables, "projector.offsets"} - {"projector.stream_heads"})
    try:
        await lock_tables(conn, ["projector.stream_heads"])
        await lock_tables(conn, rest)
    except LockTimedOut as exc:
        raise SwapError(
            f"the read models stayed busy for {timeout_seconds:.0f} s; nothing was "
            "swapped: try again"
        ) from exc


async def _copy(shadow: Pool, conn: Connection, tables: list[str], say: Progress) -> dict[str, int]:
    """Replace each live table's rows by the shadow's, inside the caller's transaction."""
    rows: dict[str, int] = {}
    await truncate_tables(conn, tables)
    for table in tables:
        rows[table] = await copy_rows(shadow, conn, table)
        say(f"{table}: {rows[table]} rows")
    return rows


async def _projection_tables(db: Pool) -> list[str]:
    return [t for t in await schema_tables(db, SCHEMAS) if t not in KEPT]


async def _skip_poison(record: object, error: str) -> None:
    """The live projector dead-lettered it already."""
