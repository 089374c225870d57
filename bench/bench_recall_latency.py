"""Recall latency: p50/p99 of a packet with 10,000 and 100,000 items in the caller's
scopes and 1,000,000 in the database, full text only and hybrid (excluding and including
the query embedding).

The read path is measured, so the items are bulk-loaded straight into the read models
(COPY into memory.items, clustered random 384-d vectors into indexer.vectors under a
benchmark model with its own HNSW index), not through the write path. Retrieval runs the
recall service's own code in-process (RecallStore under the engram_recall role with RLS,
fusion, packet), so "excluding the embedding" can hand it a ready query vector.

    .venv/bin/python bench/bench_recall_latency.py [--total 1000000] [--queries 300]

Prints the figures and writes bench/results/recall_latency.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import numpy as np
from pgvector.asyncpg import register_vector

from engram.auth import Principal
from engram.db import with_user
from engram.settings import CommonSettings
from services.recall.adapters.store import RecallStore
from services.recall.core import build_packet, fuse, or_query
from services.recall.settings import RecallSettings

RESULTS = Path(__file__).parent / "results" / "recall_latency.json"
MODEL = "latbench-clustered-384"
DIMS = 384
TOPICS = 64
ORG_PREFIX = "latbench"
SIZES = {"org-10k": 10_000, "org-100k": 100_000}


def vocabulary(rng: random.Random, n: int = 6000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(4, 9))) for _ in range(n)]


def centroids(seed: int = 7) -> np.ndarray:
    c = np.random.default_rng(seed).normal(size=(TOPICS, DIMS)).astype(np.float32)
    return c / np.linalg.norm(c, axis=1, keepdims=True)


def clustered(rng: np.random.Generator, topics: np.ndarray, n: int) -> tuple[np.ndarray, list[int]]:
    which = rng.integers(0, TOPICS, size=n)
    v = topics[which] + rng.normal(scale=0.035, size=(n, DIMS)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True), which.tolist()


async def load(owner: asyncpg.Connection, total: int, rng: random.Random) -> None:
    """Bulk-load ``total`` items: the two measured orgs, the rest spread over filler orgs."""
    have = await owner.fetchval(
        "SELECT count(*) FROM memory.items WHERE org LIKE $1", f"{ORG_PREFIX}%"
    )
    if have >= total:
        print(f"reusing {have} benchmark items")
        return
    await owner.execute("DELETE FROM memory.items WHERE org LIKE $1", f"{ORG_PREFIX}%")
    await owner.execute("DELETE FROM indexer.vectors WHERE model = $1", MODEL)
    words = vocabulary(rng)
    topics = centroids()
    np_rng = np.random.default_rng(11)
    now = datetime.now(UTC)
    plan = [(f"{ORG_PREFIX}-{name}", n) for name, n in SIZES.items()]
    rest = total - sum(SIZES.values())
    plan += [(f"{ORG_PREFIX}-filler-{i}", rest // 89) for i in range(89)]
    started = time.monotonic()
    for org, n in plan:
        vectors = org.endswith(("10k", "100k"))
        vecs, which = clustered(np_rng, topics, n) if vectors else (None, [])
        rows, vrows = [], []
        for i in range(n):
            scope = "shared" if i % 3 == 0 else "member:ana"
            text = " ".join(rng.choice(words) for _ in range(rng.randint(8, 30)))
            if vectors:  # a topic word, so full text and vectors agree on topics
                text = f"topic{which[i]} " + text
            item_id = f"{org}-{i}"
            rows.append(
                (
                    item_id,
                    org,
                    scope,
                    f"{org}/{scope}",
                    "fact",
                    "active",
                    text,
                    len(text),
                    i % 997 == 0,
                    1,
                    '{"org":"bench"}',
                    now,
                    now,
                )
            )
            if vectors:
                vrows.append((item_id, MODEL, 1, org, scope, vecs[i]))
        await owner.copy_records_to_table(
            "items",
            schema_name="memory",
            records=rows,
            columns=[
                "item_id",
                "org",
                "scope",
                "stream_id",
                "kind",
                "status",
                "content",
                "content_length",
                "pinned",
                "revision",
                "created_by",
                "created_at",
                "updated_at",
            ],
        )
        if vrows:
            await owner.executemany(
                "INSERT INTO indexer.vectors (item_id, model, revision, org, scope, embedding) "
                "VALUES ($1, $2, $3, $4, $5, $6::vector)",
                vrows,
            )
        print(f"  loaded {org}: {n} items ({time.monotonic() - started:.0f} s)", flush=True)
    await owner.execute("ANALYZE memory.items")
    await owner.execute("ANALYZE indexer.vectors")


async def ensure_index(owner: asyncpg.Connection) -> None:
    if await owner.fetchval("SELECT 1 FROM indexer.models WHERE model = $1", MODEL):
        return
    started = time.monotonic()
    await owner.execute("SET maintenance_work_mem = '1GB'")
    await owner.execute(
        "CREATE INDEX latbench_hnsw ON indexer.vectors USING hnsw "
        f"((embedding::vector({DIMS})) vector_cosine_ops) WHERE model = '{MODEL}'"
    )
    await owner.execute(
        "INSERT INTO indexer.models (model, dimensions, index_name) "
        "VALUES ($1, $2, 'latbench_hnsw')",
        MODEL,
        DIMS,
    )
    print(f"  HNSW index built in {time.monotonic() - started:.0f} s")


async def packet(
    store: RecallStore,
    p: Principal,
    query: str,
    vector: list[float] | None,
    settings: RecallSettings,
) -> int:
    """What the service does for a packet: one transaction as the principal."""
    async with store.session(p):
        lists = {"full_text": await store.full_text(p, or_query(query), settings.full_text_top)}
        if vector is not None:
            lists["vector"] = await store.nearest(
                p, vector, MODEL, settings.semantic_max_distance, settings.vector_top
            )
        pinned = await store.listing("pinned", p, settings.packet_items)
    ranked = fuse(lists, pinned, settings.packet_items)
    return len(build_packet(ranked, settings.packet_chars).entries)


def stats(samples: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples)
    return {
        "p50_ms": round(statistics.median(ms), 2),
        "p99_ms": round(ms[min(len(ms) - 1, int(0.99 * len(ms)))], 2),
        "mean_ms": round(statistics.fmean(ms), 2),
    }


async def main(args: argparse.Namespace) -> None:
    common = CommonSettings()
    rng = random.Random(5)
    owner = await asyncpg.connect(common.database_url)
    await register_vector(owner)  # COPY the vectors in binary
    try:
        await load(owner, args.total, rng)
        await ensure_index(owner)
        in_db = await owner.fetchval("SELECT count(*) FROM memory.items")
    finally:
        await owner.close()
    pool = await asyncpg.create_pool(
        with_user(common.database_url, "engram_recall"), min_size=2, max_size=4
    )
    assert pool is not None
    store, settings = RecallStore(pool), RecallSettings()
    embedder = None
    if args.with_model:
        from engram.embeddings.providers import LocalProvider

        embedder = await asyncio.to_thread(LocalProvider)
    words = vocabulary(random.Random(5))
    topics = centroids()
    np_rng = np.random.default_rng(3)
    results: dict[str, object] = {
        "when": time.strftime("%F %T"),
        "items_in_database": in_db,
        "queries": args.queries,
    }
    for name, size in SIZES.items():
        p = Principal(org=f"{ORG_PREFIX}-{name}", member="ana")
        queries = []
        for _ in range(args.queries):
            topic = int(np_rng.integers(0, TOPICS))
            noisy = topics[topic] + np_rng.normal(scale=0.035, size=DIMS).astype(np.float32)
            vec = [noisy / np.linalg.norm(noisy)]
            text = f"topic{topic} " + " ".join(rng.choice(words) for _ in range(5))
            queries.append((text, vec[0].tolist()))
        for q, v in queries[:20]:  # warm caches and the pool
            await packet(store, p, q, v, settings)
        row: dict[str, object] = {"items_in_scopes": size}
        for mode in ("full_text", "hybrid_excluding_embedding", "hybrid_including_embedding"):
            if mode == "hybrid_including_embedding" and embedder is None:
                continue
            samples = []
            for q, v in queries:
                t0 = time.perf_counter()
                if mode == "hybrid_including_embedding":
                    assert embedder is not None
                    [v] = await embedder.embed([q])  # the cost of embedding the query
                await packet(store, p, q, None if mode == "full_text" else v, settings)
                samples.append(time.perf_counter() - t0)
            row[mode] = stats(samples)
        print(json.dumps({name: row}))
        results[name] = row
    await pool.close()
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument(
        "--no-model",
        dest="with_model",
        action="store_false",
        help="skip the timing that includes the query embedding",
    )
    asyncio.run(main(parser.parse_args()))
