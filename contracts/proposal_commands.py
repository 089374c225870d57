"""Proposals (seed 004): a change to a teammate's shared memory that waits for its author
or an org admin to merge or reject it. ``contracts.commands`` re-exports these and lists
them in ``COMMANDS``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictInt, model_validator

from contracts.command_base import (
    MAX_CONTENT,
    MAX_TITLE,
    Command,
    ItemCommand,
    Kind,
    ScopeChoice,
    Tags,
)

# What a proposal on a teammate's memory may change (seed 004: its text, its status, and
# what an update may change alone, the pin).
ProposableChange = Literal[
    "correct", "archive", "unarchive", "pin", "unpin", "disable", "enable", "relabel"
]


class ProposeChange(ItemCommand):
    """Propose a change to a teammate's shared memory (seed 004): its author or an org
    admin merges or rejects it. Written against the memory's current revision: if the
    memory changes first, merging records it as outdated and applies nothing."""

    scope: ScopeChoice = "shared"
    change: ProposableChange
    base_revision: StrictInt = Field(ge=1)
    reason: str = Field(min_length=1, max_length=500)
    content: str | None = Field(default=None, min_length=1, max_length=MAX_CONTENT)
    title: str | None = Field(default=None, max_length=MAX_TITLE)
    superseded_by: str | None = Field(default=None, max_length=64)
    # A 'relabel' proposal's new kind or tags (seed 004's category and tags), as
    # RelabelMemory's: ``tags`` replaces the memory's.
    kind: Kind | None = None
    tags: Tags | None = None

    @model_validator(mode="after")
    def _fits_the_change(self) -> ProposeChange:
        if (self.change == "correct") != (self.content is not None):
            raise ValueError("content is what a 'correct' proposal needs, and only it")
        if self.superseded_by is not None and self.change != "archive":
            raise ValueError("superseded_by belongs to an 'archive' proposal")
        relabels = self.kind is not None or self.tags is not None
        if (self.change == "relabel") != relabels:
            raise ValueError("kind or tags are what a 'relabel' proposal needs, and only it")
        return self


class ProposalCommand(Command):
    scope: ScopeChoice = "shared"
    proposal_id: str = Field(min_length=1, max_length=64)


class MergeProposal(ProposalCommand):
    """Apply a proposal (the memory's author or an org admin; never an agent)."""


class RejectProposal(ProposalCommand):
    """Turn a proposal down (the memory's author or an org admin)."""

    reason: str | None = Field(default=None, max_length=500)


class WithdrawProposal(ProposalCommand):
    """Take back a proposal you made."""
