"""The write path's floor: what the issue's required work costs on this machine with none
of Engram's own code, so the sustained figure of bench_write_path.py can be read against
what the same broker, database and client libraries allow.

Two bare processes stand in for the command service and the projector, on topics and
tables of their own (made for the run and dropped after it), and do only what issue 3
requires of every command, each the cheapest way we know:
- the writer (per input partition, one transactional producer): verifies the command's
  token (once per token, as Engram caches it), makes the item a data key, wraps it under a
  master key and stores it in Postgres before publishing (one statement a batch), seals
  the content under it (AES-GCM), and appends the event and the caller's reply with the
  consumed offset in one Kafka transaction;
- the projector (read committed): reads the batch's keys (one query), opens the content,
  and inserts the items with their full-text vector (a GIN index, the cheapest full-text
  index Postgres has) and its offsets in one transaction, whose commit waits for the WAL
  flush as Engram's projector's does (a commit that did not could be lost in a crash of
  Postgres after the consumer had moved past it).
Left out, so the floor is lower than any real write path: decision state and its
checkpoints, idempotency records, revisions, the audit trail, generations, the BM25 term
index, the indexer's and the extractor's reads of every event, and all validation.

The benchmark publishes ``--commands`` remembers over 64 streams exactly as
bench_write_path.py does (the envelopes built before the clock starts), times them until
the last item is in the table, and records the CPU each part spent per command. The
services should be stopped (`engram up --no-services`), so that only the floor runs.

    .venv/bin/python bench/bench_floor.py [--rounds 3] [--commands 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import jwt
import uvloop
from aiokafka import AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from bench_write_path import cpu_line, summary
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from stack_cpu import StackCpu, cpu_times

from engram import kafka
from engram.auth import AUDIENCE, dev_secret, mint_token
from engram.settings import CommonSettings

RESULTS = Path(__file__).parent / "results" / "floor.json"
PARTITIONS = 2
STREAMS = 64
WARMUP = 2000

SCHEMA = """
CREATE SCHEMA {s};
CREATE TABLE {s}.keys (item_id uuid PRIMARY KEY, wrapped bytea NOT NULL);
CREATE TABLE {s}.items (
    item_id uuid PRIMARY KEY, stream_id text NOT NULL, seq integer NOT NULL,
    content text NOT NULL, tsv tsvector NOT NULL, UNIQUE (stream_id, seq));
CREATE INDEX ON {s}.items USING gin (tsv);
CREATE TABLE {s}.offsets (
    topic text, partition integer, next bigint NOT NULL, PRIMARY KEY (topic, partition));
"""
INSERT_ITEMS = """
INSERT INTO {s}.items (item_id, stream_id, seq, content, tsv)
SELECT i, s, q, c, to_tsvector('english', c)
FROM unnest($1::uuid[], $2::text[], $3::integer[], $4::text[]) AS t(i, s, q, c)
"""
STORE_OFFSETS = """
INSERT INTO {s}.offsets (topic, partition, next) SELECT $1, * FROM unnest($2::int[], $3::bigint[])
ON CONFLICT (topic, partition) DO UPDATE SET next = excluded.next
"""


def names(run: str) -> tuple[str, str, str, str]:
    """The run's command, event and reply topics and its schema."""
    return f"floor.{run}.commands", f"floor.{run}.events", f"floor.{run}.replies", f"floor_{run}"


def seal(key: bytes, plain: bytes, aad: bytes) -> bytes:
    nonce = os.urandom(12)
    return nonce + AESGCM(key).encrypt(nonce, plain, aad)


def unseal(key: bytes, sealed: bytes, aad: bytes) -> bytes:
    return AESGCM(key).decrypt(sealed[:12], sealed[12:], aad)


async def writer(common: CommonSettings, run: str) -> None:
    commands, events, replies, schema = names(run)
    master = os.urandom(32)  # the run's master key; the projector gets it on stdin
    sys.stdout.write(master.hex() + "\n")
    sys.stdout.flush()
    group = f"floor-writer-{run}"
    consumer = kafka.consumer(common.kafka_bootstrap_servers, commands, group_id=group)
    producers = {
        p: kafka.transactional_producer(common.kafka_bootstrap_servers, f"floor-{run}-{p}")
        for p in range(PARTITIONS)
    }
    pool = await asyncpg.create_pool(common.database_url, min_size=PARTITIONS, max_size=PARTITIONS)
    secret, claims_of, heads = dev_secret(), dict[str, dict[str, Any]](), dict[str, int]()
    await consumer.start()
    for producer in producers.values():
        await producer.start()

    async def write(tp: TopicPartition, records: list[ConsumerRecord[bytes, bytes]]) -> None:
        keys, out = [], []
        for record in records:
            command = json.loads(record.value or b"")
            token = command["token"]
            if (claims := claims_of.get(token)) is None:
                claims = jwt.decode(token, secret, algorithms=["HS256"], audience=AUDIENCE)
                claims_of[token] = claims
            stream, item = command["stream_id"], uuid.uuid4()
            heads[stream] = seq = heads.get(stream, 0) + 1
            data_key = os.urandom(32)
            keys.append((item, seal(master, data_key, item.bytes)))
            sealed = seal(data_key, command["payload"]["content"].encode(), item.bytes)
            event = {
                "event_id": str(uuid.uuid4()),
                "stream_id": stream,
                "seq": seq,
                "command_id": command["command_id"],
                "actor": claims["sub"],
                "type": "MemoryRemembered",
                "payload": {"item_id": str(item), "content": sealed.hex(), "kind": "fact"},
            }
            reply = {"command_id": command["command_id"], "item_id": str(item), "seq": seq}
            out.append((stream.encode(), json.dumps(event).encode(), json.dumps(reply).encode()))
        await pool.copy_records_to_table("keys", records=keys, schema_name=schema)
        producer = producers[tp.partition]
        await producer.begin_transaction()
        for key, event_bytes, reply_bytes in out:
            await producer.send(events, event_bytes, key=key)
            await producer.send(replies, reply_bytes, key=key)
        await producer.send_offsets_to_transaction({tp: records[-1].offset + 1}, group)
        await producer.commit_transaction()

    await serve(consumer, write)


