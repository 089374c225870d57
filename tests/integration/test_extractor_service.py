"""The extractor against the real Kafka and Postgres: turns in, candidate commands out.

Each test runs the service in-process (its FastAPI lifespan: migrations, both
followers, the producer) under its own consumer groups and a fresh org. Tests
that must control every record the service reads use private input topics;
their output is always the real ``engram.commands`` / ``engram.dlq.extractor``.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, date, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import asyncpg
import httpx
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from fastapi import FastAPI

from contracts import topics
from contracts.conversations import ConversationTurn
from contracts.envelope import CommandEnvelope
from engram.crypto import MasterKey, load_master_key
from engram.kafka import partition_count
from engram.settings import CommonSettings
from services.extractor.app import create_app
from services.extractor.core import author, command_id
from services.extractor.settings import ExtractorSettings
from tests.conftest import Caller, caller
from tests.support import eventually

pytestmark = pytest.mark.integration
DEADLINE = 60.0
Json = dict[str, Any]


# --- running the service -------------------------------------------------------------


def settings_for(**fields: Any) -> ExtractorSettings:
    run = uuid.uuid4().hex[:10]
    return ExtractorSettings(
        group_id=f"test-extractor-{run}", events_group_id=f"test-extractor-events-{run}", **fields
    )


@asynccontextmanager
async def running(
    settings: ExtractorSettings, today: Callable[[], date] | None = None
) -> AsyncIterator[FastAPI]:
    common = CommonSettings()
    app = create_app(settings, common, **({"today": today} if today else {}))
    try:
        async with app.router.lifespan_context(app):
            yield app
    finally:  # the groups are this test's alone: leave no offsets behind
        conn = await asyncpg.connect(common.database_url)
        try:
            await conn.execute(
                "DELETE FROM extractor.offsets WHERE consumer = ANY($1::text[])",
                [settings.group_id, settings.events_group_id],
            )
        finally:
            await conn.close()


async def start_at_end(stack: dict[str, str], group: str, topic: str) -> None:
    """A new group on a shared topic starts after what is there, not at offset 0."""
    consumer = AIOKafkaConsumer(bootstrap_servers=stack["KAFKA_BOOTSTRAP_SERVERS"])
    await consumer.start()
    try:
        parts = await partition_count(stack["KAFKA_BOOTSTRAP_SERVERS"], topic)
        ends = await consumer.end_offsets([TopicPartition(topic, p) for p in range(parts)])
    finally:
        await consumer.stop()
    conn = await asyncpg.connect(stack["DATABASE_URL"])
    try:
        await conn.executemany(
            "INSERT INTO extractor.offsets (consumer, topic, partition, next_offset) "
            "VALUES ($1, $2, $3, $4)",
            [(group, topic, tp.partition, offset) for tp, offset in ends.items()],
        )
    finally:
        await conn.close()


@pytest.fixture
async def private_topics(stack_settings: dict[str, str]) -> AsyncIterator[tuple[str, str]]:
    """Fresh conversation and event topics (4 partitions, like the real ones)."""
    base = f"test.extractor.{uuid.uuid4().hex[:10]}"
    names = (f"{base}.conversations", f"{base}.events")
    admin = AIOKafkaAdminClient(bootstrap_servers=stack_settings["KAFKA_BOOTSTRAP_SERVERS"])
    await admin.start()
    try:
        await admin.create_topics([NewTopic(n, 4, 1) for n in names])
        yield names
        await admin.delete_topics(list(names))
    finally:
        await admin.close()


# --- Kafka in and out -----------------------------------------------------------------


class Watch:
    """Reads a topic from where it ended when the watch began."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self._bootstrap, self._topic = bootstrap, topic
        self._consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        self.values: list[bytes] = []

    async def __aenter__(self) -> Watch:
        await self._consumer.start()
        parts = await partition_count(self._bootstrap, self._topic)
        tps = [TopicPartition(self._topic, p) for p in range(parts)]
        self._consumer.assign(tps)
        for tp, offset in (await self._consumer.end_offsets(tps)).items():
            self._consumer.seek(tp, offset)
        return self

    async def __aexit__(self, *_: object) -> None:
        await self._consumer.stop()

    async def read(self) -> list[bytes]:
        """The values read so far; the command service's roll markers are no records of
        anyone's (contracts.topics.ROLL_MARKER_HEADER)."""
        for records in (await self._consumer.getmany(timeout_ms=100)).values():
            self.values.extend(
                r.value or b"" for r in records if not topics.is_roll_marker(r.headers, r.value)
            )
        return self.values


