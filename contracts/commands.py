"""Commands: imperative, ``extra="forbid"``, validated before anything is decided.

The wire name of each command is its ``type`` string (the class name), listed in
``COMMANDS``. A command never names another member's or agent's scope: it can
only choose among the scopes its bearer token already grants.

The bounds, field types and bases are ``command_base``'s, the proposals
``proposal_commands``'s; every name is importable from here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt, field_validator, model_validator

from contracts.command_base import (
    LASTING_KINDS,
    MAX_CONTENT,
    MAX_SOURCE,
    MAX_TITLE,
    Command,
    ItemCommand,
    Kind,
    OwnLinkKind,
    RelatedIds,
    RunId,
    ScopeChoice,
    Tags,
)
from contracts.command_base import MAX_CANDIDATES_PER_RUN as MAX_CANDIDATES_PER_RUN
from contracts.command_base import MAX_COPIES as MAX_COPIES
from contracts.command_base import MAX_LINK_KINDS as MAX_LINK_KINDS
from contracts.command_base import MAX_LINKS as MAX_LINKS
from contracts.command_base import PROPOSAL_DAYS as PROPOSAL_DAYS
from contracts.command_base import RESERVED_LINK_KINDS as RESERVED_LINK_KINDS
from contracts.command_base import LinkKind as LinkKind
from contracts.command_base import short_tags as short_tags
from contracts.proposal_commands import (
    MergeProposal,
    ProposeChange,
    RejectProposal,
    WithdrawProposal,
)
from contracts.proposal_commands import ProposableChange as ProposableChange
from contracts.proposal_commands import ProposalCommand as ProposalCommand
from contracts.times import in_utc


class RememberMemory(Command):
    """Save one memory; an agent's save without the user's clear intent is a candidate."""

    content: str = Field(min_length=1, max_length=MAX_CONTENT)
    kind: Kind = "note"
    title: str | None = Field(default=None, max_length=MAX_TITLE)
    key: str | None = Field(default=None, max_length=MAX_TITLE)
    pinned: StrictBool = False
    tags: Tags = ()
    sources: tuple[str, ...] = Field(default=(), max_length=32)
    # The user message of the run that asked for this save (agents only).
    user_message: str | None = Field(default=None, max_length=20_000)
    # Saving text that was forgotten before must be meant.
    resave_forgotten: StrictBool = False
    # Propose only: extraction and suggestions always wait for a person.
    candidate: StrictBool = False
    # Proposed by the extractor from a conversation turn (the change log says so): only
    # ever a candidate.
    extracted: StrictBool = False
    # The ingest request this save is one message of (the gateway's keyed digest of it):
    # an ingest sent again under its Idempotency-Key with other messages is then another
    # request, refused whole, not saved in part (QA). Only the ingest route sets it.
    ingest_digest: str | None = Field(default=None, min_length=1, max_length=64)
    # A fact that stops counting at this time (it then counts as expired).
    expires_at: datetime | None = None
    # Memories this one relates to: each gets a ``related`` link from it.
    related_ids: RelatedIds = ()
    # The agent run that saves it (seed 001's task): its candidates count toward the
    # org's cap per run.
    run_id: RunId | None = None

    @field_validator("expires_at")
    @classmethod
    def _in_utc(cls, value: datetime | None) -> datetime | None:
        """In UTC (a time without a zone is taken as UTC): one whose UTC time no date can
        hold (year 9999 at -14:00) is refused here, not met by every reader of the log."""
        return None if value is None else in_utc(value)

    @field_validator("sources")
    @classmethod
    def _short_sources(cls, sources: tuple[str, ...]) -> tuple[str, ...]:
        if any(not s or len(s) > MAX_SOURCE for s in sources):
            raise ValueError(f"each source must have 1 to {MAX_SOURCE} characters")
        return sources

    @field_validator("key")
    @classmethod
    def _key_names_something(cls, key: str | None) -> str | None:
        if key is not None and not key:  # whitespace is stripped first
            raise ValueError("a key must not be empty: leave it out for a memory with none")
        return key

    @model_validator(mode="after")
    def _extraction_proposes(self) -> RememberMemory:
        if self.extracted and not self.candidate:
            raise ValueError("an extracted memory is only ever a candidate: set candidate")
        return self


class CorrectMemory(ItemCommand):
    """Replace the text of a memory, based on the revision the caller saw."""

    base_revision: StrictInt = Field(ge=1)
    content: str = Field(min_length=1, max_length=MAX_CONTENT)
    title: str | None = Field(default=None, max_length=MAX_TITLE)
    user_message: str | None = Field(default=None, max_length=20_000)
    related_ids: RelatedIds = ()
    run_id: RunId | None = None  # as RememberMemory's: an inference waits as a candidate
    resave_forgotten: StrictBool = False  # as RememberMemory's: forgotten text needs it


class RelabelMemory(ItemCommand):
    """Change a memory's kind or its tags (seed 004's category and tags), based on the
    revision the caller saw: a new revision with the same text. ``tags`` replaces the
    memory's tags; a field left out keeps its value."""

    base_revision: StrictInt = Field(ge=1)
    kind: Kind | None = None
    tags: Tags | None = None

    @model_validator(mode="after")
    def _changes_something(self) -> RelabelMemory:
        if self.kind is None and self.tags is None:
            raise ValueError("give the new kind, the new tags, or both")
        return self


