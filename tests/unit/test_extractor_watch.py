"""The extractor on engram.events: the sources of a memory that brings them are recorded,
and suppressed once it is forgotten; every other event is passed over without its full
decode, and a record it cannot read is judged as before (lettered when it may matter)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from aiokafka import ConsumerRecord
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import events as ev
from contracts import topics, upcasters
from contracts.envelope import Actor, event_json
from contracts.events import (
    SCHEMA_VERSIONS,
    Event,
    MemoryForgotten,
    MemoryPinned,
    MemoryRemembered,
    MemoryRevised,
    decode_event,
)
from engram.crypto import MasterKey
from services.extractor import handlers
from services.extractor.adapters.store import Q
from services.extractor.handlers import SourceRecorder
from services.extractor.watch import WATCHED
from tests.unit.conftest import plain_seal
from tests.unit.test_decide_properties import command_events, steps

MASTER = MasterKey(b"m" * 32)
STREAM = "acme/member:ana"
NAMES = {sql: name for name, sql in Q.items()}
Ran = list[tuple[str, tuple[Any, ...]]]


class Conn:
    """The follower's connection: the statements run on it, by name."""

    def __init__(self) -> None:
        self.ran: Ran = []

    async def execute(self, sql: str, *args: Any) -> None:
        self.ran.append((NAMES[sql], args))


