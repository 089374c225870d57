"""Events: past tense, tolerant of added fields, upcast on read.

Content-bearing fields are ``Sealed``: AES-GCM ciphertext under the item's own
data key. Deleting that key (forget) makes every copy in the log unreadable.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from contracts.commands import Kind

Status = Literal["candidate", "active", "disabled", "archived", "forgotten"]


class Sealed(BaseModel):
    """Ciphertext of one text field; ``key_id`` names the item's data key."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    key_id: str
    nonce: str  # base64
    ciphertext: str  # base64, AES-GCM with the tag appended


class Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    item_id: str


class MemoryRemembered(Event):
    revision: int = 1
    scope: str
    kind: Kind
    status: Literal["active", "candidate"]
    content: Sealed
    title: Sealed | None = None
    key: str | None = None
    pinned: bool = False
    tags: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    content_hash: str  # keyed hash: refuses an accidental re-save after forget
    content_length: int
    expires_at: datetime | None = None
    replaces: str | None = None  # a candidate proposing new text for this confirmed item


class MemoryRevised(Event):
    """A new revision of the text: correction, restore of a revision, or undo."""

    revision: int
    base_revision: int
    reason: Literal["corrected", "restored", "undone"]
    content: Sealed
    title: Sealed | None = None
    content_hash: str
    content_length: int
    restored_from: int | None = None


class MemoryPinned(Event):
    revision: int
    pinned: bool


class MemoryStatusChanged(Event):
    """Disable/enable, archive/unarchive, confirm or dismiss a candidate."""

    revision: int
    status: Status
    previous: Status
    superseded_by: str | None = None


class MemoryForgotten(Event):
    """Terminal. Carries no content, only what the tombstone keeps."""

    content_hashes: tuple[str, ...] = ()
    revisions: int = Field(ge=0)
    reason: str | None = None


EVENTS: dict[str, type[Event]] = {
    e.__name__: e
    for e in (MemoryRemembered, MemoryRevised, MemoryPinned, MemoryStatusChanged, MemoryForgotten)
}
SCHEMA_VERSIONS: dict[str, int] = {name: 1 for name in EVENTS}


def parse_event(type_: str, schema_version: int, payload: dict[str, Any]) -> Event:
    """Decode an event payload, upcasting older schema versions first."""
    from contracts.upcasters import upcast

    model = EVENTS.get(type_)
    if model is None:
        raise KeyError(f"unknown event type {type_!r}")
    return model.model_validate(upcast(type_, schema_version, payload))