async def commands_of(watch: Watch, org: str) -> list[CommandEnvelope]:
    envelopes = [CommandEnvelope.model_validate_json(v) for v in await watch.read()]
    return [e for e in envelopes if e.stream_id.startswith(f"{org}/")]


async def proposed(watch: Watch, org: str, ids: set[str]) -> dict[str, CommandEnvelope] | None:
    """The proposals with these command ids, once all have arrived."""
    found = {e.command_id: e for e in await commands_of(watch, org) if e.command_id in ids}
    return found if set(found) == ids else None


async def dead_letters(watch: Watch, marker: str) -> list[Json]:
    """One letter per failed record. Dead letters are at least once: a record read
    again before its offset was stored is lettered again, and that is fine."""
    letters = [json.loads(v) for v in await watch.read()]
    mine = (d for d in letters if marker in (d.get("value") or ""))
    return list({(d["topic"], d["partition"], d["offset"]): d for d in mine}.values())


async def publish(bootstrap: str, topic: str, *records: tuple[bytes, bytes]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for key, value in records:
            await producer.send_and_wait(topic, value, key=key)
    finally:
        await producer.stop()


def turn(who: Caller, turn_id: str, message: str, **fields: Any) -> tuple[bytes, bytes]:
    """A turn record keyed by its run id, so one run's turns stay in order."""
    body = ConversationTurn(
        turn_id=turn_id,
        run_id="run-1",
        token=who.token,
        user_message=message,
        assistant_message="Noted.",
        completed_at=datetime.now(UTC),
        **fields,
    )
    return b"run-1", body.model_dump_json().encode()


def ids(stream: str, turn_id: str, method: str, count: int, member: str = "ana") -> set[str]:
    who = author(member)
    return {command_id(stream, who, turn_id, method, i) for i in range(count)}  # type: ignore[arg-type]


async def turn_row(stack: dict[str, str], org: str, turn_id: str) -> asyncpg.Record | None:
    conn = await asyncpg.connect(stack["DATABASE_URL"])
    try:
        return await conn.fetchrow(
            "SELECT method, proposals FROM extractor.turns WHERE org = $1 AND turn_id = $2",
            org,
            turn_id,
        )
    finally:
        await conn.close()


# --- rules ---------------------------------------------------------------------------


async def test_a_completed_turn_proposes_candidates_on_engram_commands(
    stack_settings: dict[str, str],
) -> None:
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    ana = caller()
    settings = settings_for()
    await start_at_end(stack_settings, settings.group_id, topics.CONVERSATIONS)
    await start_at_end(stack_settings, settings.events_group_id, topics.EVENTS)
    message = "Remember that I prefer short answers. Can you fix the bug? My timezone is CET."
    first = turn(ana, "t-1", message, sources=("msg-1",))
    private, shared = f"{ana.org}/member:ana", f"{ana.org}/shared"
    expected = ids(private, "t-1", "rules", 2)

    async with Watch(bootstrap, topics.COMMANDS) as commands, running(settings) as app:
        await publish(bootstrap, topics.CONVERSATIONS, first)
        got = await eventually(lambda: proposed(commands, ana.org, expected), deadline=DEADLINE)

        by_content = {e.payload["content"]: e for e in got.values()}
        assert set(by_content) == {"I prefer short answers.", "My timezone is CET."}
        for envelope in got.values():
            assert envelope.type == "RememberMemory"
            assert envelope.stream_id == private
            assert envelope.token == ana.token
            assert envelope.payload["candidate"] is True
            assert envelope.payload["sources"] == ["t-1", "msg-1"]
            assert envelope.payload["user_message"] == message
        assert by_content["I prefer short answers."].payload["kind"] == "preference"
        assert by_content["My timezone is CET."].payload["kind"] == "fact"

        # The same turn again, then a shared-scope turn of the same run: once the
        # second is proposed, the repeat has been read, and it proposed nothing new.
        second = turn(ana, "t-2", "We decided to ship on Tuesdays.", scope="shared")
        await publish(bootstrap, topics.CONVERSATIONS, first, second)
        await eventually(
            lambda: proposed(commands, ana.org, ids(shared, "t-2", "rules", 1)), deadline=DEADLINE
        )
        all_ids = {e.command_id for e in await commands_of(commands, ana.org)}
        assert all_ids == expected | ids(shared, "t-2", "rules", 1)
        row = await eventually(lambda: turn_row(stack_settings, ana.org, "t-1"))
        assert (row["method"], row["proposals"]) == ("rules", 2)

        # The stack's own extractor may run beside this one and propose the same
        # (deterministic) commands first, so wait for this instance to report its turns.
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://extractor") as http:

            async def applied_all() -> dict[str, Any] | None:
                health = await http.get("/health")
                assert health.status_code == 200, health.text
                body: dict[str, Any] = health.json()
                return body if body["turns"]["applied"] >= 3 else None

            health = await eventually(applied_all, deadline=DEADLINE, what="three turns applied")
        assert health["ai"] == "off"


# --- suppression ---------------------------------------------------------------------


def event(stream: str, seq: int, type_: str, payload: Json) -> tuple[bytes, bytes]:
    org, _, member = stream.partition("/member:")
    envelope = {
        "event_id": str(uuid.uuid4()),
        "type": type_,
        "schema_version": 1,
        "stream_id": stream,
        "seq": seq,
        "command_id": str(uuid.uuid4()),
        "occurred_at": datetime.now(UTC).isoformat(),
        "actor": {"org": org, "member": member},
        "payload": payload,
    }
    return stream.encode(), json.dumps(envelope).encode()


def hashed(org: str, source: str) -> str:
    """A source id as the writer's events carry it, and extractor.sources keeps it."""
    return MasterKey(load_master_key(CommonSettings())).source_hash(org, source)


def saved_then_forgotten(stream: str, item_id: str) -> list[tuple[bytes, bytes]]:
    """A memory saved from turn-a's msg-7 (seq 1), then forgotten (seq 2)."""
    return [
        remembered(stream, 1, item_id, ["turn-a", "msg-7"]),
        event(stream, 2, "MemoryForgotten", {"item_id": item_id, "revisions": 1}),
    ]


def remembered(
    stream: str, seq: int, item_id: str, sources: list[str], plain: bool = False
) -> tuple[bytes, bytes]:
    """A new memory's event from these sources: with their keyed hashes (its labels are
    sealed), or, ``plain``, as events written before labels were sealed carried them."""
    sealed = {"key_id": item_id, "nonce": "bm9uY2U=", "ciphertext": "c2VhbGVk"}
    org = stream.split("/", 1)[0]
    named = (
        {"sources": sources}
        if plain
        else {"source_hashes": [hashed(org, s) for s in sources], "labels": sealed}
    )
    return event(
        stream,
        seq,
        "MemoryRemembered",
        {
            "item_id": item_id,
            "scope": stream.split("/", 1)[1],
            "kind": "preference",
            "status": "candidate",
            "content": sealed,
            **named,
            "content_hash": "h",
            "content_length": 10,
        },
    )


async def suppression(stack: dict[str, str], org: str) -> dict[str, bool] | None:
    conn = await asyncpg.connect(stack["DATABASE_URL"])
    try:
        rows = await conn.fetch(
            "SELECT source_id, bool_or(suppressed) AS s FROM extractor.sources "
            "WHERE org = $1 GROUP BY source_id",
            org,
        )
    finally:
        await conn.close()
    return {r["source_id"]: r["s"] for r in rows} or None


async def test_a_forgotten_items_sources_yield_no_proposals(
    stack_settings: dict[str, str], private_topics: tuple[str, str]
) -> None:
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    conversations, events = private_topics
    ana = caller()
    stream = f"{ana.org}/member:ana"
    forgotten, live = str(uuid.uuid4()), str(uuid.uuid4())
    settings = settings_for(conversations_topic=conversations, events_topic=events)
    message = "I prefer short answers."

    async with Watch(bootstrap, topics.COMMANDS) as commands, running(settings):
        await publish(
            bootstrap,
            events,
            *saved_then_forgotten(stream, forgotten),
            remembered(stream, 3, live, ["msg-9"], plain=True),
        )
        # Keyed hashes of the sources (a plain source of before is hashed when recorded),
        # and the forgotten item's own id.
        expected = {
            hashed(ana.org, "turn-a"): True,
            hashed(ana.org, "msg-7"): True,
            forgotten: True,
            hashed(ana.org, "msg-9"): False,
        }
        await eventually(
            lambda: _equal(suppression(stack_settings, ana.org), expected), deadline=DEADLINE
        )
        await publish(
            bootstrap,
            conversations,
            turn(ana, "turn-a", message),  # the forgotten item's own source turn
            turn(ana, "turn-b", message, sources=("msg-7",)),  # shares a source
            turn(ana, "turn-c", message, sources=(forgotten,)),  # recalled the item
            turn(ana, "turn-d", message, sources=("msg-9",)),  # a live item's source
        )
        await eventually(
            lambda: proposed(commands, ana.org, ids(stream, "turn-d", "rules", 1)),
            deadline=DEADLINE,
        )
        sources = {e.payload["sources"][0] for e in await commands_of(commands, ana.org)}
        assert sources == {"turn-d"}
        assert await turn_row(stack_settings, ana.org, "turn-a") is None


async def test_the_sources_a_keyed_save_brings_to_a_memory_are_suppressed_with_it(
    stack_settings: dict[str, str], private_topics: tuple[str, str]
) -> None:
    """QA: a keyed save that revised the key's memory dropped its sources. Its revision
    carries their hashes now, and a forget of the memory suppresses them too."""
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    conversations, events = private_topics
    ana = caller()
    stream, item_id = f"{ana.org}/member:ana", str(uuid.uuid4())
    sealed = {"key_id": item_id, "nonce": "bm9uY2U=", "ciphertext": "c2VhbGVk"}
    revised = event(
        stream,
        2,
        "MemoryRevised",
        {
            "item_id": item_id,
            "revision": 2,
            "base_revision": 1,
            "reason": "corrected",
            "content": sealed,
            "content_hash": "h2",
            "content_length": 10,
            "labels": sealed,
            "source_hashes": [hashed(ana.org, "msg-8")],
        },
    )
    forgotten = event(stream, 3, "MemoryForgotten", {"item_id": item_id, "revisions": 2})
    settings = settings_for(conversations_topic=conversations, events_topic=events)
    async with running(settings):
        await publish(
            bootstrap, events, remembered(stream, 1, item_id, ["msg-7"]), revised, forgotten
        )
        expected = {hashed(ana.org, "msg-7"): True, hashed(ana.org, "msg-8"): True, item_id: True}
        await eventually(
            lambda: _equal(suppression(stack_settings, ana.org), expected), deadline=DEADLINE
        )


async def test_the_same_turn_id_from_another_member_is_another_turn(
    stack_settings: dict[str, str], private_topics: tuple[str, str]
) -> None:
    """A turn id is its caller's: Ana's "turn-1" does not make Bob's already handled,
    in their own scopes or in the one they share."""
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    conversations, events = private_topics
    ana = caller()
    bob = caller(org=ana.org, member="bob")
    shared = f"{ana.org}/shared"
    settings = settings_for(conversations_topic=conversations, events_topic=events)
    expected = (
        ids(f"{ana.org}/member:ana", "turn-1", "rules", 1)
        | ids(f"{ana.org}/member:bob", "turn-1", "rules", 1, member="bob")
        | ids(shared, "turn-2", "rules", 1)
        | ids(shared, "turn-2", "rules", 1, member="bob")
    )

    async with Watch(bootstrap, topics.COMMANDS) as commands, running(settings):
        await publish(
            bootstrap,
            conversations,
            turn(ana, "turn-1", "I prefer tea."),
            turn(bob, "turn-1", "I prefer coffee."),
            turn(ana, "turn-2", "We decided to ship on Tuesdays.", scope="shared"),
            turn(bob, "turn-2", "We decided to review on Fridays.", scope="shared"),
        )
        got = await eventually(lambda: proposed(commands, ana.org, expected), deadline=DEADLINE)
        by_stream = sorted((e.stream_id, e.payload["content"]) for e in got.values())
        assert by_stream == [
            (f"{ana.org}/member:ana", "I prefer tea."),
            (f"{ana.org}/member:bob", "I prefer coffee."),
            (shared, "We decided to review on Fridays."),
            (shared, "We decided to ship on Tuesdays."),
        ]
        tokens = {e.payload["content"]: e.token for e in got.values()}
        assert tokens["I prefer coffee."] == tokens["We decided to review on Fridays."] == bob.token
        assert tokens["I prefer tea."] == tokens["We decided to ship on Tuesdays."] == ana.token
        # One row per turn handled, each naming its stream and author.
        rows = await eventually(lambda: turn_rows(stack_settings, ana.org, 4), deadline=DEADLINE)
        assert sorted((r["turn_id"], r["stream_id"], r["author"]) for r in rows) == [
            ("turn-1", f"{ana.org}/member:ana", author("ana")),
            ("turn-1", f"{ana.org}/member:bob", author("bob")),
            ("turn-2", shared, author("ana")),
            ("turn-2", shared, author("bob")),
        ]


async def turn_rows(stack: dict[str, str], org: str, count: int) -> list[asyncpg.Record] | None:
    conn = await asyncpg.connect(stack["DATABASE_URL"])
    try:
        rows = await conn.fetch(
            "SELECT turn_id, stream_id, author FROM extractor.turns WHERE org = $1", org
        )
    finally:
        await conn.close()
    return rows if len(rows) >= count else None


async def test_a_forgotten_items_sources_suppress_its_own_stream_only(
    stack_settings: dict[str, str], private_topics: tuple[str, str]
) -> None:
    """Message ids are the caller's: Ana forgetting what came from her "msg-7" keeps
    Bob's "msg-7" turn learnable, while her own turns from it stay suppressed, and any
    turn citing her forgotten item (its id, a uuid) too."""
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    conversations, events = private_topics
    ana = caller()
    bob = caller(org=ana.org, member="bob")
    stream = f"{ana.org}/member:ana"
    forgotten = str(uuid.uuid4())
    settings = settings_for(conversations_topic=conversations, events_topic=events)

    async with Watch(bootstrap, topics.COMMANDS) as commands, running(settings):
        await publish(
            bootstrap,
            events,
            *saved_then_forgotten(stream, forgotten),
        )
        expected = {
            hashed(ana.org, "turn-a"): True,
            hashed(ana.org, "msg-7"): True,
            forgotten: True,
        }
        await eventually(
            lambda: _equal(suppression(stack_settings, ana.org), expected), deadline=DEADLINE
        )
        await publish(
            bootstrap,
            conversations,
            turn(ana, "turn-b", "I prefer tea.", sources=("msg-7",)),  # Ana's own message
            turn(bob, "turn-c", "I prefer green tea.", sources=(forgotten,)),  # cites the item
            turn(bob, "turn-a", "I prefer coffee.", sources=("msg-7",)),  # Bob's own ids
        )
        await eventually(
            lambda: proposed(
                commands, ana.org, ids(f"{ana.org}/member:bob", "turn-a", "rules", 1, "bob")
            ),
            deadline=DEADLINE,
        )
        # One run, one partition, in order: the turns before Bob's were read, and skipped.
        proposals = await commands_of(commands, ana.org)
        assert [e.payload["content"] for e in proposals] == ["I prefer coffee."]
        assert await turn_row(stack_settings, ana.org, "turn-b") is None
        assert await turn_row(stack_settings, ana.org, "turn-c") is None


async def _equal(probe: Any, expected: Json) -> bool:
    return await probe == expected


# --- bad input -----------------------------------------------------------------------


async def test_poison_turns_and_events_land_on_the_dead_letter_topic(
    stack_settings: dict[str, str], private_topics: tuple[str, str]
) -> None:
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    conversations, events = private_topics
    marker = uuid.uuid4().hex
    ana = caller()
    forged = Caller(ana.org, "ana", ana.token[:-4] + "AAAA")
    settings = settings_for(conversations_topic=conversations, events_topic=events)

    async with Watch(bootstrap, topics.dead_letter_topic("extractor")) as dlq, running(settings):
        await publish(
            bootstrap,
            conversations,
            (b"k", f"not json {marker}".encode()),
            turn(forged, f"forged-{marker}", "I prefer tea."),
            turn(ana, f"agentless-{marker}", "I prefer tea.", scope="agent"),
            turn(ana, f"fine-{marker}", "I prefer tea."),
        )
        await publish(bootstrap, events, (b"k", f"{{broken event {marker}".encode()))
        letters = await eventually(
            lambda: _at_least(dead_letters(dlq, marker), 4), deadline=DEADLINE
        )

        # The good turn after the bad ones is still handled: the service kept going.
        await eventually(
            lambda: turn_row(stack_settings, ana.org, f"fine-{marker}"), deadline=DEADLINE
        )

    errors = sorted(d["error"] for d in letters)
    assert len(letters) == 4, letters
    assert {d["topic"] for d in letters} == {conversations, events}
    assert any(e.startswith("undecodable conversation turn") for e in errors)
    assert any("no usable token" in e and "invalid bearer token" in e for e in errors)
    assert any("grants no 'agent' scope" in e for e in errors)
    assert any(e.startswith("undecodable event") for e in errors)


async def _at_least(probe: Any, count: int) -> Any:
    found = await probe
    return found if len(found) >= count else None


# --- the OpenAI-compatible path ------------------------------------------------------


Scripted = tuple[int, dict[str, str], Json]


class ChatServer:
    """A real OpenAI-compatible endpoint on localhost, answering from a script."""

    def __init__(self, *script: Scripted) -> None:
        self.requests: list[Json] = []
        self._script = list(script)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next(self) -> Scripted:
        return self._script.pop(0) if len(self._script) > 1 else self._script[0]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                auth = self.headers.get("authorization")
                server.requests.append({"path": self.path, "auth": auth, "body": body})
                status, headers, payload = server._next()
                data = json.dumps(payload).encode()
                self.send_response(status)
                for name, value in {**headers, "content-type": "application/json"}.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: Any) -> None:
                pass

        return Handler


