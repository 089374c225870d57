"""The vector writer, the nearest query and re-embedding, against the real Postgres.

Items are rows written straight into memory.items (the projector's table), each
test with an org of its own, so tests never see each other's rows.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from engram.db import migrate
from engram.embeddings.errors import EmbeddingError
from engram.embeddings.providers import LOCAL_MODEL, LocalProvider
from services.indexer.adapters.store import (
    VectorRow,
    VectorStore,
    apply_plans,
    create_vector_pool,
)
from services.indexer.core import Plan, Tracked
from services.indexer.errors import ModelMismatchError
from services.indexer.reindex import ReindexProgress, reindex, run_reindex

pytestmark = pytest.mark.integration
DEADLINE = 10.0
ROOT = Path(__file__).resolve().parents[2]


class HashProvider:
    """A small deterministic model: same text, same vector; it counts what it embeds."""

    def __init__(self, model: str, dimensions: int = 8, fail_on_call: int | None = None) -> None:
        self.model, self.dimensions, self.max_distance = model, dimensions, 0.4
        self.embedded: Counter[str] = Counter()
        self.calls = 0
        self._fail_on_call = fail_on_call

    async def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls == self._fail_on_call:
            raise EmbeddingError("scripted failure")
        self.embedded.update(texts)
        return [self.vector(t) for t in texts]

    async def embed_queries(self, texts: list[str]) -> list[list[float]]:
        raise AssertionError("the indexer embeds memories, never queries")

    def heading(self, title: str | None) -> str | None:
        return title

    def pieces(self, title: str | None, passage: str) -> list[str]:
        return [passage]  # reads any text whole

    def vector(self, text: str) -> list[float]:
        digest = hashlib.sha256(f"{self.model}:{text}".encode()).digest()
        return [b / 255.0 + 0.01 for b in digest[: self.dimensions]]


class GatedProvider:
    """Wraps a provider; each embed waits until the test opens the gate."""

    def __init__(self, inner: LocalProvider) -> None:
        self.model, self.dimensions, self._inner = inner.model, inner.dimensions, inner
        self.max_distance = inner.max_distance
        self.started, self.gate = asyncio.Event(), asyncio.Event()
        self.pieces, self.heading = inner.pieces, inner.heading

    async def embed_queries(self, texts: list[str]) -> list[list[float]]:
        raise AssertionError("the indexer embeds memories, never queries")

    async def embed(self, texts: list[str]) -> list[list[float]]:
        vectors = await self._inner.embed(texts)
        self.started.set()
        await self.gate.wait()
        return vectors


@pytest.fixture(scope="module")
async def pool(stack_settings: dict[str, str]) -> AsyncIterator[asyncpg.Pool]:
    dsn = stack_settings["DATABASE_URL"]
    await migrate(dsn, "projector", ROOT / "services" / "projector" / "sql")
    await migrate(dsn, "indexer", ROOT / "services" / "indexer" / "sql")
    pool = await create_vector_pool(dsn)
    yield pool
    await pool.close()


@pytest.fixture
async def org(pool: asyncpg.Pool) -> AsyncIterator[str]:
    name = f"idx-{uuid.uuid4().hex[:10]}"
    yield name
    for table in ("indexer.vectors", "indexer.items", "memory.items"):
        await pool.execute(f"DELETE FROM {table} WHERE org = $1", name)
    await pool.execute("DELETE FROM indexer.reindex_jobs WHERE org = $1", name)


async def put_item(
    pool: asyncpg.Pool,
    org: str,
    item_id: str,
    content: str,
    *,
    status: str = "active",
    revision: int = 1,
    scope: str = "shared",
    title: str | None = None,
) -> str:
    """Write (or overwrite) the projector's row of an item, as a projection would."""
    await pool.execute(
        """INSERT INTO memory.items (item_id, org, scope, stream_id, kind, status, title, content,
                                     content_length, revision, created_by, created_at, updated_at)
           VALUES ($1, $2, $3, $2 || '/' || $3, 'fact', $4, $5, $6, length($6), $7, '{}',
                   now(), now())
           ON CONFLICT (item_id) DO UPDATE SET status = EXCLUDED.status, title = EXCLUDED.title,
               content = EXCLUDED.content, revision = EXCLUDED.revision""",
        item_id,
        org,
        scope,
        status,
        title,
        content,
        revision,
    )
    return item_id


