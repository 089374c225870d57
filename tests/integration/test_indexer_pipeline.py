"""The indexer's event path end to end: real Kafka, real Postgres, real sealed events.

Each test publishes to a topic of its own (one partition) and runs the
follower under a group of its own, so it never competes with a running
indexer for ``engram.events``. The projector does not read these topics: the
indexer's own view of each item is all that decides here.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, date, datetime
from functools import partial
from typing import Any, cast

import asyncpg
import httpx
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from contracts.envelope import Actor, EventEnvelope
from contracts.events import (
    Event,
    MemoryForgotten,
    MemoryPinned,
    MemoryRemembered,
    MemoryRevised,
    MemoryStatusChanged,
)
from contracts.topics import dead_letter_topic
from engram.budget import DailyBudget
from engram.crypto import MasterKey, load_master_key, seal
from engram.embeddings.providers import EmbeddingProvider, LocalProvider, OpenAIProvider
from engram.embeddings.settings import EmbeddingSettings
from engram.keystore import KeyStore, shred
from engram.settings import CommonSettings
from engram.tracking import PreparingFollower
from services.indexer.adapters.store import VectorStore, create_vector_pool
from services.indexer.core import embedding_texts
from services.indexer.handlers import EventIndexer, Prepared
from services.indexer.settings import IndexerSettings
from tests.integration.test_indexer_openai import EmbeddingServer, server  # noqa: F401

pytestmark = pytest.mark.integration
DEADLINE = 30.0


@pytest.fixture(scope="module")
async def pool(stack_settings: dict[str, str]) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_vector_pool(stack_settings["DATABASE_URL"])
    yield pool
    await pool.close()


@pytest.fixture(scope="module")
def keys(pool: asyncpg.Pool) -> KeyStore:
    return KeyStore(pool, MasterKey(load_master_key(CommonSettings())))


class Stream:
    """One org's scope on a topic of its own: seals and publishes events in order."""

    def __init__(self, bootstrap: str, keys: KeyStore) -> None:
        self.org = f"idx-{uuid.uuid4().hex[:10]}"
        self.topic = f"engram.test.indexer.{self.org}"
        self.stream_id = f"{self.org}/shared"
        self.bootstrap, self.keys, self.seq = bootstrap, keys, 0
        self.producer = AIOKafkaProducer(bootstrap_servers=bootstrap)

    async def start(self) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(self.topic, 1, 1)])
        finally:
            await admin.close()
        await self.producer.start()

    async def stop(self, pool: asyncpg.Pool) -> None:
        await self.producer.stop()
        for table in ("indexer.vectors", "indexer.items"):
            await pool.execute(f"DELETE FROM {table} WHERE org = $1", self.org)
        await pool.execute("DELETE FROM indexer.offsets WHERE topic = $1", self.topic)
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
        await admin.start()
        try:
            await admin.delete_topics([self.topic])
        finally:
            await admin.close()

    async def sealed(self, item_id: str, text: str) -> Any:
        data_key = (await self.keys.create_many([(item_id, self.org)]))[item_id]
        return seal(item_id, data_key, text)

    async def remember(self, item_id: str, text: str, status: str = "active") -> int:
        return await self.publish(
            MemoryRemembered(
                item_id=item_id,
                scope="shared",
                kind="fact",
                status=status,
                content=await self.sealed(item_id, text),
                content_hash=f"h-{text[:100]}",
                content_length=len(text),
            )
        )

    async def revise(self, item_id: str, revision: int, text: str) -> int:
        return await self.publish(
            MemoryRevised(
                item_id=item_id,
                revision=revision,
                base_revision=revision - 1,
                reason="corrected",
                content=await self.sealed(item_id, text),
                content_hash=f"h-{text}",
                content_length=len(text),
            )
        )

    async def publish(self, event: Event) -> int:
        meta = await self.producer.send_and_wait(
            self.topic, self.envelope(event), key=self.stream_id.encode()
        )
        return int(meta.offset)

    async def publish_in_transaction(self, event: Event) -> int:
        """As the command writer does: the commit marker then takes the next offset."""
        producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap, transactional_id=f"test-{self.org}"
        )
        await producer.start()
        try:
            async with producer.transaction():
                meta = await producer.send_and_wait(
                    self.topic, self.envelope(event), key=self.stream_id.encode()
                )
        finally:
            await producer.stop()
        return int(meta.offset)

    def envelope(self, event: Event) -> bytes:
        self.seq += 1
        env = EventEnvelope(
            event_id=uuid.uuid4().hex,
            type=type(event).__name__,
            stream_id=self.stream_id,
            seq=self.seq,
            command_id=uuid.uuid4().hex,
            occurred_at=datetime.now(UTC),
            actor=Actor(org=self.org, member="ana"),
            payload=event.model_dump(mode="json"),
        )
        return env.model_dump_json().encode()