def chat_reply(candidates: list[Json]) -> Scripted:
    content = json.dumps({"candidates": candidates})
    return (
        200,
        {},
        {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]},
    )


def ai_settings(
    server: ChatServer, conversations: str, events: str, **more: Any
) -> ExtractorSettings:
    return settings_for(
        conversations_topic=conversations,
        events_topic=events,
        MEMORY_EXTRACTION_URL=server.url,
        MEMORY_EXTRACTION_MODEL="tiny-extractor",
        MEMORY_AI_API_KEY="test-key",
        ai_backoff_seconds=0.01,
        **more,
    )


@pytest.fixture
async def budget_day(stack_settings: dict[str, str]) -> AsyncIterator[date]:
    """A day of its own for the budget row, so tests never spend (or see) today's."""
    day = date(2200, 1, 1) + timedelta(days=uuid.uuid4().int % 300_000)
    yield day
    conn = await asyncpg.connect(stack_settings["DATABASE_URL"])
    try:
        await conn.execute("DELETE FROM ai.daily_requests WHERE day = $1", day)
    finally:
        await conn.close()


async def used_on(stack: dict[str, str], day: date) -> int | None:
    conn = await asyncpg.connect(stack["DATABASE_URL"])
    try:
        return await conn.fetchval("SELECT used FROM ai.daily_requests WHERE day = $1", day)
    finally:
        await conn.close()


