"""Recall latency: p50/p99 of a packet with 10,000 and 100,000 items in the caller's
scopes and 1,000,000 in the database, full text only and hybrid (excluding and including
the query embedding).

The read path is measured, so the items are bulk-loaded straight into the read models
(COPY into memory.items, clustered random 384-d vectors into indexer.vectors under a
benchmark model with its own HNSW index), not through the write path. Requests go to the
recall app itself, served by uvicorn on a loopback port: POST /v1/recall over HTTP with a
bearer token, under the engram_recall role with RLS, fusion, packet and the memory-context
write. Its query embedder is swapped for one that hands over the query's vector from the
benchmark's space ("excluding the embedding") or first embeds the query text with the
local model ("including").

    .venv/bin/python bench/bench_recall_latency.py [--total 1000000] [--queries 300]

Prints the figures and writes bench/results/recall_latency.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import socket
import statistics
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
import uvicorn
import uvloop
from fastapi import FastAPI
from lean_http import KeepAliveClient
from pgvector.asyncpg import register_vector

from engram.auth import dev_secret, mint_token
from engram.settings import CommonSettings
from services.recall.app import create_app
from services.recall.settings import RecallSettings

RESULTS = Path(__file__).parent / "results" / "recall_latency.json"
MODEL = "latbench-clustered-384"
DIMS = 384
TOPICS = 64
ORG_PREFIX = "latbench"
SIZES = {"org-10k": 10_000, "org-100k": 100_000}
WARM_UP = 20


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
            if vecs is not None:
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
        await owner.execute("SELECT memory.fold_term_counts()")  # as the projector does
        if vrows:
            await owner.executemany(
                "INSERT INTO indexer.vectors (item_id, model, revision, org, scope, embedding) "
                "VALUES ($1, $2, $3, $4, $5, $6::vector)",
                vrows,
            )
        print(f"  loaded {org}: {n} items ({time.monotonic() - started:.0f} s)", flush=True)
    # What autovacuum would do after a bulk load: statistics, and the visibility map
    # that lets the term index be read without visiting the table.
    for table in ("memory.items", "memory.terms", "memory.term_counts", "indexer.vectors"):
        await owner.execute(f"VACUUM (ANALYZE) {table}")


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


class Precomputed:
    """The service's query embedder for the benchmark: it hands over the query's vector
    from the benchmark's clustered space. With ``model`` it first embeds the query text
    for real, so the figure includes what embedding a query costs."""

    def __init__(self, vectors: dict[str, list[float]], model: Any = None) -> None:
        self._vectors, self._model = vectors, model

    @property
    def model(self) -> str:
        return MODEL

    @property
    def max_distance(self) -> float:
        return 0.4  # the seeds' default, which the clustered space was drawn for

    async def embed_queries(self, texts: list[str]) -> list[list[float]]:
        if self._model is not None:
            await self._model.embed_queries(texts)
        return [self._vectors[t] for t in texts]


@asynccontextmanager
async def serving(app: FastAPI) -> AsyncIterator[int]:
    """The recall app behind a real uvicorn server on a free loopback port (its port)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", access_log=False, http="httptools"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    deadline = time.monotonic() + 60
    while not server.started:
        if task.done() or time.monotonic() > deadline:
            raise SystemExit("the recall app did not start")
        await asyncio.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        await task


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
        "measured": "POST /v1/recall over HTTP (uvicorn on loopback), sequential requests "
        "from a lean keep-alive client",
    }
    app = create_app(RecallSettings(), common)
    async with serving(app) as port:
        for name, size in SIZES.items():
            org = f"{ORG_PREFIX}-{name}"
            token = mint_token(dev_secret(), org=org, member="ana", ttl_seconds=3600)
            http = KeepAliveClient("127.0.0.1", port, token)
            queries: dict[str, list[float]] = {}
            while len(queries) < args.queries + WARM_UP:
                topic = int(np_rng.integers(0, TOPICS))
                noisy = topics[topic] + np_rng.normal(scale=0.035, size=DIMS).astype(np.float32)
                text = f"topic{topic} " + " ".join(rng.choice(words) for _ in range(5))
                queries[text] = (noisy / np.linalg.norm(noisy)).tolist()
            row: dict[str, object] = {"items_in_scopes": size}
            modes = {
                "full_text": None,
                "hybrid_excluding_embedding": Precomputed(queries),
                "hybrid_including_embedding": Precomputed(queries, embedder),
            }
            # One unmeasured pass of every query first: the org's postings and graph pages
            # are then in memory, as in a service that has been answering for a while.
            # (Without it the first mode measured also warms the cache for the others.)
            app.state.embedder = modes["hybrid_excluding_embedding"]
            for text in queries:
                await http.post("/v1/recall", {"query": text})
            for mode, query_embedder in modes.items():
                if mode == "hybrid_including_embedding" and embedder is None:
                    continue
                app.state.embedder = query_embedder
                if query_embedder is not None:  # the vectors are really searched
                    status, found = await http.post(
                        "/v1/search",
                        {"query": next(iter(queries)), "retrieval": "vector", "limit": 5},
                    )
                    assert status == 200 and found["memories"], found
                samples = []
                for i, text in enumerate(queries):
                    t0 = time.perf_counter()
                    status, packet = await http.post("/v1/recall", {"query": text})
                    elapsed = time.perf_counter() - t0
                    if status != 200:
                        raise SystemExit(f"recall answered {status}: {packet}")
                    if i >= WARM_UP:  # the first ones warm caches and the pool
                        samples.append(elapsed)
                row[mode] = stats(samples)
            await http.close()
            print(json.dumps({name: row}))
            results[name] = row
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
    uvloop.run(main(parser.parse_args()))  # as the services run (engram.http.serve)