async def vectors(pool: asyncpg.Pool, org: str) -> dict[tuple[str, str], int]:
    rows = await pool.fetch(
        "SELECT item_id, model, revision FROM indexer.vectors WHERE org = $1", org
    )
    return {(r["item_id"], r["model"]): r["revision"] for r in rows}


def row(item_id: str, org: str, revision: int, model: str, embedding: list[float]) -> VectorRow:
    return VectorRow(item_id, revision, model, embedding, org, "shared")


# -- the race: a late embedding never brings forgotten or stale text back ---------------------


async def test_an_embedding_finishing_after_a_forget_writes_nothing(
    pool: asyncpg.Pool, org: str, local_model: LocalProvider
) -> None:
    item = await put_item(pool, org, f"{org}-trip", "The trip budget is 1500 EUR.")
    gated = GatedProvider(local_model)
    await VectorStore(pool).ensure_model(gated.model, gated.dimensions)
    task = asyncio.create_task(reindex(pool, gated, org=org))
    await asyncio.wait_for(gated.started.wait(), DEADLINE)  # the request is in flight
    await put_item(pool, org, item, "", status="forgotten")  # the projector forgets it
    gated.gate.set()
    progress = await asyncio.wait_for(task, DEADLINE)
    assert (progress.embedded, progress.dropped) == (0, 1)
    assert await vectors(pool, org) == {}


async def test_an_embedding_of_a_corrected_item_writes_nothing_for_the_old_revision(
    pool: asyncpg.Pool, org: str, local_model: LocalProvider
) -> None:
    item = await put_item(pool, org, f"{org}-trip", "The trip budget is 1500 EUR.")
    [old] = await local_model.embed(["The trip budget is 1500 EUR."])
    await put_item(pool, org, item, "The trip budget is 1600 EUR.", revision=2)  # corrected
    result = await VectorStore(pool).write_vectors([row(item, org, 1, local_model.model, old)])
    assert (result.written, dict(result.dropped)) == (0, {"stale": 1})
    assert await vectors(pool, org) == {}


@pytest.mark.parametrize("status", ["disabled", "archived", "candidate", "forgotten"])
async def test_only_an_item_active_at_that_revision_gets_its_vector(
    pool: asyncpg.Pool, org: str, status: str
) -> None:
    model = HashProvider("hash-a")
    await VectorStore(pool).ensure_model(model.model, model.dimensions)
    live = await put_item(pool, org, f"{org}-live", "live")
    gone = await put_item(pool, org, f"{org}-gone", "gone", status=status)
    missing = f"{org}-not-projected-anywhere"
    rows = [row(i, org, 1, model.model, model.vector(i)) for i in (live, gone, missing)]
    result = await VectorStore(pool).write_vectors(rows)
    assert result.written == 1
    assert await vectors(pool, org) == {(live, "hash-a"): 1}


async def test_the_indexers_own_view_wins_when_the_projector_lags(
    pool: asyncpg.Pool, org: str
) -> None:
    """The indexer has read the forget; the projector still shows the item active."""
    model = HashProvider("hash-a")
    store = VectorStore(pool)
    await store.ensure_model(model.model, model.dimensions)
    item = await put_item(pool, org, f"{org}-trip", "The trip budget is 1500 EUR.")
    forgotten = Tracked(item, org, "shared", "forgotten", 1)
    async with pool.acquire() as conn, conn.transaction():
        await apply_plans(conn, [forgotten], [Plan(item, None, None, False)])
    result = await store.write_vectors([row(item, org, 1, model.model, model.vector("t"))])
    assert dict(result.dropped) == {"forgotten": 1}
    assert await vectors(pool, org) == {}


