"""The contracts are the single source of truth: schemas fresh, keys co-partitioned."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from aiokafka.partitioner import DefaultPartitioner
from pydantic import ValidationError

from contracts import schemas, topics
from contracts.commands import Command, CorrectMemory, LinkMemory, RememberMemory
from contracts.conversations import ConversationTurn
from contracts.envelope import CommandEnvelope, EventEnvelope


def test_checked_in_json_schemas_are_current() -> None:
    on_disk = {p.name: p.read_text() for p in schemas.SCHEMA_DIR.glob("*.json")}
    assert on_disk == schemas.rendered(), "run `python -m contracts.schemas` and commit"


@pytest.mark.parametrize("key", ["acme/shared", "acme/member:ana", "x/session:42", "ü/ß"])
def test_partition_rule_matches_the_kafka_default_partitioner(key: str) -> None:
    parts = list(range(8))
    assert topics.partition_for(key, 8) == DefaultPartitioner()(key.encode(), parts, parts)


def test_events_are_kept_forever_and_commands_and_events_are_co_partitioned() -> None:
    specs = {s.name: s for s in topics.topic_specs(6)}
    assert specs[topics.EVENTS].retention_ms == -1
    assert specs[topics.COMMANDS].partitions == specs[topics.EVENTS].partitions == 6
    assert topics.dead_letter_topic("projector") in specs


def test_commands_forbid_unknown_fields_and_events_tolerate_them() -> None:
    with pytest.raises(ValidationError):
        RememberMemory.model_validate({"content": "x", "org": "other"})
    with pytest.raises(ValidationError):
        CommandEnvelope.model_validate(
            {
                "command_id": "c" * 10,
                "type": "T",
                "token": "t",
                "stream_id": "o/shared",
                "payload": {},
                "extra": 1,
            }
        )
    env = EventEnvelope.model_validate(
        {
            "event_id": "e",
            "type": "T",
            "stream_id": "o/shared",
            "seq": 1,
            "command_id": "c",
            "occurred_at": "2026-01-01T00:00:00Z",
            "actor": {"org": "o", "member": "m"},
            "payload": {},
            "added_later": True,
        }
    )
    assert env.seq == 1


def test_memories_are_limited_to_4000_characters() -> None:
    RememberMemory(content="x" * 4000)
    with pytest.raises(ValidationError, match="4000"):
        RememberMemory(content="x" * 4001)


@pytest.mark.parametrize(
    "payload",
    [
        {"content": "nul \u0000 byte"},
        {"content": "fine", "title": "a\u0000"},
        {"content": "fine", "tags": ["ok", "b\u0000d"]},
    ],
)
def test_commands_refuse_nul_characters_postgres_cannot_hold(payload: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match="NUL"):
        RememberMemory.model_validate(payload)


def test_envelopes_and_turns_refuse_nul_characters() -> None:
    with pytest.raises(ValidationError, match="stream_id: text must not contain a NUL"):
        CommandEnvelope(
            command_id="cmd-00001",
            type="RememberMemory",
            token="t",
            stream_id="acme/member:a\u0000",
            payload={},
        )
    with pytest.raises(ValidationError, match="turn_id"):
        ConversationTurn(
            turn_id="t\u0000",
            run_id="r",
            token="t",
            user_message="hi",
            completed_at=datetime.now(UTC),
        )


@pytest.mark.parametrize(
    ("command", "payload", "said"),
    [
        (RememberMemory, {"content": "x", "key": "  "}, "a key must not be empty"),
        (RememberMemory, {"content": "x", "sources": ["s" * 2049]}, "1 to 2048 characters"),
        (RememberMemory, {"content": "x", "sources": [""]}, "1 to 2048 characters"),
        (CorrectMemory, {"item_id": "i", "content": "x", "base_revision": True}, "integer"),
        (CorrectMemory, {"item_id": "i", "content": "x", "base_revision": "2"}, "integer"),
        (LinkMemory, {"item_id": "i", "target_id": "t", "weight": True}, "number"),
        (LinkMemory, {"item_id": "i", "target_id": "t", "weight": "0.5"}, "number"),
        (LinkMemory, {"item_id": "i", "target_id": "t", "weight": float("nan")}, "finite"),
    ],
)
def test_commands_refuse_an_empty_key_a_long_source_and_loose_numbers(
    command: type[Command], payload: dict[str, object], said: str
) -> None:
    with pytest.raises(ValidationError, match=said):
        command.model_validate(payload)
    assert LinkMemory(item_id="i", target_id="t", weight=1).weight == 1.0  # a JSON 1 is a weight


@pytest.mark.parametrize(
    "at",
    [
        "9999-12-31T23:59:59.999999Z",
        "0001-01-01T00:00:00Z",
        "9999-12-31T23:59:59.999999",
        "0001-01-01T05:00:00+05:00",
    ],
)
def test_an_expiry_postgres_would_keep_as_infinity_is_refused(at: str) -> None:
    """QA: asyncpg writes the first and last datetime as -infinity and infinity, which read
    back without their zone (and as no time at all)."""
    with pytest.raises(ValidationError, match="out of range"):
        RememberMemory(content="x", expires_at=at)
    assert RememberMemory(content="x", expires_at="9999-12-31T23:59:59Z").expires_at
