"""decode_event: one pass for the current schema version, the same answer as the two
steps (envelope, then parse_event), and the two steps for everything else."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from contracts import events as ev
from contracts import upcasters
from contracts.envelope import Actor, EventEnvelope, EventHeader
from contracts.events import (
    MemoryLinked,
    MemoryPinned,
    MemoryRemembered,
    Sealed,
    decode_event,
    parse_event,
)

SEALED = Sealed(key_id="i-1", nonce="bm9uY2U=", ciphertext="Y2lwaGVy")


def remembered(**fields: Any) -> MemoryRemembered:
    return MemoryRemembered(
        item_id="i-1",
        scope="member:ana",
        kind="fact",
        status="active",
        content=SEALED,
        content_hash="h",
        content_length=5,
        **fields,
    )


def raw(event: ev.Event, **changes: Any) -> bytes:
    env = EventEnvelope(
        event_id="e-1",
        type=type(event).__name__,
        stream_id="acme/member:ana",
        seq=3,
        command_id="c-1",
        occurred_at=datetime(2026, 11, 30, tzinfo=UTC),
        actor=Actor(org="acme", member="ana"),
        payload=event.model_dump(mode="json"),
    )
    body = json.loads(env.model_dump_json())
    body.update(changes)
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    "event",
    [
        remembered(tags=("a",)),
        MemoryPinned(item_id="i-1", revision=2, pinned=True),
        ev.MemoryForgotten(item_id="i-1", revisions=2, content_hashes=("h",)),
    ],
)
def test_one_pass_gives_what_the_two_steps_give(event: ev.Event) -> None:
    data = raw(event)
    header, decoded = decode_event(data)
    env = EventEnvelope.model_validate_json(data)
    assert decoded == parse_event(env.type, env.schema_version, env.payload) == event
    assert isinstance(header, EventHeader)
    fields = set(EventHeader.model_fields)
    assert header.model_dump(include=fields) == env.model_dump(include=fields)


def test_added_fields_are_ignored_in_the_envelope_and_the_payload() -> None:
    event = MemoryPinned(item_id="i-1", revision=2, pinned=True)
    body = json.loads(raw(event, added_later=1))
    body["payload"]["also_new"] = "x"
    assert decode_event(json.dumps(body).encode())[1] == event


def test_an_older_version_is_upcast(monkeypatch: pytest.MonkeyPatch) -> None:
    # Pretend MemoryPinned is at v2, whose upcaster from v1 unpins: a v1 record must go
    # through it, even though it would also parse as v2 in one pass.
    monkeypatch.setitem(ev.SCHEMA_VERSIONS, "MemoryPinned", 2)
    monkeypatch.setitem(upcasters.UPCASTERS, ("MemoryPinned", 1), lambda p: {**p, "pinned": False})
    _, event = decode_event(raw(MemoryPinned(item_id="i-1", revision=2, pinned=True)))
    assert event == MemoryPinned(item_id="i-1", revision=2, pinned=False)


def test_bad_records_raise_what_the_two_steps_raise() -> None:
    pinned = MemoryPinned(item_id="i-1", revision=2, pinned=True)
    with pytest.raises(ValidationError):
        decode_event(b"not json")
    with pytest.raises(ValidationError):
        decode_event(b'{"type": "MemoryPinned"}')
    with pytest.raises(KeyError, match="unknown event type"):
        decode_event(raw(pinned, type="MemoryExploded"))
    with pytest.raises(ValueError, match="newer than this reader"):
        decode_event(raw(pinned, schema_version=2))
    body = json.loads(raw(pinned))
    del body["payload"]["pinned"]
    with pytest.raises(ValidationError):
        decode_event(json.dumps(body).encode())


def test_the_extractor_judges_only_the_events_it_watches() -> None:
    from types import SimpleNamespace

    from engram.tracking import PoisonMessageError
    from services.extractor.handlers import _watched_event

    event = remembered(sources=("turn-1",))
    assert _watched_event(SimpleNamespace(value=raw(event))) == ("acme/member:ana", event)
    pinned = json.loads(raw(MemoryPinned(item_id="i-1", revision=2, pinned=True)))
    del pinned["payload"]["pinned"]  # broken, but not a type the extractor reads
    assert _watched_event(SimpleNamespace(value=json.dumps(pinned).encode())) is None
    assert _watched_event(SimpleNamespace(value=raw(event, type="MemoryExploded"))) is None
    broken = json.loads(raw(event))
    del broken["payload"]["content"]
    with pytest.raises(PoisonMessageError):
        _watched_event(SimpleNamespace(value=json.dumps(broken).encode()))
    with pytest.raises(PoisonMessageError):
        _watched_event(SimpleNamespace(value=b"not json"))


def test_a_nul_written_before_commands_refused_it_reads_as_a_replacement() -> None:
    """Postgres's text cannot hold a NUL: no reader of the log may fail on an old one."""
    event = MemoryLinked(item_id="i-1", target_id="i-2", kind="related")
    body = json.loads(raw(event))
    body["payload"]["kind"] = "rel\u0000ated"
    body["actor"]["member"] = "a\u0000na"
    header, decoded = decode_event(json.dumps(body).encode())
    assert isinstance(decoded, MemoryLinked) and decoded.kind == "rel\ufffdated"
    assert header.actor.member == "a\ufffdna"


def test_an_event_the_read_models_cannot_store_is_refused_when_decoded() -> None:
    """Another producer's records (no ACLs in the dev stack) meet the reader's decode, not
    Postgres in the middle of its batch: a seq past a bigint, an id past an index row."""
    pinned = MemoryPinned(item_id="i-1", revision=2, pinned=True)

    def forged(event: ev.Event, **payload: Any) -> bytes:
        body = json.loads(raw(event))
        body["payload"].update(payload)
        return json.dumps(body).encode()

    refused = [
        raw(pinned, seq=2**63),
        forged(pinned, item_id="x" * 300_000),
        forged(MemoryLinked(item_id="i-1", target_id="i-2", kind="k"), kind="k" * 101),
        forged(remembered(), content_length=2**31),
    ]
    for record in refused:
        with pytest.raises(ValidationError):
            decode_event(record)
    deep = b'{"x": "\\u0000", "y": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(ValueError, match="nests deeper"):
        decode_event(deep)
