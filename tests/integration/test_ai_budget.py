"""The daily AI budget in the real Postgres: one count for every memory AI request,
reserved atomically, never overspent, and reservable (only) by the recall role."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import date, timedelta

import asyncpg
import pytest

from engram.budget import DailyBudget
from engram.db import create_pool, with_user

pytestmark = pytest.mark.integration


@pytest.fixture
async def day(pool: asyncpg.Pool) -> AsyncIterator[date]:
    """A day of its own, far from today, so the real budget is never touched."""
    day = date(2300, 1, 1) + timedelta(days=uuid.uuid4().int % 300_000)
    yield day
    await pool.execute("DELETE FROM ai.daily_requests WHERE day = $1", day)


async def used_on(pool: asyncpg.Pool, day: date) -> int | None:
    return await pool.fetchval("SELECT used FROM ai.daily_requests WHERE day = $1", day)


async def test_concurrent_reservations_of_replicas_never_exceed_the_limit(
    pool: asyncpg.Pool, day: date
) -> None:
    replicas = [DailyBudget(pool, 7, lambda: day) for _ in range(3)]

    granted = await asyncio.gather(*(replicas[i % 3].reserve() for i in range(30)))

    assert granted.count(True) == 7
    assert await used_on(pool, day) == 7 == await replicas[0].used()


async def test_a_new_day_has_a_new_budget(pool: asyncpg.Pool, day: date) -> None:
    today = [day]
    budget = DailyBudget(pool, 1, lambda: today[0])
    assert await budget.reserve() is True
    assert await budget.reserve() is False

    today[0] = day + timedelta(days=1)
    try:
        assert await budget.reserve() is True
    finally:
        await pool.execute("DELETE FROM ai.daily_requests WHERE day = $1", today[0])


async def test_a_zero_limit_turns_ai_off_without_touching_the_table(
    pool: asyncpg.Pool, day: date
) -> None:
    assert await DailyBudget(pool, 0, lambda: day).reserve() is False
    assert await pool.fetchval("SELECT ai.reserve_request($1, 0)", day) is None
    assert await used_on(pool, day) is None


async def test_the_services_have_no_budget_tables_of_their_own(pool: asyncpg.Pool) -> None:
    """Seed 000: the limit caps all memory AI requests per day, not each service's."""
    tables = await pool.fetch(
        "SELECT table_schema || '.' || table_name AS name FROM information_schema.tables "
        "WHERE table_name LIKE '%budget%' OR table_name = 'daily_requests'"
    )
    assert [t["name"] for t in tables] == ["ai.daily_requests"]


async def test_the_recall_role_reserves_but_cannot_rewrite_the_count(
    stack_settings: dict[str, str], pool: asyncpg.Pool, day: date
) -> None:
    recall = await create_pool(with_user(stack_settings["DATABASE_URL"], "engram_recall"))
    try:
        budget = DailyBudget(recall, 2, lambda: day)
        assert [await budget.reserve() for _ in range(3)] == [True, True, False]
        for sql in (
            "UPDATE ai.daily_requests SET used = 0",
            "DELETE FROM ai.daily_requests",
            "SELECT used FROM ai.daily_requests",
        ):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await recall.execute(sql)
    finally:
        await recall.close()
    assert await used_on(pool, day) == 2
