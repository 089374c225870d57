"""Embedding benchmark: texts/s of the local model at batch sizes 1, 16 and 64, and the
indexer's end-to-end lag under a burst of remembers sent to the command service.

The model figures need nothing but the ``embeddings`` extra. The burst needs the stack
and the command service (`engram up`); it runs an indexer in this process with the local
model, under a consumer group of its own that starts at the end of engram.events, sends
``--burst`` remembers over HTTP (POST /v1/memories, 64 writers) and measures, per item,
the time from the accepted request to its committed vector. Prints the figures and
writes them to bench/results/embeddings.json.

    .venv/bin/python bench/bench_embeddings.py [--burst 10000] [--writers 64] [--no-burst]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from contracts import topics
from engram.auth import dev_secret, mint_token
from engram.crypto import MasterKey, load_master_key
from engram.embeddings.providers import LOCAL_MODEL, LocalProvider
from engram.keystore import KeyStore
from engram.settings import CommonSettings
from engram.tracking import PreparingFollower
from services.indexer.adapters.store import VectorStore, create_vector_pool
from services.indexer.handlers import EventIndexer, Prepared

RESULTS = Path(__file__).parent / "results" / "embeddings.json"
COMMAND_URL = "http://127.0.0.1:8081"
SUBJECTS = [
    "The trip budget",
    "Our deploy window",
    "The team lunch",
    "Ana's tea order",
    "The quarterly review",
    "The staging database",
    "Bo's birthday",
    "The API key",
]
PREDICATES = [
    "is 1500 EUR",
    "moved to Thursday afternoon after the incident review",
    "must be confirmed by the finance team before anyone books flights or hotels",
    "is green tea without sugar",
    "lives in the eu-west region",
    "should never be pasted into a chat, even a private one with a colleague",
]


def memory_texts(n: int, seed: int = 7) -> list[str]:
    """Memory-like sentences of 4 to 40 words, the same on every run."""
    rng = random.Random(seed)
    return [
        f"{rng.choice(SUBJECTS)} {rng.choice(PREDICATES)}"
        + "".join(f", note {rng.randint(1, 999)}" for _ in range(rng.randint(0, 8)))
        + "."
        for _ in range(n)
    ]


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def model_throughput(batch: int, seconds: float = 8.0) -> dict[str, float]:
    """Calls of exactly ``batch`` texts (one ONNX run each) for about ``seconds``."""
    model = LocalProvider(batch_size=batch)
    texts = memory_texts(max(batch * 4, 256))
    await model.embed(texts[:batch])  # warm-up: the first run allocates
    done, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        start = (done // batch * batch) % (len(texts) - batch + 1)
        await model.embed(texts[start : start + batch])
        done += batch
    elapsed = time.perf_counter() - started
    return {
        "batch": batch,
        "texts": done,
        "seconds": round(elapsed, 2),
        "texts_per_second": round(done / elapsed, 1),
    }


async def seed_offsets(common: CommonSettings, pool: asyncpg.Pool, group: str) -> None:
    """Start the bench indexer at the end of engram.events: it indexes the burst only.

    Without these rows it would start at offset 0 and embed every item in the log.
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=common.kafka_bootstrap_servers)
    await admin.start()
    try:
        [described] = await admin.describe_topics([topics.EVENTS])
    finally:
        await admin.close()
    count = len(described["partitions"])
    parts = [TopicPartition(topics.EVENTS, p) for p in range(count)]
    consumer = AIOKafkaConsumer(
        bootstrap_servers=common.kafka_bootstrap_servers, isolation_level="read_committed"
    )
    await consumer.start()
    try:
        ends = await consumer.end_offsets(parts)
    finally:
        await consumer.stop()
    if len(ends) != count or count == 0:
        raise SystemExit(f"no end offsets for {topics.EVENTS}: {ends}")
    await pool.executemany(
        "INSERT INTO indexer.offsets (consumer, topic, partition, next_offset) "
        "VALUES ($1, $2, $3, $4)",
        [(group, tp.topic, tp.partition, end) for tp, end in ends.items()],
    )


async def post_with_retries(
    http: httpx.AsyncClient, headers: dict[str, str], body: dict[str, Any]
) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while True:
        try:
            r = await http.post(f"{COMMAND_URL}/v1/memories", headers=headers, json=body)
            if r.status_code < 500:
                r.raise_for_status()
                return r.json()
        except httpx.TransportError:
            pass  # the service is restarting: the same key is safe to send again
        if time.monotonic() > deadline:
            raise SystemExit("the command service did not answer for two minutes")
        await asyncio.sleep(0.5)