async def test_ai_candidates_need_evidence_and_survive_a_429_within_the_budget(
    stack_settings: dict[str, str], private_topics: tuple[str, str], budget_day: date
) -> None:
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    ana = caller()
    stream = f"{ana.org}/member:ana"
    message = "I prefer short answers. My timezone is CET."
    script = chat_reply(
        [
            {
                "content": "Prefers short answers.",
                "kind": "preference",
                "evidence": "I prefer short answers",
            },
            {"content": "Lives in Paris.", "kind": "fact", "evidence": "I live in Paris"},
            {"content": "Works in CET.", "kind": "fact", "evidence": "my timezone is  CET"},
            {
                "content": "Key sk-abcdefghijklmnopqrstuv",
                "kind": "fact",
                "evidence": "I prefer short answers",
            },
        ]
    )
    with ChatServer((429, {"Retry-After": "0"}, {"error": "slow down"}), script) as server:
        # A budget of two: the 429 and its retry. The next turn finds none left.
        settings = ai_settings(server, *private_topics, MEMORY_AI_DAILY_REQUEST_LIMIT=2)
        async with (
            Watch(bootstrap, topics.COMMANDS) as commands,
            running(settings, today=lambda: budget_day),
        ):
            await publish(bootstrap, private_topics[0], turn(ana, "ai-1", message))
            got = await eventually(
                lambda: proposed(commands, ana.org, ids(stream, "ai-1", "ai", 2)),
                deadline=DEADLINE,
            )
            assert sorted(e.payload["content"] for e in got.values()) == [
                "Prefers short answers.",
                "Works in CET.",
            ]
            assert all(e.payload["tags"] == ["extracted", "ai"] for e in got.values())
            assert all(e.payload["candidate"] is True for e in got.values())

            await publish(bootstrap, private_topics[0], turn(ana, "ai-2", "I like green tea."))
            [rules] = (
                await eventually(
                    lambda: proposed(commands, ana.org, ids(stream, "ai-2", "rules", 1)),
                    deadline=DEADLINE,
                )
            ).values()
            assert rules.payload["content"] == "I like green tea."
            # Recorded with the offset, once the batch commits.
            row = await eventually(
                lambda: turn_row(stack_settings, ana.org, "ai-2"), deadline=DEADLINE
            )

    assert len(server.requests) == 2
    first = server.requests[0]
    assert first["path"] == "/v1/chat/completions"
    assert first["auth"] == "Bearer test-key"
    assert first["body"]["model"] == "tiny-extractor"
    assert first["body"]["messages"][-1] == {"role": "user", "content": message}
    assert await used_on(stack_settings, budget_day) == 2
    assert row["method"] == "rules"


