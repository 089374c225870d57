"""Hybrid recall beats either retriever alone, on a small labelled set, with the real
local model and the real Postgres: a paraphrase is found only through vectors, an exact
product code only through full text; fused, both are found.

The items go straight into ``memory.items`` as the owner (an org of their own), their
vectors through the indexer's store (``ensure_model`` + rechecked ``write_vectors``);
the queries go through recall's own path: ``matches`` + ``fuse`` as ``engram_recall``
under row-level security, embedded by the embedder the recall service opens.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest

from contracts.recall import SearchRequest
from engram.auth import Principal
from engram.db import create_pool, with_user
from engram.embeddings.providers import LOCAL_MODEL, LocalProvider, model_id
from engram.embeddings.settings import EmbeddingSettings
from engram.passages import passages
from services.indexer.adapters.store import VectorRow, VectorStore, create_vector_pool, vector_rows
from services.indexer.core import embedding_text, embedding_texts
from services.recall.adapters.embedder import CachedEmbedder, open_embedder
from services.recall.adapters.store import RecallStore
from services.recall.core import fuse
from services.recall.packets import Retrieval, matches
from services.recall.search import search
from services.recall.settings import RecallSettings

pytestmark = pytest.mark.integration

MEMORIES = {
    "revenue": "Our revenue is growing fast.",
    "cat": "The cat sleeps on the sofa.",
    "mugs": "The supplier in Porto closes for two weeks in December, so the blue ceramic "
    "mugs (zq-4471-vv) need reordering before the holidays.",
    "other-sku": "Part SKU-9B17-QP is discontinued.",
    "billing": "Deploy the billing service on Fridays only.",
    "plants": "The office plants need water on Mondays.",
}
# Each query and the memory it is about. No query shares a word with its paraphrase
# (full text cannot see it); a bare product code is far from the long sentence it sits
# in (cosine distance ~0.23 with this model, beyond its 0.2 cut), but matches it exactly.
LABELLED = {
    "Is our income increasing quickly?": "revenue",  # distance ~0.16
    "A kitten naps on the couch.": "cat",  # distance ~0.16
    "zq-4471-vv": "mugs",
}
TOP = 3


@pytest.fixture
async def org(stack_settings: dict[str, str]) -> AsyncIterator[str]:
    org = f"hybrid-{uuid.uuid4().hex[:8]}"
    yield org
    owner = await asyncpg.connect(stack_settings["DATABASE_URL"])
    try:
        await owner.execute("DELETE FROM indexer.vectors WHERE org = $1", org)
        await owner.execute("DELETE FROM memory.items WHERE org = $1", org)
        await owner.execute("DELETE FROM memory.generations WHERE org = $1", org)
    finally:
        await owner.close()


@pytest.fixture
async def recall_pool(stack_settings: dict[str, str]) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(with_user(stack_settings["DATABASE_URL"], "engram_recall"))
    yield pool
    await pool.close()


async def seed_items(dsn: str, org: str) -> None:
    now = datetime.now(UTC)
    owner = await asyncpg.connect(dsn)
    try:
        for key, text in MEMORIES.items():
            await owner.execute(
                "INSERT INTO memory.items (item_id, org, scope, stream_id, kind, status, "
                "content, revision, created_by, created_at, updated_at) "
                "VALUES ($1, $2, 'shared', $3, 'fact', 'active', $4, 1, $5, $6, $6)",
                f"{org}-{key}", org, f"{org}/shared", text, json.dumps({"org": org}), now,
            )  # fmt: skip
    finally:
        await owner.close()


async def index_items(dsn: str, org: str, model: LocalProvider) -> None:
    """What the indexer does for these items: register the model, embed, recheck, write."""
    pool = await create_vector_pool(dsn)
    try:
        store = VectorStore(pool)
        await store.ensure_model(model.model, model.dimensions)
        texts = [embedding_text(None, text) for text in MEMORIES.values()]
        vectors = await model.embed(texts)
        rows = [
            VectorRow(f"{org}-{key}", 1, model.model, vector, org, "shared")
            for key, vector in zip(MEMORIES, vectors, strict=True)
        ]
        assert (await store.write_vectors(rows)).written == len(MEMORIES)
    finally:
        await pool.close()


async def found_by(
    store: RecallStore, embedder: CachedEmbedder, who: Principal, retrieval: Retrieval
) -> dict[str, list[str]]:
    """For each labelled query, the memories recall returns (top 3, fused like a search)."""
    settings, found = RecallSettings(), {}
    for query in LABELLED:
        lists = await matches(store, embedder, who, query, settings, TOP, retrieval)
        found[query] = [r.item.item_id.removeprefix(f"{who.org}-") for r in fuse(lists, [], TOP)]
    return found


def hits(found: dict[str, list[str]]) -> set[str]:
    return {query for query, wanted in LABELLED.items() if wanted in found[query]}


@pytest.mark.usefixtures("opened_local_model")
async def test_hybrid_finds_what_either_retriever_alone_misses(
    stack_settings: dict[str, str], org: str, recall_pool: asyncpg.Pool, local_model: LocalProvider
) -> None:
    dsn = stack_settings["DATABASE_URL"]
    await seed_items(dsn, org)
    await index_items(dsn, org, local_model)
    local = EmbeddingSettings(MEMORY_EMBEDDING_PROVIDER="local")
    async with open_embedder(local, RecallSettings(), recall_pool) as embedder:
        assert embedder is not None
        # Recall asks for vectors under the name the indexer records them with.
        assert embedder.model == model_id(local) == LOCAL_MODEL
        store, ana = RecallStore(recall_pool), Principal(org=org, member="ana")
        full_text = await found_by(store, embedder, ana, "full_text")
        vector = await found_by(store, embedder, ana, "vector")
        hybrid = await found_by(store, embedder, ana, "hybrid")

    paraphrases = {"Is our income increasing quickly?", "A kitten naps on the couch."}
    assert hits(full_text) == {"zq-4471-vv"}, full_text
    assert hits(vector) == paraphrases, vector
    assert hits(hybrid) == set(LABELLED), hybrid
    # The exact code ranks first.
    assert hybrid["zq-4471-vv"][0] == "mugs"

    # An expired memory leaves vector recall as it leaves every other retriever (a code
    # review found the vectors' function taking any active item).
    owner = await asyncpg.connect(dsn)
    try:
        await owner.execute(
            "UPDATE memory.items SET expires_at = now() - interval '1 hour' WHERE item_id = $1",
            f"{org}-revenue",
        )
    finally:
        await owner.close()
    async with open_embedder(local, RecallSettings(), recall_pool) as embedder:
        assert embedder is not None
        after = await found_by(RecallStore(recall_pool), embedder, ana, "vector")
    assert "revenue" not in after["Is our income increasing quickly?"], after


@pytest.mark.usefixtures("opened_local_model")
async def test_a_long_memory_is_found_by_a_later_passage_and_shown_as_it(
    stack_settings: dict[str, str], org: str, recall_pool: asyncpg.Pool, local_model: LocalProvider
) -> None:
    """The model reads 256 tokens of a text: a long memory's third passage is found by its
    meaning through a vector of its own, and the search shows that passage (seed 004: the
    chunk the ranking scored)."""
    filler = ("Shipping volumes rose in the northern warehouse region " * 22)[:1189] + "."
    text = f"{filler}\n\n{filler}\n\nThe cat sleeps on the sofa."
    assert passages(text)[2] == "The cat sleeps on the sofa."
    dsn, item = stack_settings["DATABASE_URL"], f"{org}-long"
    owner = await asyncpg.connect(dsn)
    try:
        await owner.execute(
            "INSERT INTO memory.items (item_id, org, scope, stream_id, kind, status, content, "
            "content_length, revision, created_by, created_at, updated_at) "
            "VALUES ($1, $2, 'shared', $3, 'fact', 'active', $4, $5, 1, $6, now(), now())",
            item, org, f"{org}/shared", text, len(text), json.dumps({"org": org}),
        )  # fmt: skip
    finally:
        await owner.close()
    pool = await create_vector_pool(dsn)
    try:
        store = VectorStore(pool)
        await store.ensure_model(local_model.model, local_model.dimensions)
        texts = embedding_texts(None, text, local_model)
        vectors = iter(await local_model.embed([t.text for t in texts]))
        rows = vector_rows(item, 1, local_model.model, org, "shared", vectors, texts)
        assert (await store.write_vectors(rows)).written == 1
    finally:
        await pool.close()

    local = EmbeddingSettings(MEMORY_EMBEDDING_PROVIDER="local")
    async with open_embedder(local, RecallSettings(), recall_pool) as embedder:
        assert embedder is not None
        request = SearchRequest(query="A kitten naps on the couch.", retrieval="vector")
        found = await search(
            RecallStore(recall_pool), embedder, Principal(org=org, member="ana"), request,
            RecallSettings(),
        )  # fmt: skip
    [hit] = found.memories
    assert (hit.id, hit.memory, hit.truncated) == (item, "The cat sleeps on the sofa.", True)
    assert hit.full_length == len(text)