async def send_burst(org: str, total: int, writers: int) -> dict[str, float]:
    """``total`` remembers over HTTP; returns item id -> wall-clock time it was accepted."""
    accepted: dict[str, float] = {}
    texts = memory_texts(total, seed=11)

    async def writer(w: int) -> None:
        token = mint_token(dev_secret(), org=org, member=f"w{w}", ttl_seconds=7200)
        async with httpx.AsyncClient(timeout=60) as http:
            for n in range(w, total, writers):
                # One idempotency key per remember: a retry after a dropped connection
                # (a service restarting) gets the first answer, never a second item.
                headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": str(uuid.uuid4())}
                body = await post_with_retries(http, headers, {"content": f"{texts[n]} ({n})"})
                accepted[body["item_id"]] = time.time()

    await asyncio.gather(*(writer(w) for w in range(writers)))
    return accepted


async def burst(total: int, writers: int) -> dict[str, Any]:
    common = CommonSettings()
    pool = await create_vector_pool(common.database_url)
    group, org = f"engram-indexer-bench-{uuid.uuid4().hex[:6]}", f"emb-{uuid.uuid4().hex[:6]}"
    model = await asyncio.to_thread(LocalProvider)
    await VectorStore(pool).ensure_model(model.model, model.dimensions)
    await seed_offsets(common, pool, group)
    indexer = EventIndexer(
        VectorStore(pool), KeyStore(pool, MasterKey(load_master_key(common))), model, embed_batch=64
    )
    follower: PreparingFollower[Prepared] = PreparingFollower(
        prepare=indexer.prepare,
        write=indexer.write,
        bootstrap=common.kafka_bootstrap_servers,
        topic=topics.EVENTS,
        group_id=group,
        pool=pool,
        offsets_table="indexer.offsets",
        service="indexer",
        max_batch=500,
    )
    task = asyncio.create_task(follower.run())
    max_lag = 0

    async def watch_lag() -> None:
        nonlocal max_lag
        while True:
            with contextlib.suppress(KafkaError, OSError):  # a failed sample is skipped
                max_lag = max(max_lag, sum((await follower.lag()).values()))
            await asyncio.sleep(0.5)

    watcher = asyncio.create_task(watch_lag())
    try:
        started = time.time()
        accepted = await send_burst(org, total, writers)
        sent = time.time()
        deadline = time.monotonic() + max(600.0, total / 5)
        while (
            count := await pool.fetchval("SELECT count(*) FROM indexer.vectors WHERE org = $1", org)
        ) < total:
            if time.monotonic() > deadline:
                raise SystemExit(f"only {count}/{total} vectors before the deadline")
            await asyncio.sleep(0.2)
        rows = await pool.fetch(
            "SELECT item_id, extract(epoch FROM created_at) AS at FROM indexer.vectors "
            "WHERE org = $1",
            org,
        )
    finally:
        watcher.cancel()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await pool.execute("DELETE FROM indexer.offsets WHERE consumer = $1", group)
        await pool.execute("DELETE FROM indexer.vectors WHERE org = $1", org)
    done = max(float(r["at"]) for r in rows)
    lags = [(float(r["at"]) - accepted[r["item_id"]]) * 1000 for r in rows]
    await pool.close()
    return {
        "remembers": total,
        "writers": writers,
        "http_seconds": round(sent - started, 1),
        "remembers_per_second": round(total / (sent - started), 1),
        "seconds_to_last_vector": round(done - started, 1),
        "drain_after_last_accept_s": round(max(0.0, done - sent), 1),
        "vectors_per_second": round(total / (done - started), 1),
        "accept_to_vector_p50_ms": round(statistics.median(lags), 1),
        "accept_to_vector_p99_ms": round(percentile(lags, 99), 1),
        "accept_to_vector_max_ms": round(max(lags), 1),
        "max_lag_records": max_lag,
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--burst", type=int, default=10_000)
    parser.add_argument("--writers", type=int, default=64)
    parser.add_argument("--no-burst", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {
        "machine": f"{os.cpu_count()} cores",
        "when": datetime.now().strftime("%Y-%m-%d %H:%M:%S"),
        "model": f"{LOCAL_MODEL} (onnxruntime, CPU, 256 tokens max)",
        "local_model": [],
    }
    for batch in (1, 16, 64):
        figures = await model_throughput(batch)
        results["local_model"].append(figures)
        print(f"local model, batch {batch:>2}: {figures['texts_per_second']:>7} texts/s")
    if not args.no_burst:
        results["burst"] = await burst(args.burst, args.writers)
        print(json.dumps(results["burst"], indent=2))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    asyncio.run(main())
