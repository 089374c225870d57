"""How the writer takes a record of engram.commands: whatever it holds, it is a command, a
roll marker or poison (dead-lettered, answered when it names its command), and never
stops the partition."""

from __future__ import annotations

import json

from aiokafka import ConsumerRecord

from contracts import topics
from contracts.envelope import CommandReply, Rejection
from services.command.adapters.batch import decode
from services.command.answers import fitted, poisoned

ENVELOPE = {
    "command_id": "cmd-00000001",
    "type": "RememberMemory",
    "token": "t",
    "stream_id": "acme/member:ana",
    "payload": {"content": "x"},
}


def record(
    value: bytes,
    headers: list[tuple[str, bytes]] | None = None,
) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(
        topic=topics.COMMANDS,
        partition=0,
        offset=7,
        timestamp=0,
        timestamp_type=1,
        key=b"acme/member:ana",
        value=value,
        checksum=None,
        serialized_key_size=15,
        serialized_value_size=len(value),
        headers=headers or [],
    )


def test_a_record_nested_deeper_than_python_reads_is_poison_not_a_crash() -> None:
    deep = (
        '{"command_id": "cmd-00000001", "type": "RememberMemory", "token": "t", '
        '"stream_id": "acme/member:ana", "payload": {"content": "x", "tags": '
        + "[" * 100_000
        + "]" * 100_000
        + "}}"
    ).encode()
    decoded = decode(record(deep))
    assert decoded.envelope is None and decoded.poison is not None
    assert decoded.poison.startswith("undecodable command envelope")


def test_only_a_record_without_a_value_is_a_roll_marker() -> None:
    marker = decode(record(b"", [(topics.ROLL_MARKER_HEADER, b"1")]))
    assert marker.marker
    command = decode(record(json.dumps(ENVELOPE).encode(), [(topics.ROLL_MARKER_HEADER, b"1")]))
    assert not command.marker and command.envelope is not None  # decided, and answered


def test_once_is_true_or_false_only() -> None:
    loose = decode(record(json.dumps({**ENVELOPE, "once": "yes"}).encode()))
    assert loose.envelope is None and "once" in (loose.poison or "")
    assert loose.named == ("cmd-00000001", "acme/member:ana")  # so its caller is answered


def test_a_poison_is_answered_only_under_ids_a_reply_can_carry() -> None:
    """QA: a lone surrogate in the command id made the reply fail to encode (the service
    stopped, and stopped again on restart); a 600 KB stream id made a reply too large for
    the broker (the partition retried it for good). Both are dead-lettered unanswered."""
    surrogate = b'{"command_id": "cmd-\\ud800-xyz", "stream_id": "acme/member:ana", "type": 1}'
    huge = json.dumps({**ENVELOPE, "stream_id": "acme/member:" + "b" * 600_000}).encode()
    long_id = json.dumps({**ENVELOPE, "command_id": "c" * 101, "type": 1}).encode()
    for value in (surrogate, huge, long_id):
        decoded = decode(record(value))
        assert decoded.envelope is None and decoded.poison is not None
        assert decoded.named is None
    assert "stream_id" in (decode(record(huge)).poison or "")


def test_a_poison_with_thousands_of_errors_gets_a_reply_the_broker_takes() -> None:
    """QA: 32,000 unknown fields, each one error named in the reason, made a reply of
    1.2 MB: the broker refused it and the partition retried it for good."""
    fields = {f"{n:05}": 0 for n in range(32_000)}
    long_name = {"x" * 200_000: 0}
    for extra in (fields, long_name):
        decoded = decode(record(json.dumps({**ENVELOPE, **extra}).encode()))
        assert decoded.named == ("cmd-00000001", "acme/member:ana") and decoded.poison
        reply = poisoned(*decoded.named, decoded.poison).model_dump_json()
        assert len(reply) < 8_000, len(reply)
    many = decode(record(json.dumps({**ENVELOPE, **fields}).encode()))
    assert "and 31980 more errors" in (many.poison or "")


def test_a_refusal_too_large_for_the_reply_topic_is_sent_without_its_details() -> None:
    reply = CommandReply(
        command_id="cmd-00000001",
        ok=False,
        stream_id="acme/member:ana",
        rejection=Rejection(
            code="invalid",
            status=422,
            title="Invalid",
            detail="bad",
            extra={"errors": ["e" * 400_000]},
        ),
    )
    sent = fitted(reply)
    assert len(sent) < 4_000
    body = json.loads(sent)
    assert body["rejection"]["extra"] == {} and "were left out" in body["rejection"]["detail"]
    small = reply.model_copy(
        update={"rejection": reply.rejection and reply.rejection.model_copy(update={"extra": {}})}
    )
    assert fitted(small) == small.model_dump_json().encode()
