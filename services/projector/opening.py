"""Opening an event's sealed fields with the data keys fetched for its batch: what cannot
be opened (a shredded key, damaged ciphertext, labels or tags that do not read) stays
None, and the log says why, never quoting the text."""

from __future__ import annotations

from collections.abc import Callable

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


def _sealed(event: Event) -> list[Sealed]:
    fields = (
        getattr(event, "content", None),
        getattr(event, "title", None),
        getattr(event, "reason_sealed", None),
        getattr(event, "labels", None),
        getattr(event, "tags", None),
    )
    return [f for f in fields if isinstance(f, Sealed)]


def open_event(event: Event, keys: dict[str, bytes]) -> Opened:
    """Decrypt what can be; a shredded key means forgotten text, which stays NULL."""

    def one(sealed: Sealed | None) -> str | None:
        if sealed is None or sealed.key_id not in keys:
            return None
        try:
            text = open_sealed(sealed, keys[sealed.key_id])
        except ValueError as exc:  # damaged ciphertext: its text stays NULL, the log says so
            log.error("sealed_text_unreadable", item_id=event.item_id, error=str(exc))
            return None
        # Saved before commands refused NUL: Postgres's text cannot hold one.
        return text.replace(NUL, REPLACEMENT) if NUL in text else text

    return Opened(
        content=one(getattr(event, "content", None)),
        title=one(getattr(event, "title", None)),
        reason=one(getattr(event, "reason_sealed", None)),
        labels=_labels(event, one),
        tags=_proposed_tags(event, one),
    )


def _proposed_tags(
    event: Event, one: Callable[[Sealed | None], str | None]
) -> tuple[str, ...] | None:
    """A relabel proposal's tags, opened; None where there are none, they are shredded, or
    they do not read as a list of tags (the log says so)."""
    if not isinstance(event, ChangeProposed) or (text := one(event.tags)) is None:
        return None
    try:
        return tuple(TypeAdapter(list[str]).validate_json(text))
    except ValidationError as exc:
        log.error("sealed_tags_unreadable", item_id=event.item_id, error=_faults(exc))
        return None


def _labels(event: Event, one: Callable[[Sealed | None], str | None]) -> Labels | None:
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
