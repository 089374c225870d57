"""The opening read of a packet (generation, org policy and pinned items in one round
trip): as many pinned items as the packet holds, by the request, else the org, else the
default; none under newest_first."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from engram.auth import Principal
from engram.db import with_user
from services.recall.adapters.store import RecallStore
from tests.support import insert_item

pytestmark = pytest.mark.integration


@pytest.fixture
async def store(stack_settings: dict[str, str]) -> AsyncIterator[RecallStore]:
    pool = await asyncpg.create_pool(
        with_user(stack_settings["DATABASE_URL"], "engram_recall"), min_size=1, max_size=2
    )
    assert pool is not None
    try:
        yield RecallStore(pool)
    finally:
        await pool.close()


async def test_pinned_items_as_many_as_the_packet_holds(
    stack_settings: dict[str, str], store: RecallStore
) -> None:
    org = f"opening-{uuid.uuid4().hex[:8]}"
    ana = Principal(org=org, member="ana")
    owner = await asyncpg.connect(stack_settings["DATABASE_URL"])
    try:
        pinned = []
        for n in range(3):
            item = await insert_item(owner, org, "shared", f"Pinned rule {n}.", prefix="open")
            await owner.execute(
                "UPDATE memory.items SET pinned = true, updated_at = now() + $2 * interval '1 s'"
                " WHERE item_id = $1",
                item,
                n,
            )
            pinned.append(item)
        await insert_item(owner, org, "shared", "Not pinned.", prefix="open")
        await insert_item(owner, org, "member:bob", "Bob's.", prefix="open")

        async def ids(
            items: int | None = 0, policy: str | None = None, default: int = 0
        ) -> list[str]:
            return [c.item_id for c in (await store.opening(ana, items, policy, default)).pinned]

        newest = pinned[::-1]
        assert await ids() == []  # a generation read fetches none
        assert await ids(None, None, 12) == newest
        assert await ids(2, None, 12) == newest[:2]
        assert await ids(None, "newest_first", 12) == []
        await owner.execute(
            "INSERT INTO recall.org_policies (org, policy, max_items, updated_by)"
            " VALUES ($1, 'hybrid', 1, 'test')",
            org,
        )
        assert await ids(None, None, 12) == newest[:1]  # the org's limit
        assert await ids(3, None, 12) == newest  # the request's
        opening = await store.opening(ana)
        assert opening.policy.max_items == 1 and opening.generation["shared"] == 0
    finally:
        await owner.close()