async def test_a_write_waits_for_the_forget_in_flight_and_then_drops(
    pool: asyncpg.Pool, org: str
) -> None:
    model = HashProvider("hash-a")
    store = VectorStore(pool)
    await store.ensure_model(model.model, model.dimensions)
    item = await put_item(pool, org, f"{org}-trip", "The trip budget is 1500 EUR.")
    forgotten = Tracked(item, org, "shared", "forgotten", 1)
    async with pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        await apply_plans(conn, [forgotten], [Plan(item, None, None, False)])  # holds the lock
        late = asyncio.create_task(
            store.write_vectors([row(item, org, 1, model.model, model.vector("t"))])
        )
        await wait_for_lock_waiter(pool)
        assert not late.done()
        await tx.commit()
    result = await asyncio.wait_for(late, DEADLINE)
    assert dict(result.dropped) == {"forgotten": 1}
    assert await vectors(pool, org) == {}


async def wait_for_lock_waiter(pool: asyncpg.Pool) -> None:
    deadline = time.monotonic() + DEADLINE
    while not await pool.fetchval(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
    ):
        assert time.monotonic() < deadline, "the late write never waited for the item's lock"
        await asyncio.sleep(0.02)


# -- the nearest query the recall service runs -------------------------------------------------


async def test_nearest_finds_by_meaning_within_org_scopes_current_revision_and_active(
    pool: asyncpg.Pool, org: str, local_model: LocalProvider
) -> None:
    trip = await put_item(pool, org, f"{org}-trip", "The trip budget is 1500 EUR.")
    rule = await put_item(
        pool, org, f"{org}-rule", "Run the tests before you report that work is done."
    )
    private = await put_item(
        pool, org, f"{org}-private", "Our holiday budget is 2000 EUR.", scope="member:bo"
    )
    other = f"{org}-x"
    await put_item(pool, other, f"{other}-trip", "The trip budget is 1500 EUR.")
    try:
        assert (await reindex(pool, local_model, org=org)).embedded == 3
        assert (await reindex(pool, local_model, org=other)).embedded == 1
        [query] = await local_model.embed_queries(["How much can we spend on the vacation?"])
        store = VectorStore(pool)

        hits = await store.nearest(org, ["shared"], local_model.model, query, 2.0, 10)
        assert [h[0] for h in hits] == [trip, rule]  # nearest first; no other org, no bo
        assert hits[0][1] < hits[1][1]
        # Distances with this model: trip ~0.20, bo's holiday ~0.17, the rule ~0.31.
        assert [
            h[0] for h in await store.nearest(org, ["shared"], local_model.model, query, 0.25, 10)
        ] == [trip]
        both = await store.nearest(org, ["shared", "member:bo"], local_model.model, query, 0.25, 10)
        assert {h[0] for h in both} == {trip, private}

        await put_item(pool, org, rule, "Run the tests first.", revision=2)  # not re-embedded
        await put_item(
            pool, org, trip, "The trip budget is 1500 EUR.", status="disabled", revision=2
        )
        assert await store.nearest(org, ["shared"], local_model.model, query, 2.0, 10) == []
        assert await store.nearest(org, ["shared"], "no-such-model", query, 2.0, 10) == []
    finally:
        await pool.execute("DELETE FROM indexer.vectors WHERE org = $1", other)
        await pool.execute("DELETE FROM memory.items WHERE org = $1", other)
        await pool.execute("DELETE FROM indexer.reindex_jobs WHERE org = $1", other)


async def test_each_model_gets_a_partial_hnsw_cosine_index(pool: asyncpg.Pool) -> None:
    model = HashProvider(f"hash-{uuid.uuid4().hex[:6]}", dimensions=5)
    try:
        await VectorStore(pool).ensure_model(model.model, model.dimensions)
        await VectorStore(pool).ensure_model(model.model, model.dimensions)  # idempotent
        index = await pool.fetchval(
            "SELECT indexdef FROM pg_indexes i JOIN indexer.models m "
            "ON m.index_name = i.indexname WHERE m.model = $1",
            model.model,
        )
        assert "USING hnsw" in index and "vector_cosine_ops" in index
        assert "vector(5)" in index and model.model in index
        with pytest.raises(ModelMismatchError, match="dimensions"):
            await VectorStore(pool).ensure_model(model.model, 6)
    finally:
        await drop_model(pool, model.model)


