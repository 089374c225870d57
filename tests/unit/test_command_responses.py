"""The HTTP status of an accepted save: 201 only when the command made a memory."""

from __future__ import annotations

from typing import Any

import pytest

from contracts import commands as c
from contracts.envelope import CommandReply
from services.command.submit import _response


def status_of(result: dict[str, Any], created: bool = True) -> int:
    reply = CommandReply(command_id="cmd-0001", ok=True, stream_id="acme/member:ann", result=result)
    return _response(reply, created, c.RememberMemory(content="tea")).status_code


@pytest.mark.parametrize(
    ("result", "created", "status"),
    [
        ({"item_id": "a", "revision": 1, "status": "active"}, True, 201),  # a new memory
        ({"item_id": "a", "revision": 1, "status": "candidate"}, True, 201),  # a new candidate
        # QA: a keyed save that revised the key's holder answered 201 as if it had made one.
        ({"item_id": "a", "revision": 4, "status": "active"}, True, 200),
        ({"item_id": "a", "revision": 1, "status": "active", "duplicate": True}, True, 200),
        ({"item_id": "a", "revision": 2, "status": "active"}, False, 200),  # a correction
    ],
)
def test_201_only_for_a_memory_the_command_made(
    result: dict[str, Any], created: bool, status: int
) -> None:
    assert status_of(result, created) == status