async def projector(common: CommonSettings, run: str) -> None:
    _, events, _, schema = names(run)
    master = bytes.fromhex(sys.stdin.readline().strip())
    consumer = kafka.consumer(common.kafka_bootstrap_servers, events, group_id=f"floor-{run}")
    conn = await asyncpg.connect(common.database_url)
    insert, store = INSERT_ITEMS.format(s=schema), STORE_OFFSETS.format(s=schema)
    await consumer.start()

    async def apply(tp: TopicPartition, records: list[ConsumerRecord[bytes, bytes]]) -> None:
        decoded = [json.loads(r.value or b"") for r in records]
        ids = [uuid.UUID(e["payload"]["item_id"]) for e in decoded]
        wrapped = dict(
            await conn.fetch(
                f"SELECT item_id, wrapped FROM {schema}.keys WHERE item_id = ANY($1)", ids
            )
        )
        contents = []
        for item, event in zip(ids, decoded, strict=True):
            data_key = unseal(master, wrapped[item], item.bytes)
            contents.append(
                unseal(data_key, bytes.fromhex(event["payload"]["content"]), item.bytes)
            )
        async with conn.transaction():
            await conn.execute(
                insert,
                ids,
                [e["stream_id"] for e in decoded],
                [e["seq"] for e in decoded],
                [c.decode() for c in contents],
            )
            await conn.execute(store, events, [tp.partition], [records[-1].offset + 1])

    await serve(consumer, apply, one_at_a_time=True)


async def serve(consumer: Any, handle: Any, one_at_a_time: bool = False) -> None:
    """Say ready once partitions are assigned, then handle each fetch's partitions (in
    parallel, as Engram's writers do; one after another on one connection)."""
    said = False
    while True:
        batches = await consumer.getmany(timeout_ms=500, max_records=2000)
        if not said and consumer.assignment():
            sys.stdout.write("ready\n")
            sys.stdout.flush()
            said = True
        if one_at_a_time:
            for tp, records in batches.items():
                await handle(tp, records)
        else:
            await asyncio.gather(*(handle(tp, rs) for tp, rs in batches.items()))


async def prepare(common: CommonSettings, run: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=common.kafka_bootstrap_servers)
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(t, PARTITIONS, 1) for t in names(run)[:3]], validate_only=False
        )
    finally:
        await admin.close()
    conn = await asyncpg.connect(common.database_url)
    try:
        await conn.execute(SCHEMA.format(s=names(run)[3]))
    finally:
        await conn.close()


async def clean(common: CommonSettings, run: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=common.kafka_bootstrap_servers)
    await admin.start()
    try:
        await admin.delete_topics(list(names(run)[:3]))
    finally:
        await admin.close()
    conn = await asyncpg.connect(common.database_url)
    try:
        await conn.execute(f"DROP SCHEMA IF EXISTS {names(run)[3]} CASCADE")
    finally:
        await conn.close()


def start_role(role: str, run: str, stdin: Any = subprocess.DEVNULL) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, "--role", role, "--run", run],
        stdin=stdin,
        stdout=subprocess.PIPE,
        text=True,
    )


def read_line(process: subprocess.Popen[str], what: str, seconds: float = 60) -> str:
    """One line of a role's output, or exit saying which role did not answer."""
    assert process.stdout is not None
    started = time.monotonic()
    line = process.stdout.readline()  # the roles answer within seconds or die
    if not line or time.monotonic() - started > seconds:
        raise SystemExit(f"the floor's {what} did not start (exit {process.poll()})")
    return line.strip()


