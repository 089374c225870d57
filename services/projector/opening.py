"""Opening an event's sealed fields with the data keys fetched for its batch: what cannot
be opened (a shredded key, damaged ciphertext, labels or tags that do not read) stays
None, and the log says why, never quoting the text."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from pydantic import TypeAdapter, ValidationError

from contracts.events import (
    ChangeProposed,
    Event,
    Labels,
    MemoryRelabeled,
    MemoryRemembered,
    MemoryRevised,
    Sealed,
)
from contracts.text import NUL, REPLACEMENT
from engram.crypto import open_sealed
from engram.logging import get_logger
from services.projector.core import Decoded, Opened

log = get_logger(__name__)


def key_ids(batch: list[Decoded]) -> set[str]:
    """The data keys the batch's sealed fields are under."""
    return {s.key_id for _, _, ev in batch for s in _sealed(ev)}


SEALABLE = ("content", "title", "reason_sealed", "labels", "tags")


@cache
def _sealable(model: type[Event]) -> frozenset[str]:
    """The fields of ``SEALABLE`` an event type has. Asking a pydantic model for a field it
    lacks goes through its ``__getattr__``, which builds and raises an AttributeError: about
    5% of the projector's CPU in the sustained benchmark, for every new memory's absent
    ``reason_sealed``."""
    return frozenset(SEALABLE) & model.model_fields.keys()


def _field(event: Event, name: str) -> object:
    """The event's field ``name``, None where its type has none."""
    return getattr(event, name) if name in _sealable(type(event)) else None


def _sealed(event: Event) -> list[Sealed]:
    fields = (_field(event, name) for name in SEALABLE)
    return [f for f in fields if isinstance(f, Sealed)]


def open_event(event: Event, keys: dict[str, bytes]) -> Opened:
    """Decrypt what can be; a shredded key means forgotten text, which stays NULL."""

    def one(sealed: object) -> str | None:
        if not isinstance(sealed, Sealed) or sealed.key_id not in keys:
            return None
        try:
            text = open_sealed(sealed, keys[sealed.key_id])
        except ValueError as exc:  # damaged ciphertext: its text stays NULL, the log says so
            log.error("sealed_text_unreadable", item_id=event.item_id, error=str(exc))
            return None
        # Saved before commands refused NUL: Postgres's text cannot hold one.
        return text.replace(NUL, REPLACEMENT) if NUL in text else text

    return Opened(
        content=one(_field(event, "content")),
        title=one(_field(event, "title")),
        reason=one(_field(event, "reason_sealed")),
        labels=_labels(event, one),
        tags=_proposed_tags(event, one),
    )


def _proposed_tags(event: Event, one: Callable[[object], str | None]) -> tuple[str, ...] | None:
    """A relabel proposal's tags, opened; None where there are none, they are shredded, or
    they do not read as a list of tags (the log says so)."""
    if not isinstance(event, ChangeProposed) or (text := one(event.tags)) is None:
        return None
    try:
        return tuple(TypeAdapter(list[str]).validate_json(text))
    except ValidationError as exc:
        log.error("sealed_tags_unreadable", item_id=event.item_id, error=_faults(exc))
        return None


def _labels(event: Event, one: Callable[[object], str | None]) -> Labels | None:
    """A new memory's labels: opened, or in plain in an event written before they were
    sealed. None where they are shredded, or do not read as labels (the log says so)."""
    if not isinstance(event, MemoryRemembered | MemoryRevised | MemoryRelabeled):
        return None
    if event.labels is None:
        return event.plain_labels() if isinstance(event, MemoryRemembered) else None
    if (text := one(event.labels)) is None:
        return None
    try:
        return Labels.model_validate_json(text)
    except ValidationError as exc:
        log.error("sealed_labels_unreadable", item_id=event.item_id, error=_faults(exc))
        return None


def _faults(exc: ValidationError) -> str:
    """What does not read, by field: never the opened text itself (pydantic's own message
    quotes it, and a log outlives a forget)."""
    return "; ".join(
        f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
        for e in exc.errors(include_url=False, include_input=False)[:5]
    )