class RestoreRevision(ItemCommand):
    """Bring back an earlier revision's text as a new revision."""

    base_revision: StrictInt = Field(ge=1)
    revision: StrictInt = Field(ge=1)


class UndoChange(ItemCommand):
    """Undo the last change, with the same stale-base check as a correction."""

    base_revision: StrictInt = Field(ge=1)


class PinMemory(ItemCommand):
    pinned: StrictBool = True


class DisableMemory(ItemCommand):
    disabled: StrictBool = True


class RetractKey(Command):
    """Disable the active memory that holds ``key`` (seed 002's Forget of a session fact:
    the fact is retracted, not erased; an unknown key is a conflict)."""

    key: str = Field(min_length=1, max_length=MAX_TITLE)


class ArchiveMemory(ItemCommand):
    superseded_by: str | None = Field(default=None, max_length=64)


class UnarchiveMemory(ItemCommand):
    pass


class ConfirmCandidate(ItemCommand):
    pass


class DismissCandidate(ItemCommand):
    pass


class ForgetMemory(ItemCommand):
    """Erase a memory for real: its key, its text in every revision and vector."""

    reason: str | None = Field(default=None, max_length=500)
    # Erase it only at this revision (stale → 409, nothing erased). None: whatever it holds.
    base_revision: StrictInt | None = Field(default=None, ge=1)


class MoveMemory(ItemCommand):
    """Move one of your memories into another of your scopes (seed 004: an update that
    changes its scope). Decided in the scope it moves into (``scope``, which a move names
    always): a copy of the memory as it is at ``base_revision`` (stale → 409) with an id of
    its own, its kind, title, key, tags, pin, expiry and sources; then the memory is
    forgotten where it was (``from_scope``), by a ``ForgetMoved`` that the move's own
    transaction sends."""

    scope: ScopeChoice
    from_scope: ScopeChoice = "private"
    base_revision: StrictInt = Field(ge=1)
    # Move text the target scope forgot before (a save's ``resave_forgotten``).
    resave_forgotten: StrictBool = False


class ForgetMoved(ItemCommand):
    """The writer's, never a caller's (its command id proves it, and its token is the
    mover's, expired or not): the forget of a moved memory where it was, at the revision
    the move copied (``MoveMemory``). Its text lives on in the copy (``moved_to``,
    in ``to_scope``), so the scope does not count it as forgotten text. Refused (the memory
    changed, or moved or was forgotten first), it undoes the move: the writer sends the
    forget of the copy (``undo``), whose own refusal undoes nothing further."""

    base_revision: StrictInt = Field(ge=1)
    moved_to: str = Field(min_length=1, max_length=64)
    to_scope: ScopeChoice
    undo: StrictBool = False
    # The command it follows (its stream and id): with the payload, what its id, which
    # only the command service can make, is made of (``MasterKey.issued_id``).
    follows: str = Field(min_length=1, max_length=700)


class LinkMemory(ItemCommand):
    """A directed link from one of your memories (``item_id``) to any memory you can see.
    The same link again changes nothing; a new ``weight`` replaces the old one."""

    target_id: str = Field(min_length=1, max_length=64)
    kind: OwnLinkKind = "related"
    weight: StrictFloat | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)


class UnlinkMemory(ItemCommand):
    """Remove exactly the link that (``item_id``, ``target_id``, ``kind``) names."""

    target_id: str = Field(min_length=1, max_length=64)
    kind: OwnLinkKind = "related"


class PromoteSession(Command):
    """Copy the lasting memories of the token's session into its agent's memory (seed 002:
    "the lasting entries of its Session memory become its Agent memory"). A key the agent
    holds already gets the session's text as a new revision; text the agent holds or
    forgot is not copied again."""

    scope: Literal["agent"] = "agent"
    kinds: tuple[Kind, ...] = Field(default=LASTING_KINDS, min_length=1)


class ForkSession(Command):
    """Copy the memory of the session this one forks (the token's ``fork_of``) into this
    session, as seed 002's Fork takes a copy of its source's learned memory."""

    scope: Literal["session"] = "session"


class ClearMemories(Command):
    """Erase every memory of the scope for real, each as ForgetMemory would (the seeds'
    clear-all). Only with explicit confirmation: ``confirm`` must be true."""

    confirm: StrictBool = False
    reason: str | None = Field(default=None, max_length=500)


COMMANDS: dict[str, type[Command]] = {
    c.__name__: c
    for c in (
        RememberMemory,
        CorrectMemory,
        RelabelMemory,
        RestoreRevision,
        UndoChange,
        PinMemory,
        DisableMemory,
        RetractKey,
        ArchiveMemory,
        UnarchiveMemory,
        ConfirmCandidate,
        DismissCandidate,
        ForgetMemory,
        MoveMemory,
        ForgetMoved,
        ClearMemories,
        LinkMemory,
        UnlinkMemory,
        ProposeChange,
        MergeProposal,
        RejectProposal,
        WithdrawProposal,
        PromoteSession,
        ForkSession,
    )
}
