"""Relevance feedback on real Postgres (recall 008_relevance_feedback.sql): candidates
come with their words, the term statistics cover only what the principal may see, and
the first answers' words lift a candidate that shares them."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from engram.auth import Principal
from engram.db import with_user
from services.recall.adapters.scoped import SCOPED, scopes_literal
from services.recall.adapters.store import RecallStore
from services.recall.packets import feed_back
from services.recall.settings import RecallSettings
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
        "hidden": ("member:bob", "Rufus the zeppelin dog and the painted sunset."),
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


async def test_candidates_come_with_their_words_and_the_statistics_with_the_query(
    stack_settings: dict[str, str], recall_pool: asyncpg.Pool
) -> None:
    org, ids = await seeded(stack_settings)
    store, ana = RecallStore(recall_pool), Principal(org=org, member="ana")
    found = await store.full_text(ana, QUERY, 12, words=True)
    first = found[0]
    assert first.item_id == ids["adopted"] and first.score > 0
    assert first.terms == {
        "carolin": 1,
        "adopt": 1,
        "dog": 1,
        "name": 1,
        "rufus": 1,
        "anim": 1,
        "shelter": 1,
    }
    stats = await store.term_stats(ana, QUERY, ["dog", "rufus", "zeppelin", "sunset"])
    # Six items are Ana's to see (Bob's is not): his words are not counted, and
    # "zeppelin", which only he holds, is not there at all.
    assert stats.items == 6 and stats.docs["dog"] == 2 and stats.docs["rufus"] == 2
    assert stats.docs["sunset"] == 1 and "zeppelin" not in stats.docs
    # The query's words some visible item holds, stemmed as the index has them ("pet":
    # none).
    assert stats.query == {"carolin", "adopt"}
    conn = await asyncpg.connect(stack_settings["DATABASE_URL"])
    try:
        mean = await conn.fetchval(
            "SELECT avg(length(tsv)) FROM memory.items WHERE org = $1 AND scope <> 'member:bob'",
            org,
        )
    finally:
        await conn.close()
    assert stats.avgdl == pytest.approx(float(mean))
    # Another org's principal sees nothing.
    other = await store.term_stats(Principal(org=f"{org}-x", member="ana"), QUERY, ["dog"])
    assert other.items == 0 and other.docs == {}


async def test_the_first_answers_words_lift_the_candidate_that_shares_them(
    stack_settings: dict[str, str], recall_pool: asyncpg.Pool
) -> None:
    org, ids = await seeded(stack_settings)
    store, ana = RecallStore(recall_pool), Principal(org=org, member="ana")
    plain_list = await store.full_text(ana, QUERY, 12)
    assert all(c.terms is None for c in plain_list)  # words are read only when asked for
    plain = [c.item_id for c in plain_list]
    # The question shares only "Caroline" with the walk, and as much with the painting.
    assert plain[0] == ids["adopted"] and set(plain) == {
        ids["adopted"],
        ids["walks"],
        ids["painted"],
    }
    assert plain.index(ids["painted"]) < plain.index(ids["walks"])
    async with store.session(ana):
        lists = {"full_text": await store.full_text(ana, QUERY, 12, words=True)}
        fed = await feed_back(store, ana, QUERY, lists, RecallSettings())
    # The first answer lends "dog" and "Rufus", which the walk holds too.
    assert [c.item_id for c in fed] == [ids["adopted"], ids["walks"], ids["painted"]]
