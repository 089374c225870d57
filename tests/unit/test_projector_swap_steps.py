"""The replay's and the swap's database steps, against recording fakes of a connection and
a pool: the statements in their order and transactions, a deadlock retried, Postgres's
errors said as the swap's, and only a replay's own shadow dropped to make one anew."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from engram.crypto import MasterKey
from services.projector import ranges, replay, swap

Trace = list[tuple[str, ...]]
TABLES = ["memory.items", "memory.links", "projector.offsets", "projector.stream_heads"]
ABSENT = object()


class Row(dict[str, Any]):
    def values(self) -> list[Any]:  # type: ignore[override]  # as asyncpg's Record
        return list(super().values())


class Conn:
    """Records each statement as ``(database, what, sql)``, and raises, once, what ``fail``
    holds for ``database@statement``. ``mark``: the comment of the database a shadow is
    made as (absent: there is none of its name)."""

    def __init__(
        self, db: str, trace: Trace, fail: dict[str, BaseException], mark: Any = ABSENT
    ) -> None:
        self.db, self.trace, self.fail, self.mark = db, trace, fail, mark

    def _run(self, what: str, sql: str) -> None:
        sql = " ".join(line for line in sql.splitlines() if not line.startswith("--"))
        sql = " ".join(sql.split())
        self.trace.append((self.db, what, sql))
        if f"{self.db}@{sql}" in self.fail:
            raise self.fail.pop(f"{self.db}@{sql}")

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        self._run("fetch", sql)
        if "pg_tables" in sql:
            return [Row(t=t) for t in TABLES]
        if "information_schema" in sql:
            return [Row(column_name="c")]
        if "projector.offsets" in sql:
            return [Row(partition=0, next_offset=5 if self.db == "shadow" else 7)]
        return [Row(a=1)]  # a checksum's rows

    async def fetchval(self, sql: str, *args: Any) -> str:
        self._run("fetchval", sql)
        return "engram"

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        self._run("fetchrow", sql)
        return None if self.mark is ABSENT else Row(mark=self.mark)

    async def execute(self, sql: str, *args: Any) -> str:
        self._run("execute", sql)
        return "OK"

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        self.trace.append((self.db, "BEGIN"))
        try:
            yield
        except BaseException:
            self.trace.append((self.db, "ROLLBACK"))
            raise
        self.trace.append((self.db, "COMMIT"))

    async def copy_from_table(self, name: str, *, output: Any, **_: Any) -> None:
        self._run("copy out", name)
        await output(b"row")

    async def copy_to_table(self, name: str, *, source: Any, **_: Any) -> str:
        got = [chunk async for chunk in source]
        self._run("copy in", name)
        return f"COPY {len(got)}"

    async def close(self) -> None:
        self.trace.append((self.db, "close"))


class Pool:
    def __init__(self, db: str, trace: Trace, fail: dict[str, BaseException]) -> None:
        self.conn = Conn(db, trace, fail)

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Conn]:
        yield self.conn

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        return await self.conn.fetch(sql, *args)


def statements(trace: Trace, db: str) -> list[str]:
    return [t[-1] for t in trace if t[0] == db and t[1] in {"execute", "BEGIN", "COMMIT"}]


async def run_swap(
    monkeypatch: pytest.MonkeyPatch, fail: dict[str, BaseException]
) -> tuple[Trace, list[str], swap.SwapReport | swap.SwapError]:
    trace: Trace = []
    said: list[str] = []
    live, shadow = Pool("live", trace, fail), Pool("shadow", trace, fail)

    @contextlib.asynccontextmanager
    async def pools(*_: str) -> AsyncIterator[tuple[Pool, Pool]]:
        yield live, shadow

    async def apply_range(*args: Any) -> int:
        trace.append(("shadow", "apply_range", repr(args[3:5])))
        return 2

    monkeypatch.setattr(swap, "live_and_shadow", pools)
    monkeypatch.setattr(swap, "apply_range", apply_range)
    try:
        report: swap.SwapReport | swap.SwapError = await swap.swap(
            "postgresql://h/engram",
            "postgresql://h/shadow",
            "kafka:9092",
            MasterKey(b"k" * 32),
            lock_timeout_seconds=2.5,
            progress=said.append,
        )
    except swap.SwapError as exc:
        report = exc
    return trace, said, report


async def test_a_swap_locks_copies_and_compares_in_one_transaction_on_the_live_side(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trace, said, report = await run_swap(monkeypatch, {})
    assert isinstance(report, swap.SwapReport)
    assert report.caught_up == 4  # before the locks, and again inside them
    assert report.rows == {t: 1 for t in ["memory.items", "memory.links", "projector.stream_heads"]}
    assert statements(trace, "live") == [
        "BEGIN",
        "SET LOCAL lock_timeout = '2500ms'",
        "LOCK TABLE projector.stream_heads IN ACCESS EXCLUSIVE MODE",
        "LOCK TABLE memory.items, memory.links, projector.offsets IN ACCESS EXCLUSIVE MODE",
        "TRUNCATE memory.items, memory.links, projector.stream_heads",
        "ALTER TABLE memory.items DISABLE TRIGGER USER",
        "ALTER TABLE memory.items ENABLE TRIGGER USER",
        "ALTER TABLE memory.links DISABLE TRIGGER USER",
        "ALTER TABLE memory.links ENABLE TRIGGER USER",
        "ALTER TABLE projector.stream_heads DISABLE TRIGGER USER",
        "ALTER TABLE projector.stream_heads ENABLE TRIGGER USER",
        "COMMIT",
    ]
    copied = [t for t in trace if t[1] in {"copy out", "copy in"}]
    assert copied[:2] == [("shadow", "copy out", "items"), ("live", "copy in", "items")]
    assert said[:2] == [
        "shadow caught up with the live projector (2 events)",
        "live read models locked",
    ]


async def test_a_deadlock_with_a_reader_rolls_back_and_begins_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first_lock = "live@LOCK TABLE projector.stream_heads IN ACCESS EXCLUSIVE MODE"
    trace, said, report = await run_swap(
        monkeypatch, {first_lock: asyncpg.DeadlockDetectedError("deadlock detected")}
    )
    assert isinstance(report, swap.SwapReport)
    assert statements(trace, "live").count("BEGIN") == 2
    assert ("live", "ROLLBACK") in trace and statements(trace, "live")[-1] == "COMMIT"
    assert "deadlock with a reader while locking: rolled back, trying again" in said


async def test_postgres_refusing_a_statement_fails_the_swap_rolled_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refused = asyncpg.UndefinedColumnError('column "c" does not exist')
    trace, _, report = await run_swap(monkeypatch, {"live@links": refused})
    assert isinstance(report, swap.SwapError)
    assert str(report) == 'UndefinedColumnError: column "c" does not exist; rolled back'
    assert ("live", "ROLLBACK") in trace
    assert "COMMIT" not in statements(trace, "live")


async def test_busy_read_models_fail_the_swap_once_the_lock_timeout_passes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rest = "live@LOCK TABLE memory.items, memory.links, projector.offsets IN ACCESS EXCLUSIVE MODE"
    trace, _, report = await run_swap(monkeypatch, {rest: asyncpg.LockNotAvailableError("busy")})
    assert isinstance(report, swap.SwapError)
    assert str(report) == "the read models stayed busy for 2 s; nothing was swapped: try again"
    assert ("live", "ROLLBACK") in trace


async def test_only_a_replays_own_shadow_is_dropped_to_make_it_anew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trace: Trace = []
    marks = [replay.SHADOW_MARK, None]  # a replay's shadow, then a database of no comment

    async def connect(dsn: str, **settings: object) -> Conn:
        return Conn("server", trace, {}, marks.pop(0))

    monkeypatch.setattr(asyncpg, "connect", connect)
    assert await replay.recreate_database("postgresql://h/engram", "x") == "postgresql://h/x"
    assert statements(trace, "server") == [
        'DROP DATABASE IF EXISTS "x" WITH (FORCE)',
        'CREATE DATABASE "x"',
        "COMMENT ON DATABASE \"x\" IS 'engram replay shadow'",
    ]
    assert trace[-1] == ("server", "close")
    trace.clear()
    with pytest.raises(replay.ShadowError, match="no replay made it"):
        await replay.recreate_database("postgresql://h/engram", "x")
    assert statements(trace, "server") == [] and trace[-1] == ("server", "close")


async def test_a_record_postgres_refuses_is_found_and_let_go_with_the_offset_stored() -> None:
    trace: Trace = []
    letters: list[int] = []

    class Projector:
        async def handle_batch(self, conn: Conn, records: list[Any]) -> None:
            trace.append(("shadow", "batch", repr([r.offset for r in records])))
            if any(r.offset == 11 for r in records):
                raise asyncpg.DataError("refused")

        async def dead_letter(self, record: Any, error: str) -> None:
            letters.append(record.offset)

    class Record:
        def __init__(self, offset: int) -> None:
            self.offset, self.key = offset, b"org/x"

    run = ranges._Range(Pool("shadow", trace, {}), Projector(), None, None, None, "g")  # type: ignore[arg-type]
    await run._batch(0, [Record(10), Record(11), Record(12)])
    assert letters == [11] and run.count == 3
    assert [t[1:] for t in trace if t[1] in {"BEGIN", "COMMIT", "ROLLBACK", "batch"}] == [
        ("BEGIN",), ("batch", "[10, 11, 12]"), ("ROLLBACK",),
        *[step for o in (10, 11, 12) for step in (("BEGIN",), ("batch", f"[{o}]"),
                                                  ("ROLLBACK",) if o == 11 else ("COMMIT",))],
    ]  # fmt: skip
    stored = [t for t in trace if t[1] == "execute"]
    assert len(stored) == 3  # with 10 and with 12 in their transactions, then the batch's end
    assert all(t[2].startswith("INSERT INTO projector.offsets") for t in stored)
