"""Events: past tense, tolerant of added fields, upcast on read.

Content-bearing fields are ``Sealed``: AES-GCM ciphertext under the item's own
data key. Deleting that key (forget) makes every copy in the log unreadable.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model

from contracts.commands import Kind, ProposableChange
from contracts.envelope import EventEnvelope, EventHeader
from contracts.text import scrub_nul

# What an event names and counts, bounded as the read models store them: a record of
# engram.events past these (a producer other than the writer, on a broker without ACLs)
# is refused when decoded, and dead-lettered, not met by Postgres in a reader's batch.
Ref = Annotated[str, Field(min_length=1, max_length=100)]  # a memory's or proposal's id
Count = Annotated[int, Field(ge=0, le=2**31 - 1)]  # a revision, a length, a count

Status = Literal["candidate", "active", "disabled", "archived", "forgotten"]


class Sealed(BaseModel):
    """Ciphertext of one text field; ``key_id`` names the item's data key."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    key_id: str
    nonce: str  # base64
    ciphertext: str  # base64, AES-GCM with the tag appended


class Labels(BaseModel):
    """What a memory is filed under: its key, tags and sources. They are a person's words
    too, so ``MemoryRemembered`` carries them sealed as one field (``labels``), the JSON of
    this model, and a forget shreds them with the text."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    key: Annotated[str, Field(max_length=200)] | None = None
    tags: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()


class Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    item_id: Ref


class MemoryRemembered(Event):
    revision: Count = 1
    scope: Annotated[str, Field(max_length=500)]
    kind: Kind
    status: Literal["active", "candidate"]
    content: Sealed
    title: Sealed | None = None
    # Its key, tags and sources (``Labels``), sealed under the item's key; None when it has
    # none of them.
    labels: Sealed | None = None
    # Keyed hashes, which stay when the labels are shredded: of its key (the writer finds
    # the key's memory by it), and of its sources (a forget suppresses extraction from
    # them). None and () when it has none.
    key_hash: Annotated[str, Field(max_length=200)] | None = None
    source_hashes: tuple[Annotated[str, Field(max_length=200)], ...] = ()
    pinned: bool = False
    # In events written before labels were sealed: the key, tags and sources in plain.
    key: Annotated[str, Field(max_length=200)] | None = None
    tags: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    # A keyed hash: refuses an accidental re-save after forget.
    content_hash: Annotated[str, Field(max_length=200)]
    content_length: Count
    expires_at: datetime | None = None
    replaces: str | None = None  # a candidate proposing new text for this confirmed item
    # The member who saved it: in the shared scope, others change it by proposals. None
    # in events written before authors were recorded (anyone may change those).
    author: str | None = None
    # The agent run that proposed it, when it is a candidate from one (its cap counts it).
    run_id: str | None = None
    # Learned by the extractor and used at once, unconfirmed (the org's ``learning:
    # apply``, seed 002): a later inference may replace it, as no confirmed fact may be.
    inferred: bool = False
    # Credits the save cost (seed 004's pricing; 0: free, or the org is not metered), and
    # who spent them ("member:<id>" or "agent:<id>").
    charged: Annotated[int, Field(ge=0)] = 0
    charged_to: Annotated[str, Field(max_length=300)] | None = None

    def plain_labels(self) -> Labels | None:
        """What an event written before labels were sealed carries in plain, if any."""
        if self.key is None and not self.tags and not self.sources:
            return None
        return Labels(key=self.key, tags=self.tags, sources=self.sources)


class MemoryRevised(Event):
    """A new revision of the text: correction, restore of a revision, or undo."""

    revision: Count
    base_revision: Count
    reason: Literal["corrected", "restored", "undone"]
    content: Sealed
    title: Sealed | None = None
    content_hash: Annotated[str, Field(max_length=200)]
    content_length: Count
    restored_from: Count | None = None
    # A keyed save (or a copy) that revises the key's memory and brings tags or sources it
    # did not have: the memory's labels from now on, sealed as ``MemoryRemembered``'s are,
    # and the keyed hashes of the sources it brought. None and () otherwise.
    labels: Sealed | None = None
    source_hashes: tuple[Annotated[str, Field(max_length=200)], ...] = ()
    # The new text is an inference (the extractor's, or an agent's correction nobody asked
    # for) of a memory that is one too: it stays unconfirmed. Else an active memory's
    # revision confirms it.
    inferred: bool = False
    # Credits the new text cost (seed 004's pricing; 0: free, or the org is not metered),
    # and who spent them.
    charged: Annotated[int, Field(ge=0)] = 0
    charged_to: Annotated[str, Field(max_length=300)] | None = None


class MemoryPinned(Event):
    revision: Count
    pinned: bool


class MemoryRelabeled(Event):
    """A new revision with the same text and another kind or other tags (seed 004's
    category and tags). ``labels``: the memory's labels from now on (key, tags and
    sources, sealed as ``MemoryRemembered``'s are; None: it has none)."""

    revision: Count
    kind: Kind
    labels: Sealed | None = None