class Letters:
    """The follower's dead-letter side: what it was handed."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    async def dead_letter(self, record: Any, error: str) -> None:
        self.errors.append(error)


def record(value: bytes) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(
        topic=topics.EVENTS,
        partition=0,
        offset=7,
        timestamp=0,
        timestamp_type=1,
        key=STREAM.encode(),
        value=value,
        checksum=None,
        serialized_key_size=len(STREAM),
        serialized_value_size=len(value),
        headers=[],
    )


def raw(event: Event, schema_version: int | None = None) -> bytes:
    """The record the writer sends for the event (services/command/adapters/writer.py)."""
    name = type(event).__name__
    return event_json(
        event_id="e-1",
        type=name,
        schema_version=schema_version or SCHEMA_VERSIONS[name],
        stream_id=STREAM,
        seq=3,
        command_id="c-1",
        occurred_at=datetime(2030, 5, 1, tzinfo=UTC),
        actor=Actor(org="acme", member="ana"),
        made_by="person",
        payload=event,
    )


def edited(event: Event, **payload: Any) -> bytes:
    """The event's record with its payload's fields replaced (None: removed)."""
    body = json.loads(raw(event))
    body["payload"].update(payload)
    body["payload"] = {k: v for k, v in body["payload"].items() if v is not None}
    return json.dumps(body).encode()


def remembered(**fields: Any) -> MemoryRemembered:
    return MemoryRemembered(
        item_id="i-1",
        scope="member:ana",
        kind="fact",
        status="active",
        content=plain_seal("i-1", "tea"),
        content_hash="h",
        content_length=3,
        **fields,
    )


def revised(**fields: Any) -> MemoryRevised:
    return MemoryRevised(
        item_id="i-1",
        revision=2,
        base_revision=1,
        reason="corrected",
        content=plain_seal("i-1", "coffee"),
        content_hash="h2",
        content_length=6,
        **fields,
    )


def forgotten(**fields: Any) -> MemoryForgotten:
    return MemoryForgotten(item_id="i-1", revisions=2, content_hashes=("h",), **fields)


async def recorded(*values: bytes) -> tuple[Ran, list[str]]:
    """What the recorder runs for the records, and what it dead-letters."""
    recorder = SourceRecorder(MASTER)
    recorder.follower = letters = Letters()  # type: ignore[assignment]
    conn = Conn()
    await recorder.handle_batch(conn, [record(v) for v in values])
    return conn.ran, letters.errors


SUPPRESSED = [("suppress_sources", ("acme", "i-1")), ("suppress_item_id", ("acme", "i-1"))]


async def test_an_event_that_brings_no_sources_is_passed_over_undecoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_full_decode(raw: bytes) -> Any:
        raise AssertionError("decoded in full")

    monkeypatch.setattr(handlers, "decode_event", no_full_decode)
    values = [
        raw(remembered(tags=("t",))),
        raw(revised()),
        raw(forgotten(moved_to="i-2")),  # a move: its text lives on in i-2
        raw(MemoryPinned(item_id="i-1", revision=2, pinned=True)),
    ]
    assert await recorded(*values) == ([], [])


async def test_a_memory_that_brings_sources_records_their_hashes() -> None:
    ran, errors = await recorded(
        raw(remembered(source_hashes=("s1", "s2"))), raw(revised(source_hashes=("s3",)))
    )
    assert ran == [
        ("record_sources", ("acme", ["s1", "s2"], "i-1", STREAM)),
        ("record_sources", ("acme", ["s3"], "i-1", STREAM)),
    ]
    assert errors == []


async def test_a_memory_saved_before_sources_were_sealed_records_their_hashes() -> None:
    ran, errors = await recorded(raw(remembered(sources=("turn-1", "turn-2"))))
    hashes = [MASTER.source_hash("acme", s) for s in ("turn-1", "turn-2")]
    assert ran == [("record_sources", ("acme", hashes, "i-1", STREAM))]
    assert errors == []


async def test_a_forget_suppresses_the_sources_and_a_move_does_not() -> None:
    assert await recorded(raw(forgotten())) == (SUPPRESSED, [])
    assert await recorded(edited(forgotten(), moved_to=None)) == (SUPPRESSED, [])
    assert await recorded(raw(forgotten(moved_to="i-2"))) == ([], [])


async def test_an_older_version_is_upcast_before_it_is_judged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Pretend MemoryRemembered is at v2, and v1 named its source hashes otherwise.
    def lift(payload: dict[str, Any]) -> dict[str, Any]:
        return {**payload, "source_hashes": payload.pop("origins", [])}

    monkeypatch.setitem(ev.SCHEMA_VERSIONS, "MemoryRemembered", 2)
    monkeypatch.setitem(upcasters.UPCASTERS, ("MemoryRemembered", 1), lift)
    body = json.loads(raw(remembered(), schema_version=1))
    body["payload"]["origins"] = ["s1"]
    ran, errors = await recorded(json.dumps(body).encode())
    assert ran == [("record_sources", ("acme", ["s1"], "i-1", STREAM))]
    assert errors == []


async def test_a_nul_of_an_old_event_reads_as_a_replacement() -> None:
    ran, errors = await recorded(edited(forgotten(), item_id="i-\u00001"))
    assert [args for _, args in ran] == [("acme", "i-\ufffd1")] * 2
    assert errors == []


@pytest.mark.parametrize(
    "value",
    [
        edited(remembered(source_hashes=("s1",)), content=None),
        edited(remembered(sources=("turn-1",)), kind="hunter2"),
        edited(remembered(), source_hashes="s1"),  # not a list
        edited(remembered(), source_hashes=[1]),
        edited(revised(source_hashes=("s1",)), revision=-1),
        edited(forgotten(), revisions=None),
        raw(remembered(source_hashes=("s1",)), schema_version=9),  # newer than this reader
    ],
)
async def test_a_record_of_a_watched_type_that_may_matter_and_cannot_be_read_is_lettered(
    value: bytes,
) -> None:
    ran, errors = await recorded(value)
    assert ran == [] and len(errors) == 1
    assert errors[0].startswith("undecodable event: ")


@pytest.mark.parametrize(
    "value", [b"not json", b"", raw(remembered())[:-20], b"[]", b'{"type": "MemoryRemembered"}']
)
async def test_a_record_that_is_no_event_is_lettered(value: bytes) -> None:
    ran, errors = await recorded(value)
    assert ran == [] and len(errors) == 1


async def test_a_broken_record_that_brings_nothing_here_is_the_projectors_to_report() -> None:
    """Of a type not watched, or one that brings no sources and is no forget: passed over
    undecoded (the projector decodes every event, and letters it)."""
    pinned = MemoryPinned(item_id="i-1", revision=2, pinned=True)
    values = [
        edited(pinned, pinned=None),
        edited(pinned, revision="x"),
        edited(remembered(), status="gone"),
        edited(revised(), content=None),
        edited(forgotten(moved_to="i-2"), revisions=None),
    ]
    assert await recorded(*values) == ([], [])


@st.composite
def tweaked(draw: Any) -> list[Event]:
    """The events of a command sequence, some bringing sources or moved."""
    events = command_events(draw(st.lists(steps(), min_size=1, max_size=15)))
    hashes = st.lists(st.sampled_from(["s1", "s2"]), max_size=2).map(tuple)
    changes: dict[type[Event], st.SearchStrategy[dict[str, Any]]] = {
        MemoryRemembered: st.fixed_dictionaries({"source_hashes": hashes, "sources": hashes}),
        MemoryRevised: st.fixed_dictionaries({"source_hashes": hashes}),
        MemoryForgotten: st.fixed_dictionaries({"moved_to": st.sampled_from([None, "i-9"])}),
    }
    return [
        e.model_copy(update=draw(changes[type(e)])) if type(e) in changes else e for e in events
    ]


@settings(max_examples=150, deadline=None)
@given(tweaked())
def test_the_recorder_writes_what_a_full_decode_of_every_event_would(events: list[Event]) -> None:
    """What the glance passes over, the full decode would not have written for."""

    async def in_full() -> Ran:
        conn = Conn()
        for event in events:
            env, decoded = decode_event(raw(event))
            if env.type in WATCHED:
                await handlers._record(conn, env.stream_id, decoded, MASTER)
        return conn.ran

    assert asyncio.run(recorded(*map(raw, events))) == (asyncio.run(in_full()), [])
