"""Pure decisions of the indexer: no I/O.

The indexer keeps its own small view of every item (``Tracked``), folded from
the events it consumes, so it never depends on the projector being up to date:
forgetting, disabling, archiving and new text make vectors void as soon as the
indexer has read the event. Before a vector is committed, ``verdict`` compares
the revision it was computed for with everything known about the item — the
indexer's own view and the projector's row — and only an item that is active
at exactly that revision gets it. A late embedding therefore never brings
forgotten or stale text back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from contracts.events import (
    Event,
    MemoryForgotten,
    MemoryPinned,
    MemoryRelabeled,
    MemoryRemembered,
    MemoryRevised,
    MemoryStatusChanged,
    Sealed,
)
from engram.passages import passages

Verdict = Literal["write", "forgotten", "stale", "inactive", "unknown"]


@dataclass(frozen=True)
class Tracked:
    """What the indexer knows of one item from the events it has consumed.

    ``status`` and ``text_revision`` are None when the events that set them were
    never seen; the sealed text is kept (never plaintext) so that an item enabled
    again can be re-embedded, and dropped on forget.
    """

    item_id: str
    org: str
    scope: str
    status: str | None
    revision: int
    text_revision: int | None = None
    content: Sealed | None = None
    title: Sealed | None = None


@dataclass(frozen=True)
class Seen:
    """One view of an item's state: the indexer's own, or the projector's row."""

    status: str | None
    revision: int


@dataclass(frozen=True)
class Plan:
    """What one batch's events mean for an item's vectors.

    ``keep_from``: vectors of earlier revisions hold older text and are void;
    None means every vector of the item is void (it is not active). Vectors of
    the current text are relabelled to the current revision (a pin or a status
    change bumps the revision without changing the text); ``embed`` asks for a
    vector of the configured model when none holds the current text.
    """

    item_id: str
    keep_from: int | None
    relabel_to: int | None
    embed: bool


def org_scope(stream_id: str) -> tuple[str, str]:
    org, _, scope = stream_id.partition("/")
    return org, scope


def fold(state: Tracked | None, event: Event, org: str, scope: str) -> Tracked:
    """The item's state after one event; replayed and older events change nothing."""
    base = state or Tracked(event.item_id, org, scope, None, 0)
    if base.status == "forgotten":
        return base  # terminal: nothing after a forget brings the text back
    if isinstance(event, MemoryForgotten):
        return replace(base, status="forgotten", text_revision=None, content=None, title=None)
    revision: int = getattr(event, "revision", 0)
    if revision <= base.revision:
        return base
    if isinstance(event, MemoryRemembered):
        return replace(
            base,
            status=event.status,
            revision=revision,
            text_revision=revision,
            content=event.content,
            title=event.title,
        )
    if isinstance(event, MemoryRevised):
        return replace(
            base,
            revision=revision,
            text_revision=revision,
            content=event.content,
            title=event.title,
        )
    if isinstance(event, MemoryStatusChanged):
        return replace(base, revision=revision, status=event.status)
    if isinstance(event, MemoryPinned | MemoryRelabeled):
        return replace(base, revision=revision)
    raise TypeError(f"no fold for {type(event).__name__}")


def plan(
    after: Tracked,
    current_vector_at: int | None,
    embedding_on: bool,
    projected_at: int | None = None,
) -> Plan:
    """The vector work for an item whose state changed in this batch.

    ``current_vector_at`` is the revision of the configured model's vector, if any;
    ``projected_at``, the revision of the projector's row, if any. When the projector is
    past this revision, a later event of the log brings the item further, and the item is
    embedded then: reading a backlog (after a long stop, or an idle time with no model)
    embeds each item once, at its last revision, not once a revision of its history (its
    vector would be dropped as stale anyway).
    """
    if after.status != "active" or after.text_revision is None:
        # Not active (or its text was never seen): no vector may stand for it.
        return Plan(after.item_id, keep_from=None, relabel_to=None, embed=False)
    has_current = current_vector_at is not None and current_vector_at >= after.text_revision
    return Plan(
        after.item_id,
        keep_from=after.text_revision,
        relabel_to=after.revision,
        embed=embedding_on
        and not has_current
        and after.content is not None
        and (projected_at is None or projected_at <= after.revision),
    )


def verdict(revision: int, views: Iterable[Seen | None]) -> Verdict:
    """May a vector computed for ``revision`` be committed, given every view of the item?"""
    known = [v for v in views if v is not None]
    if any(v.status == "forgotten" for v in known):
        return "forgotten"
    if not known:
        return "unknown"
    newest = max(v.revision for v in known)
    if newest > revision:
        return "stale"
    if newest < revision:
        return "unknown"  # nobody has seen this revision: never write ahead of the log
    at_revision = [v for v in known if v.revision == revision]
    return "write" if all(v.status == "active" for v in at_revision) else "inactive"


def embedding_text(title: str | None, content: str) -> str:
    """The text a vector stands for: the title (when there is one), then the content."""
    return f"{title}\n{content}" if title else content


class Reader(Protocol):
    """How the embedding model reads a memory (``EmbeddingProvider.heading``, ``pieces``)."""

    def heading(self, title: str | None) -> str | None: ...

    def pieces(self, title: str | None, passage: str) -> list[str]: ...


@dataclass(frozen=True)
class Text:
    """One text to embed of an item: a slice (``piece``) of one of its passages."""

    passage: int
    piece: int
    text: str


def embedding_texts(title: str | None, content: str, model: Reader) -> list[Text]:
    """The texts an item's vectors stand for: each passage (``engram.passages``, what a
    search shows), in the slices the model reads whole, each with the title (as much of
    it as leaves the text room). A memory the model reads whole is one text, as before."""
    head = model.heading(title)
    return [
        Text(n, k, embedding_text(head, piece))
        for n, passage in enumerate(passages(content))
        for k, piece in enumerate(model.pieces(head, passage))
    ]