class MemoryStatusChanged(Event):
    """Disable/enable, archive/unarchive, confirm or dismiss a candidate."""

    revision: Count
    status: Status
    previous: Status
    superseded_by: str | None = None
    # An agent's change of an inferred fact (seed 002): back to active, it stays an
    # inference. Else a memory made active is a confirmed fact.
    inferred: bool = False


class MemoryForgotten(Event):
    """Terminal. Carries no content, only what the tombstone keeps."""

    content_hashes: tuple[str, ...] = ()
    revisions: Count
    reason: str | None = None
    # The memory a move copied it into: its text lives on there, so the stream does not
    # count it as forgotten text.
    moved_to: Ref | None = None


class MemoryLinked(Event):
    """A link from ``item_id`` to ``target_id`` of one kind, new or with a new weight.
    Links are no revision of the item: they carry no text."""

    target_id: Ref
    kind: Annotated[str, Field(max_length=100)]
    weight: float | None = None


class MemoryUnlinked(Event):
    target_id: Ref
    kind: Annotated[str, Field(max_length=100)]


ProposalStatus = Literal["pending", "merged", "rejected", "withdrawn", "outdated", "expired"]


class ChangeProposed(Event):
    """A proposed change to ``item_id``, made against ``base_revision``; the text of a
    correction is sealed under the item's key, so a forget shreds it too."""

    proposal_id: Ref
    change: ProposableChange
    base_revision: Count
    reason: str  # "" once the reason is sealed (reason_sealed), as every event now has it
    proposer: str  # the member
    proposed_at: datetime  # it expires 30 days after
    content: Sealed | None = None
    title: Sealed | None = None
    content_hash: str | None = None
    content_length: Count | None = None
    superseded_by: str | None = None
    # The reason, sealed under the item's key: a forget shreds it with the memory's text.
    reason_sealed: Sealed | None = None
    # A 'relabel' proposal's kind, and its tags (a JSON list, sealed under the item's key).
    kind: Kind | None = None
    tags: Sealed | None = None


class ProposalResolved(Event):
    """Merged (its change events come before this one), rejected, withdrawn, outdated
    (the memory changed since: nothing applied) or expired."""

    proposal_id: Ref
    status: Literal["merged", "rejected", "withdrawn", "outdated", "expired"]
    reason: str | None = None  # in events written before it was sealed (reason_sealed)
    reason_sealed: Sealed | None = None


class RevisionsPruned(Event):
    """The org's retention policy drops the memory's revisions before ``before``: their
    text leaves the read models, and they can no longer be restored."""

    before: Count


# Events that change no memory's text, status or pin: they move no generation.
NEUTRAL: tuple[type[Event], ...] = (
    MemoryLinked,
    MemoryUnlinked,
    ChangeProposed,
    ProposalResolved,
    RevisionsPruned,
)


EVENTS: dict[str, type[Event]] = {
    e.__name__: e
    for e in (
        MemoryRemembered,
        MemoryRevised,
        MemoryPinned,
        MemoryRelabeled,
        MemoryStatusChanged,
        MemoryForgotten,
        MemoryLinked,
        MemoryUnlinked,
        ChangeProposed,
        ProposalResolved,
        RevisionsPruned,
    )
}
SCHEMA_VERSIONS: dict[str, int] = {name: 1 for name in EVENTS}


def parse_event(type_: str, schema_version: int, payload: dict[str, Any]) -> Event:
    """Decode an event payload, upcasting older schema versions first."""
    from contracts.upcasters import upcast

    model = EVENTS.get(type_)
    if model is None:
        raise KeyError(f"unknown event type {type_!r}")
    return model.model_validate(upcast(type_, schema_version, payload))


# One envelope model per event type, its payload typed: a reader decodes an event of the
# current schema version in one pass over the JSON (7.0 us against 12.8 for the envelope
# and then its payload), with no payload dict in between.
def _typed_envelopes() -> Any:
    """The discriminated union of those models (built at run time, so typed ``Any``)."""
    models = []
    for name, model in EVENTS.items():
        literal: Any = Literal[name]
        models.append(
            create_model(
                f"{name}Envelope", __base__=EventHeader, type=(literal, ...), payload=(model, ...)
            )
        )
    union: Any = Union[tuple(models)]  # noqa: UP007 (a tuple of types, built at run time)
    return Annotated[union, Field(discriminator="type")]


_TYPED: TypeAdapter[Any] = TypeAdapter(_typed_envelopes())


def decode_event(raw: bytes) -> tuple[EventHeader, Event]:
    """An event record's envelope (without its payload) and its event.

    One pass when the event is of the current schema version; any other record takes
    the two steps (envelope, then ``parse_event``, which upcasts an older version) and
    raises what they raise: ``ValidationError``, ``KeyError`` for an unknown type,
    ``ValueError`` for a version newer than this reader. A NUL in its text (an event
    written before commands refused them) reads as U+FFFD."""
    raw = scrub_nul(raw)
    try:
        typed = _TYPED.validate_json(raw)
    except ValidationError:
        typed = None
    if typed is not None and typed.schema_version == SCHEMA_VERSIONS[typed.type]:
        return typed, typed.payload
    env = EventEnvelope.model_validate_json(raw)
    return env, parse_event(env.type, env.schema_version, env.payload)
