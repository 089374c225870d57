"""The BM25 term index (projector 003_terms.sql and 005_term_deltas.sql, recall
007_bm25_deltas.sql): kept by the items table's trigger through every change, ranked by
word rarity, and emptied by a forget."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from engram.auth import Principal
from engram.db import with_user
from services.recall.adapters.store import SCOPED, RecallStore, scopes_literal
from tests.support import insert_item

pytestmark = pytest.mark.integration


@pytest.fixture
async def owner(stack_settings: dict[str, str]) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(stack_settings["DATABASE_URL"])
    try:
        yield conn
    finally:
        await conn.close()


async def seed(conn: asyncpg.Connection, org: str, scope: str, text: str) -> str:
    return await insert_item(conn, org, scope, text, prefix="bm25")


async def ranked(stack: dict[str, str], p: Principal, query: str) -> list[str]:
    conn = await asyncpg.connect(with_user(stack["DATABASE_URL"], "engram_recall"))
    try:
        async with conn.transaction():
            await conn.execute(SCOPED, p.org, scopes_literal(p.visible_scopes()), p.member)
            rows = await conn.fetch("SELECT item_id FROM recall.bm25($1, 30)", query)
        return [r["item_id"] for r in rows]
    finally:
        await conn.close()


async def test_rare_words_outrank_common_ones(
    stack_settings: dict[str, str], owner: asyncpg.Connection
) -> None:
    org = f"bm25-{uuid.uuid4().hex[:8]}"
    ana = Principal(org=org, member="ana")
    common = [await seed(owner, org, "shared", f"The team meeting number {n}.") for n in range(8)]
    rare = await seed(owner, org, "member:ana", "The budget review is on Friday morning.")
    both = await seed(owner, org, "member:ana", "The team budget review is on Friday.")
    unrelated = await seed(owner, org, "shared", "Lunch is at noon.")

    got = await ranked(stack_settings, ana, "team budget")
    # "budget" is in 2 of 11 items, "team" in 9: the items with the rare word come first
    # (of two as long, the one with both words first); no padding with unrelated items.
    assert got[:2] == [both, rare]
    assert set(got[2:]) == set(common) and unrelated not in got
    # A long query counts its 32 rarest words; the rare word still ranks first.
    noise = " ".join(f"meeting{n} team" for n in range(300))
    assert (await ranked(stack_settings, ana, f"{noise} budget"))[:2] == [both, rare]
    assert await ranked(stack_settings, ana, "") == []
    assert await ranked(stack_settings, ana, "the of and") == []  # only stop words


async def test_the_index_follows_each_change_and_a_forget_leaves_no_word_behind(
    stack_settings: dict[str, str], owner: asyncpg.Connection
) -> None:
    org = f"bm25-{uuid.uuid4().hex[:8]}"
    ana = Principal(org=org, member="ana")
    keep = await seed(owner, org, "shared", "Deploys happen on Tuesday.")
    item = await seed(owner, org, "shared", "The pelican code is 4471.")
    stream = f"{org}/shared"

    async def words() -> dict[str, int]:
        await owner.execute("SELECT memory.fold_term_counts()")  # as the projector does
        rows = await owner.fetch(
            "SELECT lexeme, docs FROM memory.term_counts WHERE stream_id = $1", stream
        )
        return {r["lexeme"]: r["docs"] for r in rows}

    # Before the counts are folded, the ranking reads the pending deltas.
    assert await ranked(stack_settings, ana, "pelican") == [item]
    assert (await words())[""] == 2 and (await words())["pelican"] == 1
    assert (
        await owner.fetchval("SELECT count(*) FROM memory.term_deltas WHERE stream_id = $1", stream)
        == 0
    )

    # A correction replaces the item's words.
    await owner.execute(
        "UPDATE memory.items SET content = 'The heron code is 4471.', revision = 2 "
        "WHERE item_id = $1",
        item,
    )
    assert "pelican" not in await words() and (await words())["heron"] == 1
    assert await ranked(stack_settings, ana, "pelican") == []
    assert await ranked(stack_settings, ana, "heron") == [item]

    # Disabled: out of the index; enabled again: back.
    await owner.execute("UPDATE memory.items SET status = 'disabled' WHERE item_id = $1", item)
    assert await ranked(stack_settings, ana, "heron") == [] and (await words())[""] == 1
    await owner.execute("UPDATE memory.items SET status = 'active' WHERE item_id = $1", item)
    assert await ranked(stack_settings, ana, "heron code") == [item]

    # Forgotten: no posting and no count of its own words stays.
    await owner.execute(
        "UPDATE memory.items SET status = 'forgotten', content = NULL WHERE item_id = $1", item
    )
    assert await owner.fetchval("SELECT count(*) FROM memory.terms WHERE item_id = $1", item) == 0
    assert set(await words()) == {"", "deploy", "happen", "tuesday"}
    assert await ranked(stack_settings, ana, "deploys") == [keep]


async def test_the_store_ranks_by_either_setting(
    stack_settings: dict[str, str], owner: asyncpg.Connection
) -> None:
    org = f"bm25-{uuid.uuid4().hex[:8]}"
    ana = Principal(org=org, member="ana")
    item = await seed(owner, org, "shared", "The kayak rental closes at six.")
    await seed(owner, org, "shared", "Lunch is at noon.")
    pool = await asyncpg.create_pool(
        with_user(stack_settings["DATABASE_URL"], "engram_recall"), min_size=1, max_size=2
    )
    assert pool is not None
    store = RecallStore(pool)
    try:
        for ranking in ("bm25", "ts_rank_cd"):
            found = await store.full_text(ana, "When does the kayak rental close?", 30, ranking)
            assert [c.item_id for c in found] == [item], ranking
            assert await store.full_text(ana, "the of", 30, ranking) == [], ranking
    finally:
        await pool.close()
