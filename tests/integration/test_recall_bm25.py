"""The BM25 term index (projector 003_terms.sql, 005_term_deltas.sql and
008_statement_terms.sql, recall 007_bm25_deltas.sql): kept by the items table's triggers
through every change, ranked by word rarity, and emptied by a forget."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from engram.auth import Principal
from engram.db import with_user
from services.recall.adapters.scoped import SCOPED, scopes_literal
from services.recall.adapters.store import RecallStore
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


async def test_ts_rank_cd_finds_rare_and_common_words_alike(
    stack_settings: dict[str, str], owner: asyncpg.Connection
) -> None:
    """recall.full_text reads a rare word's few items through the term index and checks
    every visible item for a common word (009_full_text_by_terms.sql): both ways give
    every match of the visible scopes, and nothing of a scope the caller cannot see."""
    org = f"bm25-{uuid.uuid4().hex[:8]}"
    ana = Principal(org=org, member="ana")
    common = [await seed(owner, org, "shared", f"Standup moved to {n} today.") for n in range(29)]
    kayak = await seed(owner, org, "shared", "The kayak rental closes at six.")
    mine = await seed(owner, org, "member:ana", "Standup notes: book the kayak.")
    await seed(owner, org, "member:bob", "Bob's kayak and standup notes.")  # not ana's
    pool = await asyncpg.create_pool(
        with_user(stack_settings["DATABASE_URL"], "engram_recall"), min_size=1, max_size=2
    )
    assert pool is not None
    store = RecallStore(pool)
    try:
        rare = await store.full_text(ana, "kayak", 50, "ts_rank_cd")  # 3 of 32: the index
        assert {c.item_id for c in rare} == {kayak, mine}
        frequent = await store.full_text(ana, "standup", 50, "ts_rank_cd")  # 31: every item
        assert {c.item_id for c in frequent} == {*common, mine}
    finally:
        await pool.close()


async def test_statements_of_many_rows_keep_the_counts_equal_to_a_recount(
    owner: asyncpg.Connection,
) -> None:
    """The index follows a statement's rows together (008_statement_terms.sql): after a
    many-row INSERT, UPDATE and DELETE, the postings and counts are those of a recount."""
    org = f"bm25-{uuid.uuid4().hex[:8]}"
    stream = f"{org}/shared"
    ids = [f"bm25-{uuid.uuid4()}" for _ in range(4)]
    texts = [
        "Deploys happen on Tuesday.",
        "The deploy freeze starts Friday.",
        "Tuesday standup moved to ten.",
        "The the of and",
    ]  # the last: stop words only
    await owner.execute(
        "INSERT INTO memory.items (item_id, org, scope, stream_id, kind, status, content, "
        "revision, created_by, created_at, updated_at) "
        "SELECT i, $2, 'shared', $3, 'fact', 'active', t, 1, '{}', now(), now() "
        "FROM unnest($1::text[], $4::text[]) AS u(i, t)",
        ids,
        org,
        stream,
        texts,
    )
    await owner.execute(  # one changes its words, one leaves 'active', one only its pin
        "UPDATE memory.items SET "
        "content = CASE WHEN item_id = $1 THEN 'Deploys happen on Wednesday.' ELSE content END, "
        "status = CASE WHEN item_id = $2 THEN 'disabled' ELSE status END, "
        "pinned = item_id = $3 WHERE item_id = ANY ($4)",
        ids[0],
        ids[1],
        ids[2],
        ids,
    )
    await owner.execute("DELETE FROM memory.items WHERE item_id = $1", ids[3])
    await owner.execute("SELECT memory.fold_term_counts()")  # as the projector does

    counts = await owner.fetch(
        "SELECT lexeme, docs, length FROM memory.term_counts WHERE stream_id = $1 ORDER BY lexeme",
        stream,
    )
    recount = await owner.fetch(
        "SELECT l AS lexeme, count(*)::int AS docs, "
        "       sum(CASE WHEN l = '' THEN length(tsv) ELSE 0 END)::bigint AS length "
        "FROM memory.items, unnest(array_prepend('', tsvector_to_array(tsv))) AS l "
        "WHERE stream_id = $1 AND status = 'active' GROUP BY l ORDER BY l",
        stream,
    )
    assert [tuple(r) for r in counts] == [tuple(r) for r in recount]
    assert {r["lexeme"] for r in counts} == {
        "",
        "deploy",
        "happen",
        "wednesday",
        "tuesday",
        "standup",
        "move",
        "ten",
    }
    postings = await owner.fetch(
        "SELECT item_id, lexeme FROM memory.terms WHERE stream_id = $1", stream
    )
    expected = await owner.fetch(
        "SELECT item_id, u.lexeme FROM memory.items, unnest(tsv) AS u "
        "WHERE stream_id = $1 AND status = 'active'",
        stream,
    )
    assert sorted(map(tuple, postings)) == sorted(map(tuple, expected))


async def test_expired_memories_do_not_crowd_a_live_match_out(
    stack_settings: dict[str, str], owner: asyncpg.Connection
) -> None:
    """QA: 30 expired memories matching "wombat" strongly left the one live match out,
    and the search answered nothing (they keep their postings: an expired memory stays
    active). The pool deepens until it has enough live ones."""
    org = f"bm25-{uuid.uuid4().hex[:8]}"
    ana = Principal(org=org, member="ana")
    expired = [
        await seed(owner, org, "member:ana", f"wombat wombat wombat wombat note {n}")
        for n in range(130)
    ]
    await owner.execute(
        "UPDATE memory.items SET expires_at = now() - interval '1 day' WHERE item_id = ANY($1)",
        expired,
    )
    live = await seed(
        owner, org, "member:ana", "a wombat lives in burrows under the ground of the bush"
    )
    assert await ranked(stack_settings, ana, "wombat") == [live]
