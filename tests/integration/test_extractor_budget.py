"""The daily AI budget in the real Postgres: reserved atomically, never overspent."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import date, timedelta
from pathlib import Path

import asyncpg
import pytest

from engram.db import create_pool, migrate
from services.extractor.adapters.ai import DailyBudget

pytestmark = pytest.mark.integration
SQL_DIR = Path(__file__).resolve().parents[2] / "services" / "extractor" / "sql"


@pytest.fixture
async def pool(stack_settings: dict[str, str]) -> AsyncIterator[asyncpg.Pool]:
    await migrate(stack_settings["DATABASE_URL"], "extractor", SQL_DIR)
    pool = await create_pool(stack_settings["DATABASE_URL"], max_size=10)
    yield pool
    await pool.close()


@pytest.fixture
async def day(pool: asyncpg.Pool) -> AsyncIterator[date]:
    """A day of its own, far from today, so the real budget is never touched."""
    day = date(2300, 1, 1) + timedelta(days=uuid.uuid4().int % 300_000)
    yield day
    await pool.execute("DELETE FROM extractor.ai_budget WHERE day = $1", day)


async def test_concurrent_reservations_never_exceed_the_limit(
    pool: asyncpg.Pool, day: date
) -> None:
    budget = DailyBudget(pool, 7, lambda: day)

    granted = await asyncio.gather(*(budget.reserve() for _ in range(30)))

    assert granted.count(True) == 7
    assert await pool.fetchval("SELECT used FROM extractor.ai_budget WHERE day = $1", day) == 7


async def test_a_new_day_has_a_new_budget(pool: asyncpg.Pool, day: date) -> None:
    today = [day]
    budget = DailyBudget(pool, 1, lambda: today[0])
    assert await budget.reserve() is True
    assert await budget.reserve() is False

    today[0] = day + timedelta(days=1)
    try:
        assert await budget.reserve() is True
    finally:
        await pool.execute("DELETE FROM extractor.ai_budget WHERE day = $1", today[0])


async def test_a_zero_limit_turns_ai_off_without_touching_the_table(
    pool: asyncpg.Pool, day: date
) -> None:
    assert await DailyBudget(pool, 0, lambda: day).reserve() is False
    assert await pool.fetchval("SELECT used FROM extractor.ai_budget WHERE day = $1", day) is None
