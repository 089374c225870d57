"""A dead letter always fits a Kafka request, and keeps the dead record's very bytes when
it can: a letter that cannot be written would hold its partition's writer forever."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from engram.kafka import LETTER_MAX_BYTES, dead_letter
from engram.letters import _record_value
from engram.topic_reads import OperateError


def letter(value: bytes, error: str = "undecodable") -> dict[str, object]:
    _, _, raw = dead_letter(
        "command",
        topic="engram.commands",
        partition=0,
        offset=58,
        key=None,
        value=value,
        error=error,
    )
    assert len(raw) <= LETTER_MAX_BYTES
    body: dict[str, object] = json.loads(raw)
    return body


def test_text_stays_text_and_other_bytes_go_as_base64_both_redriven_as_they_were() -> None:
    text = letter('{"content": "café"}'.encode())
    assert text["value"] == '{"content": "café"}'
    assert _record_value(text, 1) == '{"content": "café"}'.encode()
    binary = letter(b"\xff\x00\xfe")
    assert (
        "value" not in binary
        and binary["value_base64"] == base64.b64encode(b"\xff\x00\xfe").decode()
    )
    assert _record_value(binary, 1) == b"\xff\x00\xfe"


@pytest.mark.parametrize("value", [b"\xff" * 900_000, b'"' * 600_000, b"\x01" * 200_000])
def test_a_record_too_large_to_letter_whole_keeps_its_size_hash_and_head(value: bytes) -> None:
    body = letter(value, error="e" * 100_000)
    assert body["value_truncated"] is True and "value" not in body
    assert (body["value_bytes"], body["value_sha256"]) == (
        len(value),
        hashlib.sha256(value).hexdigest(),
    )
    assert value.startswith(base64.b64decode(str(body["value_head_base64"])))
    assert len(str(body["error"])) == 4_000
    with pytest.raises(OperateError, match="cannot be re-driven"):
        _record_value(body, 1)
