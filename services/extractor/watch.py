"""Which records of engram.events can matter to the extractor, told from a few fields.

Nearly every event is a memory saved without sources, which the extractor reads and
ignores; decoding each in full (``contracts.events.decode_event``) was over a third of
its CPU. A glance reads only the type, the schema version and the few payload fields
it acts on (about 5 µs a typical event against 14), and only a record that can lead to
a write, or that the glance cannot read, is decoded in full and judged as before. The
full models stay the only validation: a glance refuses nothing, it only sends a record
on. So a broken record that brings nothing here is passed over, as one of a type not
watched always was: the projector decodes every event, and letters it.
"""

from __future__ import annotations

from typing import Any, Required

from pydantic import TypeAdapter
from typing_extensions import TypedDict

from contracts.events import SCHEMA_VERSIONS, MemoryForgotten, MemoryRemembered, MemoryRevised
from contracts.text import scrub_nul

WATCHED = frozenset(e.__name__ for e in (MemoryRemembered, MemoryRevised, MemoryForgotten))


class _Carried(TypedDict, total=False):
    """What a watched event's payload carries for the extractor (``handlers._record``)."""

    source_hashes: list[Any]
    sources: list[Any]  # a MemoryRemembered's, in plain, from before sources were sealed
    moved_to: Any


class _Glance(TypedDict, total=False):
    type: Required[str]
    schema_version: int
    payload: Required[_Carried]


# A TypedDict, not a model: it builds no instance, about 1 µs an event less.
_GLANCE: TypeAdapter[_Glance] = TypeAdapter(_Glance)


def can_matter(raw: bytes) -> bool:
    """False only for a record whose full decode surely leads to no write here: of a type
    not watched, or of a watched type at its current schema version that brings no
    sources and is no forget (a move's forget suppresses nothing)."""
    try:  # what decode_event reads: the record with any NUL in its text replaced
        glance = _GLANCE.validate_json(scrub_nul(raw))
    except ValueError:  # pydantic's ValidationError among them: the full decode judges it
        return True
    name = glance["type"]
    if name not in WATCHED:
        return False
    # An upcaster may find sources elsewhere in an older version's payload.
    if glance.get("schema_version", 1) != SCHEMA_VERSIONS[name]:
        return True
    payload = glance["payload"]
    if payload.get("source_hashes") or payload.get("sources"):
        return True
    return name == MemoryForgotten.__name__ and payload.get("moved_to") is None