async def drop_model(pool: asyncpg.Pool, model: str) -> None:
    """A test model leaves nothing behind: its vectors, its row and its HNSW index."""
    await pool.execute("DELETE FROM indexer.vectors WHERE model = $1", model)
    index = await pool.fetchval(
        "DELETE FROM indexer.models WHERE model = $1 RETURNING index_name", model
    )
    if index:
        await pool.execute(f'DROP INDEX IF EXISTS indexer."{index}"')


# -- model change ------------------------------------------------------------------------------


async def test_a_model_change_re_embeds_every_active_item_once_and_drops_the_old_model(
    pool: asyncpg.Pool, org: str
) -> None:
    texts = {f"{org}-{n}": f"memory number {n}" for n in range(5)}
    for item_id, text in texts.items():
        await put_item(pool, org, item_id, text)
    await put_item(pool, org, f"{org}-off", "disabled text", status="disabled")
    await put_item(pool, org, f"{org}-cand", "a candidate", status="candidate")
    old, new = HashProvider("hash-old"), HashProvider("hash-new", dimensions=12, fail_on_call=3)

    assert (await reindex(pool, old, org=org, batch_size=2)).done
    assert set(await vectors(pool, org)) == {(i, "hash-old") for i in texts}

    stopped = await reindex(pool, new, org=org, batch_size=2)  # fails on its third request
    assert (stopped.done, stopped.embedded) == (False, 4) and stopped.stopped
    resumed = await reindex(pool, new, org=org, batch_size=2)  # resumes after the cursor
    assert resumed.done and resumed.job_id == stopped.job_id and resumed.embedded == 5
    assert (await reindex(pool, new, org=org, batch_size=2)).embedded == 0  # nothing left

    assert new.embedded == Counter(texts.values())  # each text exactly once
    assert await vectors(pool, org) == {(i, "hash-new"): 1 for i in texts}
    store = VectorStore(pool)
    [query] = [new.vector("memory number 3")]
    assert (await store.nearest(org, ["shared"], "hash-new", query, 2.0, 1))[0][0] == f"{org}-3"
    assert await store.nearest(org, ["shared"], "hash-old", old.vector("x"), 2.0, 10) == []


