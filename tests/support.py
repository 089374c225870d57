"""Polling with a deadline (never a fixed sleep), small Kafka helpers, and a read-model
row written straight into Postgres for tests of the read path."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

import asyncpg
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from contracts import topics
from contracts.envelope import CommandEnvelope, CommandReply
from engram.kafka import partition_count, publish_commands
from services.projector.replay import recreate_database

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T | None]],
    *,
    deadline: float = 30.0,
    interval: float = 0.05,
    what: str = "condition",
) -> T:
    """Call ``probe`` until it returns something truthy, or fail at the deadline."""
    end = time.monotonic() + deadline
    last: T | None = None
    while time.monotonic() < end:
        last = await probe()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"{what} not reached within {deadline} s (last: {last!r})")


async def send_commands(bootstrap: str, envelopes: list[CommandEnvelope], topic: str = "") -> None:
    await publish_commands(bootstrap, envelopes, topic)


async def read_replies(
    bootstrap: str, command_ids: set[str], deadline: float = 60.0, per_command: int = 1
) -> dict[str, list[CommandReply]]:
    """Read engram.replies from the start until each command has ``per_command`` answers."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    found: dict[str, list[CommandReply]] = {c: [] for c in command_ids}
    try:
        parts = range(await partition_count(bootstrap, topics.REPLIES))
        consumer.assign([TopicPartition(topics.REPLIES, p) for p in parts])
        end = time.monotonic() + deadline
        while any(len(v) < per_command for v in found.values()) and time.monotonic() < end:
            _keep_replies(await consumer.getmany(timeout_ms=200), found)
        return found
    finally:
        await consumer.stop()


def _keep_replies(fetched: dict[Any, list[Any]], found: dict[str, list[CommandReply]]) -> None:
    """The replies of a fetch to the commands ``found`` waits for, added to it."""
    for records in fetched.values():
        for r in records:
            key = (r.key or b"").decode()
            if key in found:
                found[key].append(CommandReply.model_validate_json(r.value or b""))


async def replies_so_far(bootstrap: str, command_ids: set[str]) -> dict[str, list[CommandReply]]:
    """Every answer engram.replies holds now for these commands: read from the start to
    each partition's last stable offset, so that nothing is waited for. (A command seen
    dead-lettered was decided in a transaction that would have held its reply too.)"""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False
    )
    await consumer.start()
    found: dict[str, list[CommandReply]] = {c: [] for c in command_ids}
    try:
        parts = range(await partition_count(bootstrap, topics.REPLIES))
        tps = [TopicPartition(topics.REPLIES, p) for p in parts]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        end = await consumer.end_offsets(tps)  # read_committed: the last stable offsets
        deadline = time.monotonic() + 60
        while [tp for tp in tps if await consumer.position(tp) < end[tp]]:
            assert time.monotonic() < deadline, "engram.replies was not read to its end"
            _keep_replies(await consumer.getmany(timeout_ms=200), found)
        return found
    finally:
        await consumer.stop()


async def end_offsets(bootstrap: str, names: list[str]) -> dict[TopicPartition, int]:
    """Every partition's end offset (committed or not) of these topics."""
    kafka = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await kafka.start()
    try:
        tps = [
            TopicPartition(name, p)
            for name in names
            for p in range(await partition_count(bootstrap, name))
        ]
        return dict(await kafka.end_offsets(tps))
    finally:
        await kafka.stop()


def new_command_id() -> str:
    return str(uuid.uuid4())


async def insert_item(
    conn: asyncpg.Connection, org: str, scope: str, text: str, prefix: str
) -> str:
    """An active fact in ``memory.items`` (as the projector would write it); its id."""
    item_id = f"{prefix}-{uuid.uuid4()}"
    now = datetime.now(UTC)
    await conn.execute(
        "INSERT INTO memory.items (item_id, org, scope, stream_id, kind, status, content, "
        "revision, created_by, created_at, updated_at) "
        "VALUES ($1, $2, $3, $4, 'fact', 'active', $5, 1, $6, $7, $7)",
        item_id,
        org,
        scope,
        f"{org}/{scope}",
        text,
        json.dumps({"org": org}),
        now,
    )
    return item_id


@asynccontextmanager
async def shadow_database(live_dsn: str, name: str) -> AsyncIterator[str]:
    """A fresh database beside the live one for a replay (its DSN), dropped afterwards."""
    shadow = await recreate_database(live_dsn, name)
    try:
        yield shadow
    finally:
        conn = await asyncpg.connect(live_dsn)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()


async def publish_turns(bootstrap: str, *turns: bytes) -> None:
    """Conversation turns on engram.conversations, in this order (one key: one partition)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for value in turns:
            await producer.send_and_wait(topics.CONVERSATIONS, value, key=b"run-1")
    finally:
        await producer.stop()


async def dead_letters(bootstrap: str, service: str, marker: str) -> list[dict[str, object]]:
    """The letters on the service's dead-letter topic whose text holds ``marker``."""
    topic = topics.dead_letter_topic(service)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level="read_committed"
    )
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]
        found = []
        while await consumer.position(tp) < end:
            for r in (await consumer.getmany(tp, timeout_ms=500)).get(tp, []):
                if marker.encode() in (r.value or b""):
                    found.append(json.loads(r.value or b"{}"))
        return found
    finally:
        await consumer.stop()
