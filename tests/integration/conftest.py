"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from engram.db import create_pool


@pytest.fixture
async def pool(stack_settings: dict[str, str]) -> AsyncIterator[asyncpg.Pool]:
    """A pool on the stack's database (tests that need pgvector's codec make their own)."""
    pool = await create_pool(stack_settings["DATABASE_URL"], max_size=10)
    yield pool
    await pool.close()