@pytest.mark.usefixtures("opened_local_model")
async def test_the_cli_entry_point_re_embeds_with_the_configured_model_or_says_off(
    pool: asyncpg.Pool, org: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    item = await put_item(pool, org, f"{org}-trip", "The trip budget is 1500 EUR.")
    monkeypatch.setenv("MEMORY_EMBEDDING_PROVIDER", "local")
    seen: list[ReindexProgress] = []
    progress = await run_reindex(org, seen.append)
    assert progress is not None and progress.done and progress.embedded == 1
    assert seen and seen[-1].embedded == 1
    assert await vectors(pool, org) == {(item, LOCAL_MODEL): 1}
    monkeypatch.setenv("MEMORY_EMBEDDING_PROVIDER", "off")
    assert await run_reindex(org) is None


@pytest.mark.parametrize("count", [40, 1200])
async def test_nearest_is_exact_below_a_thousand_vectors_and_through_the_graph_above(
    pool: asyncpg.Pool, org: str, count: int
) -> None:
    """Both ways of searching return the nearest items, nearest first, within the cut:
    every vector of a small set ranked exactly, and the HNSW graph for a larger one (an
    approximate search: at least four of the true five)."""
    model = HashProvider(f"hash-{uuid.uuid4().hex[:6]}", dimensions=8)
    store = VectorStore(pool)
    await store.ensure_model(model.model, model.dimensions)
    ids = [f"{org}-{i}" for i in range(count)]
    await pool.executemany(
        "INSERT INTO memory.items (item_id, org, scope, stream_id, kind, status, content, "
        "content_length, revision, created_by, created_at, updated_at) VALUES "
        "($1, $2, 'shared', $2 || '/shared', 'fact', 'active', $1, 1, 1, '{}', now(), now())",
        [(i, org) for i in ids],
    )
    rows = [VectorRow(i, 1, model.model, model.vector(i), org, "shared") for i in ids]
    assert (await store.write_vectors(rows)).written == count
    try:
        for probe in ids[:5]:
            query = model.vector(probe)
            exact = sorted(ids, key=lambda i: (cosine(model.vector(i), query), i))[:5]
            hits = await store.nearest(org, ["shared"], model.model, query, 2.0, 5)
            found = [h[0] for h in hits]
            assert [h[1] for h in hits] == sorted(h[1] for h in hits)  # nearest first
            if count < 1000:
                assert found == exact
            else:
                assert found[0] == probe and len(set(found) & set(exact)) >= 4
            # Halfway between the third and the fourth (the database computes in float4).
            cut = (
                cosine(model.vector(exact[2]), query) + cosine(model.vector(exact[3]), query)
            ) / 2
            within = await store.nearest(org, ["shared"], model.model, query, cut, 5)
            assert set(h[0] for h in within) <= set(exact[:3])
            assert len(within) == 3 if count < 1000 else len(within) >= 2
    finally:
        await drop_model(pool, model.model)


def cosine(a: list[float], b: list[float]) -> float:
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return 1.0 - sum(x * y for x, y in zip(a, b, strict=True)) / norm


async def test_nearest_names_each_memory_once_and_reads_on_until_it_has_the_limit(
    pool: asyncpg.Pool, org: str
) -> None:
    """A long memory has a vector a passage (engram.passages): the nearest rows may hold
    few memories (QA: 20 memories of four passages, a limit of 20: 16 found)."""
    model, store = "hash-passages", VectorStore(pool)
    await store.ensure_model(model, 3)
    try:
        rows = []
        for n in range(20):
            item = await put_item(pool, org, f"{org}-{n:02}", "long text " * 200)
            rows += [
                VectorRow(item, 1, model, [1.0, 0.01 * n + 0.001 * (3 - p), 0.0], org, "shared", p)
                for p in range(4)
            ]
        assert (await store.write_vectors(rows)).written == 20
        hits = await store.nearest(org, ["shared"], model, [1.0, 0.0, 0.0], 2.0, 20)
        assert [h[0] for h in hits] == [f"{org}-{n:02}" for n in range(20)]  # once each
        passages = await pool.fetch(
            "SELECT passage FROM indexer.nearest($1, ARRAY['shared'], $2, $3, 2.0, 3)",
            org, model, [1.0, 0.0, 0.0],
        )  # fmt: skip
        assert [r["passage"] for r in passages] == [3, 3, 3]  # each by its nearest passage

        # A row of an earlier revision, nearer than the current ones, does not hide the
        # item (the re-embedding pass may write before the event path voids the old).
        stale = f"{org}-00"
        await put_item(pool, org, stale, "long text " * 200, revision=2)
        await pool.execute(
            "UPDATE indexer.vectors SET revision = 2 WHERE item_id = $1 AND passage > 0", stale
        )
        await pool.execute(
            "UPDATE indexer.vectors SET embedding = $2 WHERE item_id = $1 AND passage = 0",
            stale, [1.0, 0.0, 0.0],
        )  # fmt: skip
        [first] = await pool.fetch(
            "SELECT item_id, passage FROM indexer.nearest($1, ARRAY['shared'], $2, $3, 2.0, 1)",
            org, model, [1.0, 0.0, 0.0],
        )  # fmt: skip
        assert (first["item_id"], first["passage"]) == (stale, 3)
    finally:
        await drop_model(pool, model)