async def test_a_failing_ai_falls_back_to_the_rules_and_dead_letters_the_turn(
    stack_settings: dict[str, str], private_topics: tuple[str, str], budget_day: date
) -> None:
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    ana = caller()
    stream = f"{ana.org}/member:ana"
    turn_id = f"down-{uuid.uuid4().hex}"
    with ChatServer((503, {}, {"error": "overloaded"})) as server:
        settings = ai_settings(server, *private_topics, ai_max_retries=2)
        async with (
            Watch(bootstrap, topics.COMMANDS) as commands,
            Watch(bootstrap, topics.dead_letter_topic("extractor")) as dlq,
            running(settings, today=lambda: budget_day),
        ):
            await publish(bootstrap, private_topics[0], turn(ana, turn_id, "I prefer tea."))
            [proposal] = (
                await eventually(
                    lambda: proposed(commands, ana.org, ids(stream, turn_id, "rules", 1)),
                    deadline=DEADLINE,
                )
            ).values()
            [letter] = await eventually(lambda: dead_letters(dlq, turn_id), deadline=DEADLINE)
            row = await eventually(
                lambda: turn_row(stack_settings, ana.org, turn_id), deadline=DEADLINE
            )

    assert proposal.payload["content"] == "I prefer tea."
    assert "AI extraction failed" in letter["error"] and "HTTP 503" in letter["error"]
    assert len(server.requests) == 3  # the first try and two retries
    assert row["method"] == "rules-fallback"
