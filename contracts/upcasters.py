"""Chained upcasters: each lifts a payload one schema version, oldest first.

Register ``(type, from_version) -> function``; ``upcast`` applies the chain until
the payload reaches the current version. No event has a second version yet.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Payload = dict[str, Any]
UPCASTERS: dict[tuple[str, int], Callable[[Payload], Payload]] = {}


def upcast(type_: str, version: int, payload: Payload) -> Payload:
    from contracts.events import SCHEMA_VERSIONS

    current = SCHEMA_VERSIONS.get(type_, 1)
    if version > current:
        raise ValueError(f"{type_} v{version} is newer than this reader (v{current})")
    while version < current:
        payload = UPCASTERS[(type_, version)](payload)
        version += 1
    return payload
