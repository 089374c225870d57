"""What the extractor says of a record it cannot read: where it is wrong and how, never
what it holds. A conversation turn holds the user's words, and the error text goes to the
extractor's log and into the dead letter's error."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from aiokafka import ConsumerRecord

from contracts import topics
from engram.auth import TokenVerifier
from engram.crypto import MasterKey
from engram.settings import CommonSettings
from services.extractor.errors import MAX_FAULTS_SHOWN
from services.extractor.handlers import SourceRecorder, TurnExtractor

WORDS = "My password is hunter2 and my mother's maiden name is Smith"
TURN = {
    "turn_id": "turn-1",
    "run_id": "run-1",
    "token": "tok",
    "user_message": WORDS,
    "completed_at": "2030-05-01T12:00:00Z",
}
MASTER = MasterKey(b"m" * 32)


class Letters:
    """The follower's dead-letter side: what it was handed, and nothing sent."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    async def dead_letter(self, record: Any, error: str) -> None:
        self.errors.append(error)


class NoPublisher:
    async def publish(self, envelopes: list[Any]) -> None:
        raise AssertionError("a poison turn proposes nothing")


def record(value: bytes, topic: str = topics.CONVERSATIONS) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(
        topic=topic,
        partition=0,
        offset=7,
        timestamp=0,
        timestamp_type=1,
        key=b"acme/member:ana",
        value=value,
        checksum=None,
        serialized_key_size=15,
        serialized_value_size=len(value),
        headers=[],
    )


async def turn_letter(value: bytes) -> str:
    settings = CommonSettings.model_validate(
        {"ENGRAM_JWT_SECRET": "a-development-secret-of-at-least-32-bytes"}
    )
    extractor = TurnExtractor(
        TokenVerifier(settings),
        NoPublisher(),  # type: ignore[arg-type]
        None,
        lambda: datetime.now(UTC),
        MASTER,
    )
    extractor.follower = letters = Letters()  # type: ignore[assignment]
    await extractor.handle_batch(None, [record(value)])
    [error] = letters.errors
    return error


def assert_holds_no_input(error: str) -> None:
    for piece in ("hunter2", "password", "maiden", "Smith", "input_value", "surprise"):
        assert piece not in error, (piece, error)


async def test_a_turn_that_is_no_json_is_lettered_without_its_words() -> None:
    error = await turn_letter(json.dumps(TURN).encode()[:-20])
    assert error.startswith("undecodable conversation turn: Invalid JSON: EOF")
    assert_holds_no_input(error)


async def test_a_turn_with_wrong_fields_names_them_but_not_their_values() -> None:
    wrong = TURN | {
        "completed_at": "hunter2",
        "scope": "Smith",
        "surprise: " + WORDS: "x",
        "sources": ["hunter2" * 20],
    }
    error = await turn_letter(json.dumps(wrong).encode())
    assert error.startswith("undecodable conversation turn: ")
    for said in (
        "completed_at: Input should be a valid datetime",
        "scope: Input should be 'private'",
        "(an unknown field): Extra inputs",
        "sources: Value error, each source id must have 1 to 100 characters",
    ):
        assert said in error, error
    assert_holds_no_input(error)


async def test_a_turn_whose_message_holds_a_nul_is_lettered_without_it() -> None:
    error = await turn_letter(json.dumps(TURN | {"user_message": WORDS + "\0"}).encode())
    assert "user_message: text must not contain a NUL character" in error
    assert_holds_no_input(error)


async def test_a_turn_of_thousands_of_faults_is_told_in_a_few() -> None:
    fields = {f"hunter2-{n:05}": 0 for n in range(5_000)}
    error = await turn_letter(json.dumps(TURN | fields).encode())
    assert error.count("Extra inputs are not permitted") == MAX_FAULTS_SHOWN
    assert error.endswith(f"and {5_000 - MAX_FAULTS_SHOWN} more")
    assert len(error) < 1_000
    assert_holds_no_input(error)


async def test_an_undecodable_event_is_lettered_without_its_text() -> None:
    """Events written before labels were sealed carry a memory's key and sources in plain."""
    event = {
        "event_id": "e-1",
        "type": "MemoryRemembered",
        "stream_id": "acme/member:ana",
        "seq": 3,
        "command_id": "c-1",
        "occurred_at": "2030-05-01T12:00:00Z",
        "actor": {"org": "acme", "member": "ana"},
        "payload": {
            "item_id": "i-1",
            "scope": "member:ana",
            "kind": "hunter2",
            "status": "active",
            "key": WORDS,
            "sources": [WORDS],
            "content": {"key_id": "i-1", "nonce": "bm9uY2U=", "ciphertext": "Y2lwaGVy"},
            "content_hash": "h",
            "content_length": 5,
        },
    }
    recorder = SourceRecorder(MASTER)
    recorder.follower = letters = Letters()  # type: ignore[assignment]
    await recorder.handle_batch(None, [record(json.dumps(event).encode(), topics.EVENTS)])
    [error] = letters.errors
    assert error.startswith("undecodable event: kind: Input should be")
    assert_holds_no_input(error)