@pytest.fixture
async def stream(
    stack_settings: dict[str, str], keys: KeyStore, pool: asyncpg.Pool
) -> AsyncIterator[Stream]:
    s = Stream(stack_settings["KAFKA_BOOTSTRAP_SERVERS"], keys)
    await s.start()
    yield s
    await s.stop(pool)


Starter = Callable[..., Awaitable[PreparingFollower[Prepared]]]  # (provider, max_batch=100)


@pytest.fixture
async def run_indexer(stream: Stream, pool: asyncpg.Pool, keys: KeyStore) -> AsyncIterator[Starter]:
    """Starts the indexer's follower on the stream's topic; stops it after the test."""
    tasks: list[asyncio.Task[None]] = []

    async def start(
        provider: EmbeddingProvider | None, max_batch: int = 100
    ) -> PreparingFollower[Prepared]:
        if provider is not None:
            await VectorStore(pool).ensure_model(provider.model, provider.dimensions)
        # A key store of its own, as in its own process: no key cached by the writer side.
        own_keys = KeyStore(pool, keys.master)
        indexer = EventIndexer(VectorStore(pool), own_keys, provider, embed_batch=16)
        follower: PreparingFollower[Prepared] = PreparingFollower(
            prepare=indexer.prepare,
            write=indexer.write,
            bootstrap=stream.bootstrap,
            topic=stream.topic,
            group_id=f"test-{stream.org}",
            pool=pool,
            offsets_table="indexer.offsets",
            service="indexer",
            max_batch=max_batch,
        )
        tasks.append(asyncio.create_task(follower.run()))
        return follower

    yield start
    for task in tasks:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def until(check: Callable[[], Awaitable[Any]], what: str) -> Any:
    deadline = time.monotonic() + DEADLINE
    while not (result := await check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)
    return result


def vector_of(pool: asyncpg.Pool, item_id: str) -> Callable[[], Awaitable[Any]]:
    async def fetch() -> Any:
        return await pool.fetchrow(
            "SELECT revision, model, embedding FROM indexer.vectors WHERE item_id = $1", item_id
        )

    return fetch


async def stored_offset(pool: asyncpg.Pool, topic: str) -> int | None:
    value = await pool.fetchval(
        "SELECT next_offset FROM indexer.offsets WHERE topic = $1 AND partition = 0", topic
    )
    return None if value is None else int(value)


async def test_vectors_follow_each_items_lifecycle_and_forgetting_wins(
    stream: Stream, pool: asyncpg.Pool, local_model: LocalProvider, run_indexer: Starter
) -> None:
    trip, draft = f"{stream.org}-trip", f"{stream.org}-draft"
    await run_indexer(local_model)
    await stream.remember(trip, "The trip budget is 1500 EUR.")
    await stream.remember(draft, "Maybe we like tea.", status="candidate")
    first = await until(vector_of(pool, trip), "the first vector")
    assert (first["revision"], first["model"]) == (1, local_model.model)
    [expected] = await local_model.embed(["The trip budget is 1500 EUR."])
    assert first["embedding"].to_list() == pytest.approx(expected, abs=1e-6)

    await stream.publish(MemoryPinned(item_id=trip, revision=2, pinned=True))
    pinned = await until(_at(pool, trip, 2), "the pin to relabel the vector")
    assert pinned["embedding"].to_list() == first["embedding"].to_list()  # not re-embedded

    await stream.revise(trip, 3, "The trip budget is 1600 EUR.")
    corrected = await until(_at(pool, trip, 3), "the corrected text's vector")
    assert corrected["embedding"].to_list() != first["embedding"].to_list()

    await stream.publish(
        MemoryStatusChanged(item_id=trip, revision=4, status="disabled", previous="active")
    )
    await until(_gone(pool, trip), "disable to void the vector")
    await stream.publish(
        MemoryStatusChanged(item_id=trip, revision=5, status="active", previous="disabled")
    )
    enabled = await until(_at(pool, trip, 5), "enable to re-embed the current text")
    assert enabled["embedding"].to_list() == corrected["embedding"].to_list()

    last = await stream.publish(MemoryForgotten(item_id=trip, revisions=5))
    await until(_gone(pool, trip), "forget to delete the vector")
    assert await pool.fetchrow(
        "SELECT status, content, title FROM indexer.items WHERE item_id = $1", trip
    ) == ("forgotten", None, None)
    assert await vector_of(pool, draft)() is None  # a candidate is never embedded
    await until(lambda: _offset_at(pool, stream.topic, last + 1), "the offset to be stored")


LONG = " ".join(f"Sentence {n} is about the quarterly plan for team {n}." for n in range(60))