async def one_round(common: CommonSettings, total: int, n: int) -> dict[str, float]:
    run = f"{uuid.uuid4().hex[:8]}"
    await prepare(common, run)
    roles: list[subprocess.Popen[str]] = []
    try:
        roles.append(start_role("writer", run))
        master = read_line(roles[0], "writer")
        roles.append(start_role("projector", run, stdin=subprocess.PIPE))
        assert roles[1].stdin is not None
        roles[1].stdin.write(master + "\n")
        roles[1].stdin.flush()
        for role, what in zip(roles, ("writer", "projector"), strict=True):
            if read_line(role, what) != "ready":
                raise SystemExit(f"the floor's {what} did not say ready")
        row = await timed(common, run, total, {"writer": roles[0].pid, "projector": roles[1].pid})
    finally:
        for role in roles:
            role.terminate()
            role.wait(timeout=30)
        await clean(common, run)
    print(json.dumps({"round": n, **row}))
    return row


async def timed(
    common: CommonSettings, run: str, total: int, role_pids: dict[str, int]
) -> dict[str, float]:
    """Publish WARMUP commands and wait for them (the roles' first transactions and the
    new topics' leaders are not timed), then time ``total`` more."""
    commands, _, _, schema = names(run)
    org = f"floor-{run}"
    tokens = [
        mint_token(dev_secret(), org=org, member=f"m{i}", ttl_seconds=7200) for i in range(STREAMS)
    ]
    envelopes = [_command(org, tokens, n) for n in range(WARMUP + total)]
    conn = await asyncpg.connect(common.database_url)
    stack = StackCpu()
    stack.pids = {p: pid for p, pid in stack.pids.items() if p in ("kafka", "postgres")}
    stack.pids.update(role_pids)
    producer = AIOKafkaProducer(
        bootstrap_servers=common.kafka_bootstrap_servers, linger_ms=10, max_batch_size=256 * 1024
    )
    await producer.start()
    try:
        await _publish(producer, commands, envelopes[:WARMUP])
        await _wait_for(conn, schema, WARMUP)
        before, parts_before = cpu_times(), stack.sample()
        started = time.monotonic()
        await _publish(producer, commands, envelopes[WARMUP:])
        await _wait_for(conn, schema, WARMUP + total, deadline=started + max(120.0, total / 100))
        elapsed = time.monotonic() - started
        after, parts_after = cpu_times(), stack.sample()
    finally:
        await producer.stop()
        await conn.close()
    row: dict[str, float] = {"commands": total, "commands_per_second": round(total / elapsed, 1)}
    if before is not None and after is not None and after[2] > before[2]:
        row["cpu_busy_percent"] = round(100 * (after[0] - before[0]) / (after[2] - before[2]), 1)
        row["cpu_steal_percent"] = round(100 * (after[1] - before[1]) / (after[2] - before[2]), 1)
    for part, ms in StackCpu.per_unit(parts_before, parts_after, total).items():
        row[f"cpu_ms_{part}"] = ms
    return row


def _command(org: str, tokens: list[str], n: int) -> tuple[bytes, bytes]:
    """The n-th remember, as bench_write_path.py publishes it: (key, value)."""
    stream = f"{org}/member:m{n % STREAMS}"
    content = f"Benchmark fact number {n} for m{n % STREAMS}"
    command = {
        "command_id": str(uuid.uuid4()),
        "type": "RememberMemory",
        "token": tokens[n % STREAMS],
        "stream_id": stream,
        "payload": {"content": content, "kind": "fact"},
    }
    return stream.encode(), json.dumps(command).encode()


async def _publish(
    producer: AIOKafkaProducer, topic: str, commands: list[tuple[bytes, bytes]]
) -> None:
    for key, value in commands:
        await producer.send(topic, value, key=key)
    await producer.flush()


async def _wait_for(
    conn: asyncpg.Connection, schema: str, count: int, deadline: float | None = None
) -> None:
    deadline = deadline or time.monotonic() + 120
    while (seen := await conn.fetchval(f"SELECT count(*) FROM {schema}.items")) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"only {seen}/{count} items in the floor's table before the deadline")
        await asyncio.sleep(0.1)


async def main(args: argparse.Namespace) -> None:
    common = CommonSettings()
    rows = [await one_round(common, args.commands, n) for n in range(1, args.rounds + 1)]
    figures = summary(rows)
    rate = figures["commands_per_second"]
    print(f"floor: {rate['median']} ({rate['min']} to {rate['max']}) commands/s")
    print(cpu_line(figures, "a command"))
    results = {"machine": "2 cores, 24 GiB", "when": time.strftime("%F %T")}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({**results, "summary": figures, "rounds": rows}, indent=2) + "\n")
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--commands", type=int, default=20_000)
    parser.add_argument("--role", choices=("writer", "projector"), help=argparse.SUPPRESS)
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parsed = parser.parse_args()
    if parsed.role:
        role = writer if parsed.role == "writer" else projector
        uvloop.run(role(CommonSettings(), parsed.run))
    else:
        if parsed.rounds < 1 or parsed.commands < 1:
            parser.error("--rounds and --commands must be at least 1")
        asyncio.run(main(parsed))
