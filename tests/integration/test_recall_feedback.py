"""Relevance feedback on real Postgres (recall 008_relevance_feedback.sql): the feedback
items lend the words that other candidates share with them, the query's own words
score as recall.bm25 scores them, and nothing the principal may not see takes part."""

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

QUERY = "What pet did Caroline adopt?"


@pytest.fixture
async def recall_pool(stack_settings: dict[str, str]) -> AsyncIterator[asyncpg.Pool]:
    pool = await asyncpg.create_pool(
        with_user(stack_settings["DATABASE_URL"], "engram_recall"), min_size=1, max_size=2
    )
    assert pool is not None
    try:
        yield pool
    finally:
        await pool.close()


async def as_ana(pool: asyncpg.Pool, org: str, sql: str, *args: object) -> list[asyncpg.Record]:
    ana = Principal(org=org, member="ana")
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(SCOPED, org, scopes_literal(ana.visible_scopes()), "ana")
        return list(await conn.fetch(sql, *args))


async def seeded(stack_settings: dict[str, str]) -> tuple[str, dict[str, str]]:
    org = f"feedback-{uuid.uuid4().hex[:8]}"
    texts = {
        "adopted": ("shared", "Caroline adopted a dog named Rufus from the animal shelter."),
        "walks": ("member:ana", "Caroline walks Rufus the dog by the river every morning."),
        "painted": ("shared", "Caroline painted a sunset over the lake last summer."),
        "camping": ("shared", "Melanie went camping with her kids in the mountains."),
        "race": ("member:ana", "Melanie ran a charity race for the children's hospital."),
        "meeting": ("shared", "The team meeting moved to Monday morning."),
        "hidden": ("member:bob", "Rufus the dog, Rufus the dog, and the painted sunset."),
    }
    conn = await asyncpg.connect(stack_settings["DATABASE_URL"])
    try:
        ids = {
            name: await insert_item(conn, org, scope, text, prefix="fb")
            for name, (scope, text) in texts.items()
        }
    finally:
        await conn.close()
    return org, ids


async def scores(
    pool: asyncpg.Pool, org: str, feedback: list[str], candidates: list[str]
) -> dict[str, float]:
    rows = await as_ana(
        pool,
        org,
        "SELECT item_id, score FROM recall.bm25_feedback($1, $2, $3, 10, 0.3)",
        QUERY,
        feedback,
        candidates,
    )
    return {r["item_id"]: r["score"] for r in rows}


async def test_shared_words_lift_the_candidates_that_hold_them(
    stack_settings: dict[str, str], recall_pool: asyncpg.Pool
) -> None:
    org, ids = await seeded(stack_settings)
    first = await as_ana(recall_pool, org, "SELECT item_id, rank FROM recall.bm25($1, 12)", QUERY)
    plain = {r["item_id"]: r["rank"] for r in first}
    # The question shares only "Caroline" with the answer about walking Rufus; the
    # painting is as close to it as that answer.
    assert first[0]["item_id"] == ids["adopted"]
    assert set(plain) == {ids["adopted"], ids["walks"], ids["painted"]}
    assert plain[ids["painted"]] >= plain[ids["walks"]]

    candidates = [r["item_id"] for r in first]
    # Without feedback items, the scores are recall.bm25's own.
    unchanged = await scores(recall_pool, org, [], candidates)
    assert unchanged == pytest.approx(plain, rel=1e-5)

    # The first answer lends "dog" and "Rufus", which the walk holds too; "shelter",
    # "animal" and "named" no other candidate holds, so they lend nothing.
    fed = await scores(recall_pool, org, [ids["adopted"]], candidates)
    assert fed[ids["walks"]] > fed[ids["painted"]] == pytest.approx(plain[ids["painted"]])
    assert fed[ids["adopted"]] > fed[ids["walks"]]
    lent = fed[ids["walks"]] - plain[ids["walks"]]
    assert 0 < lent < plain[ids["walks"]]  # lent words weigh 0.3 of a query word


async def test_what_the_principal_may_not_see_takes_no_part(
    stack_settings: dict[str, str], recall_pool: asyncpg.Pool
) -> None:
    org, ids = await seeded(stack_settings)
    candidates = [ids["adopted"], ids["walks"], ids["painted"]]
    without = await scores(recall_pool, org, [], candidates)
    # Bob's item as feedback lends nothing, and as a candidate gets no score.
    assert await scores(recall_pool, org, [ids["hidden"]], candidates) == without
    assert ids["hidden"] not in await scores(
        recall_pool, org, [ids["adopted"]], [*candidates, ids["hidden"]]
    )
    # Another org's principal sees none of it.
    rows = await as_ana(
        recall_pool,
        f"{org}-other",
        "SELECT * FROM recall.bm25_feedback($1, $2, $3, 10, 0.3)",
        QUERY,
        [ids["adopted"]],
        candidates,
    )
    assert rows == []


async def test_the_store_returns_the_pool_scores(
    stack_settings: dict[str, str], recall_pool: asyncpg.Pool
) -> None:
    org, ids = await seeded(stack_settings)
    store = RecallStore(recall_pool)
    ana = Principal(org=org, member="ana")
    pool = [ids["walks"], ids["painted"], ids["camping"]]
    found = await store.feedback_scores(ana, QUERY, [ids["adopted"]], pool, 10, 0.3)
    # The camping trip holds no query word and no lent word: it has no score.
    assert set(found) == {ids["walks"], ids["painted"]}
    assert found[ids["walks"]] > found[ids["painted"]]