async def test_a_long_memory_has_a_vector_a_passage_and_loses_them_with_its_text(
    stream: Stream, pool: asyncpg.Pool, local_model: LocalProvider, run_indexer: Starter
) -> None:
    """Each passage of a long memory (engram.passages), in the slices the model reads
    whole, gets a vector of its own, of the current text only."""
    item = f"{stream.org}-long"
    texts = embedding_texts(None, LONG, local_model)
    assert len({t.passage for t in texts}) >= 3
    await run_indexer(local_model)
    await stream.remember(item, LONG)
    keys = [(t.passage, t.piece) for t in texts]
    rows = await until(_vectors(pool, item, keys), "a vector a passage's piece")
    expected = await local_model.embed([t.text for t in texts])
    for row, vector in zip(rows, expected, strict=True):
        assert row["revision"] == 1
        assert row["embedding"].to_list() == pytest.approx(vector, abs=1e-6)

    await stream.revise(item, 2, "Now a short text.")  # one passage: the others go
    await until(_vectors(pool, item, [(0, 0)], revision=2), "the short text's one vector")
    await stream.publish(MemoryForgotten(item_id=item, revisions=2))
    await until(_gone(pool, item), "forget to delete every passage's vector")


def _vectors(
    pool: asyncpg.Pool, item_id: str, keys: list[tuple[int, int]], revision: int = 1
) -> Callable[[], Awaitable[list[asyncpg.Record] | None]]:
    async def fetch() -> list[asyncpg.Record] | None:
        rows = await pool.fetch(
            "SELECT passage, piece, revision, embedding FROM indexer.vectors "
            "WHERE item_id = $1 ORDER BY passage, piece",
            item_id,
        )
        done = [(r["passage"], r["piece"]) for r in rows] == keys
        return rows if done and all(r["revision"] == revision for r in rows) else None

    return fetch


async def test_an_item_whose_key_is_shredded_is_skipped_not_dead_lettered(
    stream: Stream, pool: asyncpg.Pool, local_model: LocalProvider, run_indexer: Starter
) -> None:
    gone, kept = f"{stream.org}-gone", f"{stream.org}-kept"
    await stream.remember(gone, "A secret that was forgotten.")
    async with pool.acquire() as conn:
        await shred(conn, gone)
    await stream.remember(kept, "The trip budget is 1500 EUR.")
    follower = await run_indexer(local_model)
    await until(vector_of(pool, kept), "the kept item's vector")
    assert await vector_of(pool, gone)() is None
    assert follower.applied == 2


async def test_with_embeddings_off_offsets_move_and_forgetting_still_voids_vectors(
    stream: Stream, pool: asyncpg.Pool, run_indexer: Starter
) -> None:
    old = f"{stream.org}-old"
    await VectorStore(pool).ensure_model("hash-a", 8)
    await pool.execute(  # a vector from a time embeddings were on
        "INSERT INTO indexer.vectors (item_id, model, revision, org, scope, embedding) "
        "VALUES ($1, 'hash-a', 1, $2, 'shared', $3)",
        old,
        stream.org,
        [0.1] * 8,
    )
    await stream.remember(old, "An old memory.")
    await stream.remember(f"{stream.org}-new", "A new memory.")
    last = await stream.publish(MemoryForgotten(item_id=old, revisions=1))
    await run_indexer(None)
    await until(lambda: _offset_at(pool, stream.topic, last + 1), "the offsets to be stored")
    assert (
        await pool.fetchval("SELECT count(*) FROM indexer.vectors WHERE org = $1", stream.org) == 0
    )


async def test_a_failing_endpoint_dead_letters_the_event_and_the_indexer_goes_on(
    stream: Stream,
    pool: asyncpg.Pool,
    run_indexer: Starter,
    server: EmbeddingServer,  # noqa: F811 (the fixture imported above)
    stack_settings: dict[str, str],
) -> None:
    server.script = [500] * 6  # the first attempt and five retries
    day = date(1899, 1, 1)
    embedding = EmbeddingSettings(
        MEMORY_EMBEDDING_PROVIDER="openai",
        MEMORY_EMBEDDING_URL=server.url,
        MEMORY_EMBEDDING_DIMENSIONS=6,
    )
    settings = IndexerSettings(retry_base_s=0.01, retry_max_s=0.02, request_timeout_s=2.0)
    dlq = await _dlq_reader(stack_settings["KAFKA_BOOTSTRAP_SERVERS"])
    try:
        async with httpx.AsyncClient() as client:
            budget = DailyBudget(pool, 1000, today=lambda: day)
            await run_indexer(OpenAIProvider(client, embedding, settings.tuning, budget))
            failed = await stream.remember(f"{stream.org}-a", "The trip budget is 1500 EUR.")
            letter = await _dead_letter_for(dlq, stream.topic)
            assert (letter["offset"], letter["service"]) == (failed, "indexer")
            assert "embedding failed" in letter["error"] and "HTTP 500" in letter["error"]
            await stream.remember(f"{stream.org}-b", "Run the tests first.")
            await until(vector_of(pool, f"{stream.org}-b"), "the next event's vector")
        assert len(server.requests) == 7
    finally:
        await dlq.stop()
        await pool.execute("DELETE FROM ai.daily_requests WHERE day = $1", day)


