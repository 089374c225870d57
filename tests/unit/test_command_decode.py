"""How the writer takes a record of engram.commands: whatever it holds, it is a command, a
roll marker or poison (dead-lettered, answered when it names its command), and never
stops the partition."""

from __future__ import annotations

import json

from aiokafka import ConsumerRecord

from contracts import topics
from services.command.adapters.batch import decode

ENVELOPE = {"command_id": "cmd-00000001", "type": "RememberMemory", "token": "t",
            "stream_id": "acme/member:ana", "payload": {"content": "x"}}


def record(value: bytes, headers: list[tuple[str, bytes]] | None = None,
           ) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(topic=topics.COMMANDS, partition=0, offset=7, timestamp=0,
                          timestamp_type=1, key=b"acme/member:ana", value=value,
                          checksum=None, serialized_key_size=15,
                          serialized_value_size=len(value), headers=headers or [])


def test_a_record_nested_deeper_than_python_reads_is_poison_not_a_crash() -> None:
    deep = ('{"command_id": "cmd-00000001", "type": "RememberMemory", "token": "t", '
            '"stream_id": "acme/member:ana", "payload": {"content": "x", "tags": '
            + "[" * 100_000 + "]" * 100_000 + "}}").encode()
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
