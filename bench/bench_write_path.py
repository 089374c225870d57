"""Write-path benchmark: sustained commands/s through command -> events -> projector,
and HTTP remember -> visible-in-read-model latency at 1, 8 and 64 concurrent writers.

Needs the stack and the services running (`engram up`). Prints the figures and writes
them to bench/results/write_path.json.

    .venv/bin/python bench/bench_write_path.py [--commands 20000] [--latency-requests 400]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from pathlib import Path

import asyncpg
from aiokafka import AIOKafkaProducer
from lean_http import KeepAliveClient

from contracts import topics
from contracts.envelope import CommandEnvelope
from engram.auth import dev_secret, mint_token
from engram.settings import CommonSettings

RESULTS = Path(__file__).parent / "results" / "write_path.json"
COMMAND_HOST, COMMAND_PORT = "127.0.0.1", 8081


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def count_items(pool: asyncpg.Pool, org: str) -> int:
    return int(await pool.fetchval("SELECT count(*) FROM memory.items WHERE org = $1", org))


async def sustained(
    common: CommonSettings, pool: asyncpg.Pool, total: int, streams: int
) -> dict[str, float]:
    """Publish ``total`` remembers on engram.commands as Kafka callers do, spread over
    ``streams`` scopes, and time until the projector has applied all of them."""
    org = f"bench-{uuid.uuid4().hex[:6]}"
    tokens = [
        mint_token(dev_secret(), org=org, member=f"m{i}", ttl_seconds=7200) for i in range(streams)
    ]
    producer = AIOKafkaProducer(
        bootstrap_servers=common.kafka_bootstrap_servers, linger_ms=10, max_batch_size=256 * 1024
    )
    await producer.start()
    started = time.monotonic()
    try:
        for n in range(total):
            i = n % streams
            env = CommandEnvelope(
                command_id=str(uuid.uuid4()),
                type="RememberMemory",
                token=tokens[i],
                stream_id=f"{org}/member:m{i}",
                payload={"content": f"Benchmark fact number {n} for m{i}", "kind": "fact"},
            )
            await producer.send(
                topics.COMMANDS, env.model_dump_json().encode(), key=env.stream_id.encode()
            )
        await producer.flush()
    finally:
        await producer.stop()
    published = time.monotonic() - started
    deadline = started + max(120.0, total / 100)
    while (seen := await count_items(pool, org)) < total:
        if time.monotonic() > deadline:
            raise SystemExit(f"only {seen}/{total} items visible before the deadline")
        await asyncio.sleep(0.1)
    elapsed = time.monotonic() - started
    return {
        "commands": total,
        "streams": streams,
        "publish_seconds": round(published, 2),
        "seconds_to_visible": round(elapsed, 2),
        "commands_per_second": round(total / elapsed, 1),
    }


class VisibilityWatch:
    """One poller for every pending item (a query per 2 ms), so measuring visibility does
    not load Postgres with a query loop per writer."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._pending: dict[str, asyncio.Future[float]] = {}
        self._task = asyncio.create_task(self._poll())

    def wait(self, item_id: str) -> asyncio.Future[float]:
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self._pending[item_id] = future
        return future

    async def _poll(self) -> None:
        # One connection held for the whole watch: a pool's acquire and release would add
        # asyncpg's reset statement to every poll (measured: the polls were about 15% of
        # Postgres's statement time at one writer, half of it those resets).
        async with self._pool.acquire() as conn:
            while True:
                if self._pending:
                    rows = await conn.fetch(
                        "SELECT item_id FROM memory.items WHERE item_id = ANY($1)",
                        list(self._pending),
                    )
                    now = time.monotonic()
                    for row in rows:
                        self._pending.pop(row["item_id"]).set_result(now)
                await asyncio.sleep(0.002)

    def close(self) -> None:
        self._task.cancel()


async def latency(pool: asyncpg.Pool, writers: int, requests: int) -> dict[str, float]:
    """Each writer: HTTP remember, then wait until the item is in the read model."""
    org = f"lat-{uuid.uuid4().hex[:6]}"
    samples: list[float] = []
    http_samples: list[float] = []
    watch = VisibilityWatch(pool)

    async def writer(w: int) -> None:
        token = mint_token(dev_secret(), org=org, member=f"w{w}", ttl_seconds=7200)
        http = KeepAliveClient(COMMAND_HOST, COMMAND_PORT, token)
        try:
            for n in range(requests // writers):
                t0 = time.monotonic()
                status, body = await http.post(
                    "/v1/memories", {"content": f"Latency fact {n} of writer {w}"}
                )
                if status != 201:
                    raise SystemExit(f"remember answered {status}: {body}")
                http_samples.append(time.monotonic() - t0)
                visible = await watch.wait(str(body["item_id"]))
                samples.append(visible - t0)
        finally:
            await http.close()

    started = time.monotonic()
    try:
        await asyncio.gather(*(writer(w) for w in range(writers)))
    finally:
        watch.close()
    elapsed = time.monotonic() - started
    ms = [s * 1000 for s in samples]
    return {
        "writers": writers,
        "requests": len(ms),
        "visible_p50_ms": round(statistics.median(ms), 1),
        "visible_p99_ms": round(percentile(ms, 99), 1),
        "http_p50_ms": round(statistics.median(http_samples) * 1000, 1),
        "http_p99_ms": round(percentile([s * 1000 for s in http_samples], 99), 1),
        "requests_per_second": round(len(ms) / elapsed, 1),
    }


async def main(args: argparse.Namespace) -> None:
    common = CommonSettings()
    pool = await asyncpg.create_pool(common.database_url, min_size=2, max_size=70)
    assert pool is not None
    results: dict[str, object] = {"machine": "2 cores, 24 GiB", "when": time.strftime("%F %T")}
    try:
        lat = []
        for writers in (1, 8, 64):
            row = await latency(pool, writers, max(args.latency_requests, writers * 4))
            print(json.dumps(row))
            lat.append(row)
        results["http_latency"] = lat
        row = await sustained(common, pool, args.commands, args.streams)
        print(json.dumps(row))
        results["sustained"] = row
    finally:
        await pool.close()
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=20_000)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--latency-requests", type=int, default=400)
    asyncio.run(main(parser.parse_args()))