def _at(pool: asyncpg.Pool, item_id: str, revision: int) -> Callable[[], Awaitable[Any]]:
    async def check() -> Any:
        found = await vector_of(pool, item_id)()
        return found if found is not None and found["revision"] == revision else None

    return check


def _gone(pool: asyncpg.Pool, item_id: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return await vector_of(pool, item_id)() is None

    return check


async def _offset_at(pool: asyncpg.Pool, topic: str, offset: int, follower: Any = None) -> bool:
    if follower is not None:  # that follower's own position (several groups share the topic)
        return bool(follower.positions.get(0) == offset)
    return await stored_offset(pool, topic) == offset


async def _dlq_reader(bootstrap: str) -> AIOKafkaConsumer:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    tp = TopicPartition(dead_letter_topic("indexer"), 0)
    consumer.assign([tp])
    end = (await consumer.end_offsets([tp]))[tp]
    consumer.seek(tp, end)  # only letters written from now on
    return consumer


async def _dead_letter_for(consumer: AIOKafkaConsumer, topic: str) -> dict[str, Any]:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        batches = await consumer.getmany(timeout_ms=200)
        for record in (r for records in batches.values() for r in records):
            letter: dict[str, Any] = json.loads(record.value)
            if letter["topic"] == topic:
                return letter
    raise AssertionError(f"no dead letter for {topic}")


async def test_turning_embeddings_on_later_embeds_on_replay_what_was_folded_while_off(
    stream: Stream, pool: asyncpg.Pool, local_model: LocalProvider, keys: KeyStore
) -> None:
    item = f"{stream.org}-trip"
    last = await stream.remember(item, "The trip budget is 1500 EUR.")
    for provider, group in ((None, "off"), (local_model, "on")):
        indexer = EventIndexer(VectorStore(pool), KeyStore(pool, keys.master), provider)
        follower: PreparingFollower[Prepared] = PreparingFollower(
            prepare=indexer.prepare,
            write=indexer.write,
            bootstrap=stream.bootstrap,
            topic=stream.topic,
            group_id=f"test-{stream.org}-{group}",
            pool=pool,
            offsets_table="indexer.offsets",
            service="indexer",
        )
        if provider is not None:
            await VectorStore(pool).ensure_model(provider.model, provider.dimensions)
        task = asyncio.create_task(follower.run())
        try:
            await until(
                partial(_offset_at, pool, stream.topic, last + 1, follower),
                f"the {group} indexer to read the stream",
            )
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        found = await vector_of(pool, item)()
        assert (found is not None) == (provider is not None)


class Counting:
    """The local model, counting the texts it is asked to embed."""

    def __init__(self, model: LocalProvider) -> None:
        self._model = model
        self.texts: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    async def embed(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        return await self._model.embed(texts)


async def test_a_backlog_embeds_each_item_once_at_the_revision_the_projector_holds(
    stream: Stream, pool: asyncpg.Pool, local_model: LocalProvider, run_indexer: Starter
) -> None:
    """An indexer reading events the projector applied long ago (after a stop, or an idle
    time with no model) embeds an item at its last revision only, not at each one."""
    item = f"{stream.org}-plan"
    await stream.remember(item, "The plan is draft one.")
    await stream.revise(item, 2, "The plan is draft two.")
    await stream.revise(item, 3, "The plan is final.")
    await pool.execute(  # the projector's row, as it stands after the three events
        "INSERT INTO memory.items (item_id, org, scope, stream_id, kind, status, content, "
        "revision, created_by, created_at, updated_at) "
        "VALUES ($1, $2, 'shared', $3, 'fact', 'active', 'The plan is final.', 3, '{}', "
        "now(), now())",
        item,
        stream.org,
        stream.stream_id,
    )
    counting = Counting(local_model)
    try:
        # One event a batch, as a slow fetch would hand them over.
        await run_indexer(cast(EmbeddingProvider, counting), max_batch=1)
        found = await until(_at(pool, item, 3), "the last revision's vector")
        [expected] = await local_model.embed(["The plan is final."])
        assert found["embedding"].to_list() == pytest.approx(expected, abs=1e-6)
        assert counting.texts == ["The plan is final."]
    finally:
        await pool.execute("DELETE FROM memory.items WHERE item_id = $1", item)
