"""Write-path benchmark: sustained commands/s through command -> events -> projector,
and HTTP remember -> visible-in-read-model latency at 1, 8 and 64 concurrent writers.

Needs the stack and the services running (`engram up`). Runs on this machine swing by
±30% (autovacuum, the broker's compiler, and the host: each round records how much of the
machine's CPU was busy and how much other guests took, from /proc/stat), so the whole
set runs ``--rounds`` times, one after another, after ``--warmup`` requests that are not
counted; each latency round sends ``--latency-requests`` requests, and at least 25 a
writer; each figure is reported as the median over the rounds with its range. Each round
also records the CPU each part of the stack spent per request or command (stack_cpu.py).
Prints every round and the summary, and writes them to bench/results/write_path.json.

    .venv/bin/python bench/bench_write_path.py [--rounds 3] [--warmup 200]
        [--commands 20000] [--latency-requests 400]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from collections.abc import Awaitable
from pathlib import Path

import asyncpg
from aiokafka import AIOKafkaProducer
from lean_http import KeepAliveClient
from stack_cpu import StackCpu, cpu_times, python_speed, services_backends

from contracts import topics
from contracts.envelope import CommandEnvelope
from engram.auth import dev_secret, mint_token
from engram.kafka import PartitionBatches
from engram.settings import CommonSettings

RESULTS = Path(__file__).parent / "results" / "write_path.json"
COMMAND_HOST, COMMAND_PORT = "127.0.0.1", 8081
# Each writer's first request opens a stream of its own (a new member), which the writer,
# the projector and the generations meet for the first time; at 4-6 requests a writer (64
# writers, 400 requests) those were a sixth of the samples, and the p99 was the fourth
# worst of 384. At 25 a writer the 64 writers' round has 1,600 samples.
REQUESTS_PER_WRITER = 25


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def count_items(pool: asyncpg.Pool, org: str) -> int:
    return int(await pool.fetchval("SELECT count(*) FROM memory.items WHERE org = $1", org))


async def sustained(
    common: CommonSettings,
    pool: asyncpg.Pool,
    watch: VisibilityWatch,
    total: int,
    streams: int,
) -> dict[str, float]:
    """Publish ``total`` remembers on engram.commands as Kafka callers do, spread over
    ``streams`` scopes, and time until the projector has applied all of them: until each
    stream's head, as the projector announces it, is its last command's (one remember,
    one event). The envelopes are built before the clock starts, and nothing polls the
    read model meanwhile: both cost the two cores the stack runs on (polling a count of the
    org's items took Postgres about 0.035 ms of CPU a command)."""
    org = f"bench-{uuid.uuid4().hex[:6]}"
    tokens = [
        mint_token(dev_secret(), org=org, member=f"m{i}", ttl_seconds=7200) for i in range(streams)
    ]
    envelopes = [
        CommandEnvelope(
            command_id=str(uuid.uuid4()),
            type="RememberMemory",
            token=tokens[n % streams],
            stream_id=f"{org}/member:m{n % streams}",
            payload={"content": f"Benchmark fact number {n} for m{n % streams}", "kind": "fact"},
        )
        for n in range(total)
    ]
    records = [(env.stream_id.encode(), env.model_dump_json().encode()) for env in envelopes]
    heads = {
        f"{org}/member:m{i}": len(range(i, total, streams)) for i in range(min(streams, total))
    }
    producer = AIOKafkaProducer(
        bootstrap_servers=common.kafka_bootstrap_servers, linger_ms=10, max_batch_size=256 * 1024
    )
    await producer.start()
    try:
        count = len(await producer.partitions_for(topics.COMMANDS))
        started = time.monotonic()
        await publish(producer, records, count)
    finally:
        await producer.stop()
    published = time.monotonic() - started
    try:
        await asyncio.wait_for(
            asyncio.gather(*(watch.wait(stream, seq) for stream, seq in heads.items())),
            timeout=max(120.0, total / 100) - published,
        )
    except TimeoutError:
        seen = await count_items(pool, org)
        raise SystemExit(f"only {seen}/{total} items visible before the deadline") from None
    elapsed = time.monotonic() - started
    if (seen := await count_items(pool, org)) != total:  # what was announced is there
        raise SystemExit(f"{total} commands announced, {seen} items in memory.items")
    return {
        "commands": total,
        "streams": streams,
        "publish_seconds": round(published, 2),
        "seconds_to_visible": round(elapsed, 2),
        "commands_per_second": round(total / elapsed, 1),
    }


async def publish(
    producer: AIOKafkaProducer, records: list[tuple[bytes, bytes]], count: int
) -> None:
    """Publish the records on engram.commands, each to its key's partition, in their order,
    a batch of records at a time (``engram.kafka.PartitionBatches``, as the writer sends its
    events): ``send`` a record at a time cost this process 0.020-0.025 ms of CPU a command,
    this 0.004 (20,000 records, the host in a slow phase), on the cores the stack is
    measured on, where a caller would not run."""
    batches = [PartitionBatches(producer, topics.COMMANDS, p) for p in range(count)]
    for key, value in records:
        await batches[topics.partition_for(key.decode(), count)].append(key, value)
    for batch in batches:
        await batch.flush()
    await producer.flush()


class VisibilityWatch:
    """When a command's events are in the read model: the projector announces each
    stream's new head on the channel engram_projected as its batch commits
    (009_one_statement_batches.sql), and one listening connection resolves the writers
    waiting for it. Polling the items table instead cost Postgres and this process about
    1 ms of CPU a request at 8 writers, on the cores it measures, and added half its
    period to every figure."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn
        self._heads: dict[str, tuple[int, float]] = {}  # stream -> (seq, when announced)
        self._pending: dict[str, list[tuple[int, asyncio.Future[float]]]] = {}

    @classmethod
    async def open(cls, dsn: str) -> VisibilityWatch:
        watch = cls(await asyncpg.connect(dsn))
        await watch._conn.add_listener("engram_projected", watch._announced)
        return watch

    def _announced(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        now = time.monotonic()
        seq_text, _, stream = str(payload).partition(" ")
        seq = int(seq_text)
        if seq > self._heads.get(stream, (0, now))[0]:
            self._heads[stream] = (seq, now)
        waiting = self._pending.pop(stream, [])
        for target, future in waiting:
            if target > seq:
                self._pending.setdefault(stream, []).append((target, future))
            elif not future.done():
                future.set_result(now)

    def wait(self, stream_id: str, seq: int) -> asyncio.Future[float]:
        """Resolves with the time the stream's head reached ``seq``."""
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        head = self._heads.get(stream_id)
        if head is not None and head[0] >= seq:
            future.set_result(head[1])
        else:
            self._pending.setdefault(stream_id, []).append((seq, future))
        return future

    async def close(self) -> None:
        await self._conn.close()


async def latency(
    pool: asyncpg.Pool, watch: VisibilityWatch, writers: int, requests: int
) -> dict[str, float]:
    """Each writer: HTTP remember, then wait until the item is in the read model."""
    org = f"lat-{uuid.uuid4().hex[:6]}"
    samples: list[float] = []
    http_samples: list[float] = []

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
                stream_id, seq = str(body["stream_id"]), int(body["seq"])
                try:
                    visible = await asyncio.wait_for(watch.wait(stream_id, seq), timeout=60)
                except TimeoutError:
                    raise SystemExit(
                        f"{stream_id} seq {seq} was accepted but not announced on "
                        "engram_projected within 60 s: is the projector running and caught up?"
                    ) from None
                samples.append(visible - t0)
        finally:
            await http.close()

    started = time.monotonic()
    await asyncio.gather(*(writer(w) for w in range(writers)))
    elapsed = time.monotonic() - started
    if (seen := await count_items(pool, org)) != len(samples):  # what was announced is there
        raise SystemExit(f"{len(samples)} items announced, {seen} in memory.items")
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


async def measured(
    figures: Awaitable[dict[str, float]], stack: StackCpu, pool: asyncpg.Pool
) -> dict[str, float]:
    """A round's figures, with the share of the machine's CPU that was busy and stolen,
    and the CPU each part of the stack spent per request or command (``cpu_ms_<part>``;
    ``cpu_ms_pg_<service>`` is the part of Postgres's that served that service)."""
    backends = await services_backends(pool)
    before, parts_before = cpu_times(), stack.sample(backends)
    row = await figures
    after, parts_after = cpu_times(), stack.sample(backends)
    if before is not None and after is not None and after[2] > before[2]:
        total = after[2] - before[2]
        row["cpu_busy_percent"] = round(100 * (after[0] - before[0]) / total, 1)
        row["cpu_steal_percent"] = round(100 * (after[1] - before[1]) / total, 1)
    units = int(row.get("requests") or row["commands"])
    for part, ms in StackCpu.per_unit(parts_before, parts_after, units).items():
        row[f"cpu_ms_{part}"] = ms
    return row


def summary(rows: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Each numeric figure of a set of rounds: its median, lowest and highest value."""
    keys = [
        k
        for k, v in rows[0].items()
        if isinstance(v, int | float) and k != "writers" and all(k in r for r in rows)
    ]
    return {
        k: {
            "median": round(statistics.median(r[k] for r in rows), 3 if "cpu_ms" in k else 1),
            "min": min(r[k] for r in rows),
            "max": max(r[k] for r in rows),
        }
        for k in keys
    }


async def main(args: argparse.Namespace) -> None:
    common = CommonSettings()
    pool = await asyncpg.create_pool(common.database_url, min_size=1, max_size=2)
    assert pool is not None
    watch = await VisibilityWatch.open(common.database_url)
    results: dict[str, object] = {
        "machine": "2 cores, 24 GiB",
        "when": time.strftime("%F %T"),
        "rounds": args.rounds,
        "python_loop_seconds": python_speed(),
    }
    print(f"this machine's Python speed: {results['python_loop_seconds']} s for the loop")
    try:
        by_writers, sustained_rows = await all_rounds(args, common, pool, watch)
    finally:
        await watch.close()
        await pool.close()
    results["http_latency"] = [
        {"writers": w, **summary(rows), "rounds": rows} for w, rows in by_writers.items()
    ]
    results["sustained"] = {**summary(sustained_rows), "rounds": sustained_rows}
    report(by_writers, sustained_rows)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {RESULTS}")


async def all_rounds(
    args: argparse.Namespace, common: CommonSettings, pool: asyncpg.Pool, watch: VisibilityWatch
) -> tuple[dict[int, list[dict[str, float]]], list[dict[str, float]]]:
    """The warm-up, then each round's latency figures at 1, 8 and 64 writers and its
    sustained figures."""
    stack = StackCpu()
    if stack.missing:
        print(f"no pid file for {', '.join(stack.missing)}: their CPU is not counted")
    by_writers: dict[int, list[dict[str, float]]] = {1: [], 8: [], 64: []}
    sustained_rows: list[dict[str, float]] = []
    if args.warmup:
        print(f"warm-up: {args.warmup} requests at 8 writers, not counted")
        await latency(pool, watch, 8, args.warmup)
    for n in range(1, args.rounds + 1):
        for writers, rows in by_writers.items():
            requests = max(args.latency_requests, writers * REQUESTS_PER_WRITER)
            row = await measured(latency(pool, watch, writers, requests), stack, pool)
            print(json.dumps({"round": n, **row}))
            rows.append(row)
        row = await measured(
            sustained(common, pool, watch, args.commands, args.streams), stack, pool
        )
        print(json.dumps({"round": n, **row}))
        sustained_rows.append(row)
    return by_writers, sustained_rows


def report(
    by_writers: dict[int, list[dict[str, float]]], sustained_rows: list[dict[str, float]]
) -> None:
    for w, rows in by_writers.items():
        s = summary(rows)
        print(
            f"{w:>2} writers: visible p50 {_fig(s['visible_p50_ms'])} ms, "
            f"p99 {_fig(s['visible_p99_ms'])} ms, {_fig(s['requests_per_second'])} req/s"
            + _steal(s)
        )
        print(cpu_line(s, "a request"))
    s = summary(sustained_rows)
    print(f"sustained: {_fig(s['commands_per_second'])} commands/s" + _steal(s))
    print(cpu_line(s, "a command"))


def _fig(f: dict[str, float]) -> str:
    return f"{f['median']} ({f['min']} to {f['max']})"


def cpu_line(s: dict[str, dict[str, float]], unit: str) -> str:
    parts = {
        k.removeprefix("cpu_ms_"): v["median"] for k, v in s.items() if k.startswith("cpu_ms_")
    }
    total = parts.pop("total")
    by_service = {k.removeprefix("pg_"): parts.pop(k) for k in list(parts) if k.startswith("pg_")}
    each = ", ".join(f"{k} {v}" for k, v in parts.items())
    served = ", ".join(f"{k} {v}" for k, v in by_service.items())
    line = f"    CPU ms {unit} (medians): {total} in all; {each}"
    return line + (f"\n    of which Postgres served: {served}" if served else "")


def _steal(s: dict[str, dict[str, float]]) -> str:
    return f", CPU stolen {_fig(s['cpu_steal_percent'])}%" if "cpu_steal_percent" in s else ""


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--commands", type=int, default=20_000)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--latency-requests", type=int, default=400)
    parsed = parser.parse_args()
    if parsed.rounds < 1 or parsed.warmup < 0 or parsed.commands < 1:
        parser.error("--rounds and --commands must be at least 1, --warmup at least 0")
    asyncio.run(main(parsed))
