"""The events the decisions share for a memory that exists: a new revision (and the key's
memory revised by a save or a copy), a status change, the tombstone of a forget."""

from __future__ import annotations

from datetime import datetime

from contracts.events import (
    Event,
    MemoryForgotten,
    MemoryPinned,
    MemoryRevised,
    MemoryStatusChanged,
)
from services.command.context import Context
from services.command.labels import relabelled
from services.command.state import Item


def expired(item: Item, now: datetime) -> bool:
    return item.expires_at is not None and item.expires_at <= now


def revises_holder(holder: Item, kind: str, expires_at: datetime | None, now: datetime) -> bool:
    """Whether a save (or a copy) of a key an active memory holds may revise that memory:
    only when the new fact is of its kind and expires when it does, and it has not expired.
    A kind and an expiry belong to a memory, not to a revision (revised, an expired memory
    hid the new fact at once, and a save's own expiry was dropped; QA: a keyed save as a
    preference left the memory a note). Otherwise the fact is a memory of its own."""
    return holder.kind == kind and holder.expires_at == expires_at and not expired(holder, now)


def holder_revised(
    holder: Item,
    ctx: Context,
    *,
    content: str,
    title: str | None,
    digest: str,
    key: str | None,
    tags: tuple[str, ...],
    sources: tuple[str, ...],
    pinned: bool,
    inferred: bool = False,
) -> list[Event]:
    """The key's memory revised by a save or a copy: the new text with the labels it brings
    (``relabelled``), then a pin when it asks for one; none unpins (QA: a save's pin was
    dropped). ``inferred``: an applied inference revising one (seed 002)."""
    revised = new_revision(
        holder, content, title, ctx, "corrected", digest=digest, inferred=inferred
    )
    revised = relabelled(revised, holder, ctx, key, tags, sources)
    if not pinned or holder.pinned:
        return [revised]
    pin = MemoryPinned(item_id=holder.item_id, revision=revised.revision + 1, pinned=True)
    return [revised, pin]


def new_revision(
    item: Item,
    text: str,
    title: str | None,
    ctx: Context,
    reason: str,
    restored_from: int | None = None,
    digest: str | None = None,  # the text's content hash, when the caller has it already
    inferred: bool = False,  # an inference's text for an unconfirmed memory (seed 002)
) -> MemoryRevised:
    return MemoryRevised(
        item_id=item.item_id,
        revision=item.revision + 1,
        base_revision=item.revision,
        reason=reason,
        content=ctx.seal(item.item_id, text),
        title=ctx.seal(item.item_id, title) if title else item.current.title,
        content_hash=digest or ctx.content_hash(text),
        content_length=len(text),
        restored_from=restored_from,
        inferred=inferred,
    )


def status_change(item: Item, status: str, superseded_by: str | None = None) -> Event:
    return MemoryStatusChanged(
        item_id=item.item_id,
        revision=item.revision + 1,
        status=status,
        previous=item.status,
        superseded_by=superseded_by,
    )


def superseded_by(item: Item, new_id: str) -> Event:
    """A memory archived for the one that takes its key or its fact."""
    return status_change(item, "archived", superseded_by=new_id)


def forgotten(item: Item, reason: str | None, moved_to: str | None = None) -> MemoryForgotten:
    """The memory erased: the tombstone keeps the keyed hashes of every text it held."""
    kept = {r.content_hash for r in item.revisions.values()}
    hashes = tuple(sorted(kept | (item.retired_hashes or frozenset())))
    return MemoryForgotten(
        item_id=item.item_id,
        content_hashes=hashes,
        revisions=len(item.revisions),
        reason=reason,
        moved_to=moved_to,
    )
