"""Fixtures shared by the integration tests."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from engram.db import create_pool

DEADLINE = 60.0


@pytest.fixture
async def pool(stack_settings: dict[str, str]) -> AsyncIterator[asyncpg.Pool]:
    """A pool on the stack's database (tests that need pgvector's codec make their own)."""
    pool = await create_pool(stack_settings["DATABASE_URL"], max_size=10)
    yield pool
    await pool.close()


@contextlib.asynccontextmanager
async def scratch_topic(bootstrap: str, prefix: str, partitions: int = 1) -> AsyncIterator[str]:
    """A fresh topic of the test's own, deleted afterwards (the broker is shared)."""
    name = f"{prefix}{uuid.uuid4().hex[:12]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await asyncio.wait_for(admin.start(), DEADLINE)
    try:
        await asyncio.wait_for(admin.create_topics([NewTopic(name, partitions, 1)]), DEADLINE)
        yield name
        await asyncio.wait_for(admin.delete_topics([name]), DEADLINE)
    finally:
        await admin.close()
