"""The projector's guard on real Postgres: each (stream_id, seq) is applied once, a batch
read again changes nothing, and a gap or a different event at a taken seq is reported in
projector.anomalies, not papered over. The generation and the stream's head follow."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import asyncpg
import pytest

from contracts.envelope import Actor, EventEnvelope
from contracts.events import (
    SCHEMA_VERSIONS,
    Event,
    Labels,
    MemoryPinned,
    MemoryRelabeled,
    MemoryRemembered,
    MemoryRevised,
)
from engram.crypto import MasterKey, load_master_key, seal
from engram.keystore import KeyStore, shred
from engram.settings import CommonSettings
from services.projector.handlers import EventProjector

pytestmark = pytest.mark.integration


class Stream:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.org = f"guard-{uuid.uuid4().hex[:8]}"
        self.stream_id = f"{self.org}/shared"
        self.keys = KeyStore(pool, MasterKey(load_master_key(CommonSettings())))
        self.dead: list[str] = []
        self.projector = EventProjector(self.keys, self._dead_letter)
        self.pool = pool
        self.offset = 0

    async def _dead_letter(self, record: Any, error: str) -> None:
        self.dead.append(error)

    async def remember(self, seq: int, text: str) -> Any:
        item_id = str(uuid.uuid4())
        key = (await self.keys.create_many([(item_id, self.org)]))[item_id]
        event = MemoryRemembered(
            item_id=item_id,
            scope="shared",
            kind="fact",
            status="active",
            content=seal(item_id, key, text),
            content_hash=f"h-{text}",
            content_length=len(text),
        )
        return self.record(seq, event)

    def record(self, seq: int, event: Event, event_id: str | None = None) -> Any:
        name = type(event).__name__
        env = EventEnvelope(
            event_id=event_id or str(uuid.uuid4()),
            type=name,
            schema_version=SCHEMA_VERSIONS[name],
            stream_id=self.stream_id,
            seq=seq,
            command_id=str(uuid.uuid4()),
            occurred_at=datetime.now(UTC),
            actor=Actor(org=self.org, member="ana"),
            payload=event.model_dump(mode="json"),
        )
        self.offset += 1
        return SimpleNamespace(
            topic="engram.events",
            partition=0,
            offset=self.offset,
            value=env.model_dump_json().encode(),
        )

    async def apply(self, records: list[Any]) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            await self.projector.handle_batch(conn, records)

    async def apply_in_one(self, records: list[Any]) -> bool:
        """The one-statement path, as the follower tries it first: on the batch it
        prepared (decoded once), with its offsets."""
        offsets = [(self.org, "engram.events", 0, records[-1].offset + 1)]
        good = await self.projector.prepare(records, self._dead_letter)
        async with self.pool.acquire() as conn:
            return await self.projector.apply_new_items(conn, good, offsets)

    async def applied_offset(self) -> int | None:
        return await self.pool.fetchval(
            "SELECT next_offset FROM projector.offsets WHERE consumer = $1", self.org
        )

    async def audit(self) -> int:
        return await self.pool.fetchval(
            "SELECT count(*) FROM memory.audit WHERE stream_id = $1", self.stream_id
        )

    async def anomalies(self) -> list[tuple[str, int | None, int]]:
        rows = await self.pool.fetch(
            "SELECT kind, expected, got FROM projector.anomalies WHERE stream_id = $1 ORDER BY id",
            self.stream_id,
        )
        return [(r["kind"], r["expected"], r["got"]) for r in rows]

    async def state(self) -> tuple[int, int, int]:
        items = await self.pool.fetchval(
            "SELECT count(*) FROM memory.items WHERE org = $1", self.org
        )
        head = await self.pool.fetchval(
            "SELECT seq FROM projector.stream_heads WHERE stream_id = $1", self.stream_id
        )
        generation = await self.pool.fetchval(
            "SELECT generation FROM memory.generations WHERE org = $1 AND scope = 'shared'",
            self.org,
        )
        return items, head, generation


@pytest.fixture
async def s(pool: asyncpg.Pool) -> AsyncIterator[Stream]:
    """A stream of the test's own org, whose offsets row (its org is the consumer) is
    deleted at the end: a row left behind is a consumer `engram lag` shows for good."""
    stream = Stream(pool)
    try:
        yield stream
    finally:
        await pool.execute("DELETE FROM projector.offsets WHERE consumer = $1", stream.org)


async def test_each_seq_is_applied_once_and_gaps_and_conflicts_are_reported(
    pool: asyncpg.Pool, s: Stream
) -> None:
    first = [await s.remember(1, "one"), await s.remember(2, "two")]
    await s.apply(first)
    assert await s.state() == (2, 2, 2)
    assert await s.anomalies() == []

    await s.apply(first)  # the same batch read again: nothing changes
    assert await s.state() == (2, 2, 2)
    assert await s.anomalies() == []

    # Another event at a taken seq: reported, not applied.
    await s.apply([await s.remember(2, "impostor")])
    assert await s.state() == (2, 2, 2)
    assert await s.anomalies() == [("conflicting_duplicate", None, 2)]

    # seq 4 after 2: the gap is reported, and the event is applied all the same.
    await s.apply([await s.remember(4, "four")])
    assert await s.state() == (3, 4, 3)
    assert await s.anomalies() == [("conflicting_duplicate", None, 2), ("gap", 3, 4)]
    assert s.dead == []
    texts = await pool.fetch(
        "SELECT content FROM memory.items WHERE org = $1 ORDER BY content", s.org
    )
    assert [r["content"] for r in texts] == ["four", "one", "two"]


async def test_the_same_event_twice_in_one_batch_is_applied_once(
    pool: asyncpg.Pool, s: Stream
) -> None:
    """QA: both copies were applied (the generation counted two) and the second was
    reported as a gap, so a replay reading them in one fetch differed from the live model,
    which had read them in two."""
    one = await s.remember(1, "one")
    copy = SimpleNamespace(**{**vars(one), "offset": one.offset + 1})
    assert not await s.apply_in_one([one, copy])  # not a run of new memories
    await s.apply([one, copy])
    assert await s.state() == (1, 1, 1)
    assert await s.anomalies() == []
    assert await s.audit() == 1


async def test_a_batch_of_new_memories_is_applied_in_one_statement_or_not_at_all(
    pool: asyncpg.Pool, s: Stream
) -> None:
    first = [await s.remember(1, "one"), await s.remember(2, "two")]
    assert await s.apply_in_one(first)
    assert await s.state() == (2, 2, 2)
    assert (await s.audit(), await s.applied_offset()) == (2, first[-1].offset + 1)
    texts = await pool.fetch("SELECT content FROM memory.revisions WHERE org = $1", s.org)
    assert sorted(r["content"] for r in texts) == ["one", "two"]

    # Each of these writes nothing, offsets included: the full path takes the batch.
    declined = [
        first,  # read again: the stream's head is past it
        [await s.remember(4, "four")],  # a gap
        [await s.remember(3, "three"), await s.remember(5, "five")],  # a gap inside
        [
            s.record(
                3, MemoryPinned(item_id=str(uuid.uuid4()), scope="shared", pinned=True, revision=2)
            )
        ],
    ]
    for batch in declined:
        assert not await s.apply_in_one(batch)
        assert await s.state() == (2, 2, 2)
        assert (await s.audit(), await s.applied_offset()) == (2, first[-1].offset + 1)
    assert await s.anomalies() == []  # the full path reports them

    # Another applier recorded an event of the batch first: the whole statement rolls back.
    racing = [await s.remember(3, "three"), await s.remember(4, "four")]
    await s.apply([racing[1]])  # seq 4 alone: a gap, reported and applied
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE projector.stream_heads SET seq = 2 WHERE stream_id = $1", s.stream_id
        )
    assert not await s.apply_in_one(racing)
    assert await s.state() == (3, 2, 3)
    assert await s.audit() == 3


async def test_a_fetch_is_decoded_once_and_its_undecodable_records_dead_lettered_first(
    s: Stream,
) -> None:
    """The follower prepares a fetch once for both paths: an undecodable record goes to
    the dead letters before anything is written, and the new memories around it still
    take the one statement."""
    one = await s.remember(1, "one")
    s.offset += 1
    poison = SimpleNamespace(topic="engram.events", partition=0, offset=s.offset, value=b"{")
    two = await s.remember(2, "two")
    assert await s.apply_in_one([one, poison, two])
    assert len(s.dead) == 1 and s.dead[0].startswith("undecodable event")
    assert await s.state() == (2, 2, 2)
    assert await s.applied_offset() == two.offset + 1


async def test_each_new_head_is_announced_when_its_batch_commits(
    pool: asyncpg.Pool, s: Stream
) -> None:
    """Both paths announce '<seq> <stream_id>' on engram_projected, after the commit."""
    heard: asyncio.Queue[str] = asyncio.Queue()

    def announced(_conn: object, _pid: int, _channel: str, payload: object) -> None:
        if str(payload).endswith(f" {s.stream_id}"):  # not another test's streams
            heard.put_nowait(str(payload))

    listener = await pool.acquire()
    await listener.add_listener("engram_projected", announced)
    try:
        assert await s.apply_in_one([await s.remember(1, "one"), await s.remember(2, "two")])
        assert await asyncio.wait_for(heard.get(), 10) == f"2 {s.stream_id}"
        await s.apply([await s.remember(3, "three")])  # the full path
        assert await asyncio.wait_for(heard.get(), 10) == f"3 {s.stream_id}"
        async with pool.acquire() as conn, conn.transaction():
            await s.projector.handle_batch(conn, [await s.remember(4, "four")])
            with pytest.raises(TimeoutError):  # nothing before the commit
                await asyncio.wait_for(heard.get(), 0.5)
        assert await asyncio.wait_for(heard.get(), 10) == f"4 {s.stream_id}"
    finally:
        await listener.remove_listener("engram_projected", announced)
        await pool.release(listener)


async def test_a_memorys_sealed_labels_are_opened_and_plain_ones_of_before_still_read(
    s: Stream,
) -> None:
    """Key, tags and sources travel sealed (``Labels``); an event written before they were
    sealed carries them in plain. Both project alike; a shredded key leaves none."""
    made = {}
    writer = KeyStore(s.pool, MasterKey(load_master_key(CommonSettings())))  # not cached here
    for n, legacy in enumerate((False, True, False), start=1):
        item_id = str(uuid.uuid4())
        data_key = (await writer.create_many([(item_id, s.org)]))[item_id]
        labels = Labels(key=f"key-{n}", tags=("work",), sources=(f"msg-{n}",))
        plain = labels.model_dump() if legacy else {}
        sealed = None if legacy else seal(item_id, data_key, labels.model_dump_json())
        event = MemoryRemembered(
            item_id=item_id,
            scope="shared",
            kind="fact",
            status="active",
            content=seal(item_id, data_key, f"fact {n}"),
            content_hash=f"h-{n}",
            content_length=6,
            labels=sealed,
            **plain,
        )
        made[item_id] = s.record(n, event)
    shredded = list(made)[2]
    async with s.pool.acquire() as conn:
        assert await shred(conn, shredded)
    await s.apply(list(made.values()))
    rows = await s.pool.fetch(
        "SELECT item_id, key, tags, sources FROM memory.items WHERE org = $1", s.org
    )
    found = {r["item_id"]: (r["key"], list(r["tags"]), list(r["sources"])) for r in rows}
    sealed_id, legacy_id, _ = made
    assert found[sealed_id] == ("key-1", ["work"], ["msg-1"])
    assert found[legacy_id] == ("key-2", ["work"], ["msg-2"])
    assert found[shredded] == (None, [], [])  # forgotten before it was projected


async def test_a_relabel_and_a_keyed_save_in_one_batch_take_their_tags_in_the_logs_order(
    pool: asyncpg.Pool, s: Stream
) -> None:
    """QA: a relabel's tags were written after a keyed save's, whatever their order in the
    log (writes go by query), so a batch that held both lost the save's tags, and a replay
    that batched them otherwise differed from the live model."""
    first = await s.remember(1, "Window seats.")
    await s.apply([first])
    item_id = MemoryRemembered.model_validate(
        EventEnvelope.model_validate_json(first.value).payload
    ).item_id
    key = (await s.keys.get_many({item_id}))[item_id]

    def labels(*tags: str) -> Any:
        return seal(
            item_id,
            key,
            Labels(key="seat", tags=tags, sources=("m-1",)).model_dump_json(exclude_defaults=True),
        )

    relabel = s.record(
        2, MemoryRelabeled(item_id=item_id, revision=2, kind="preference", labels=labels("flights"))
    )
    save = s.record(
        3,
        MemoryRevised(
            item_id=item_id,
            revision=3,
            base_revision=2,
            reason="corrected",
            content=seal(item_id, key, "Aisle."),
            content_hash="h-aisle",
            content_length=6,
            labels=labels("flights", "comfort"),
        ),
    )
    await s.apply([relabel, save])
    row = await pool.fetchrow(
        "SELECT kind, tags, sources, revision FROM memory.items WHERE item_id = $1", item_id
    )
    assert (row["kind"], row["tags"], row["sources"], row["revision"]) == (
        "preference",
        ["flights", "comfort"],
        ["m-1"],
        3,
    )
