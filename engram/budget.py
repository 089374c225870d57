"""The daily AI request budget every service reserves from (MEMORY_AI_DAILY_REQUEST_LIMIT).

One count for all memory AI requests, as seed 000 describes the limit: the
extractor's chat requests, the indexer's and recall's embedding requests, from every
replica, reserve from the same row per UTC day (``engram/sql/002_ai_budget.sql``).
Each reservation is its own statement on the pool, never part of the caller's
transaction: a request that was sent stays counted even if that transaction rolls back.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime

import asyncpg

RESERVE = "SELECT ai.reserve_request($1, $2)"
USED = "SELECT coalesce((SELECT used FROM ai.daily_requests WHERE day = $1), 0)"


def utc_today() -> date:
    return datetime.now(UTC).date()


class DailyBudget:
    """Remote AI requests per UTC day, reserved atomically before each request."""

    def __init__(
        self, pool: asyncpg.Pool, limit: int, today: Callable[[], date] = utc_today
    ) -> None:
        """``today`` names the budget's day; tests pass their own so they never spend today's."""
        self._pool, self._limit, self._today = pool, limit, today

    async def reserve(self) -> bool:
        """Take one request from today's budget; False when none is left."""
        if self._limit <= 0:
            return False  # AI is off: nothing to count
        used = await self._pool.fetchval(RESERVE, self._today(), self._limit)
        return used is not None

    async def used(self) -> int:
        return int(await self._pool.fetchval(USED, self._today()))
