"""HTTP bodies of the recall service's reads of memories and what is kept about them: a
run's memory context, a memory's links, revisions and contexts, a scope's changes, and the
proposals (the routes of ``services.recall.memories``). ``contracts.recall`` re-exports
them."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from contracts.commands import Kind, ProposableChange
from contracts.envelope import MadeBy


class ContextEntry(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    revision: int
    why: list[str]
    state: Literal["unchanged", "changed", "forgotten", "unavailable"]
    current_revision: int | None
    # The memory's title as it is now (seed 001's record of what a task was given); None
    # when it has none, or once it is forgotten: the title leaves the run's record with the
    # memory (seed 001's "also remove the title from task records", always).
    title: str | None = None


class ContextResponse(BaseModel):
    model_config = ConfigDict(frozen=True)

    context_id: str
    run_id: str | None
    query: str
    generation: str
    created_at: datetime
    entries: list[ContextEntry]


class Link(BaseModel):
    """A directed link between two memories (seed 004); ``direction`` is as seen from the
    memory asked about."""

    model_config = ConfigDict(frozen=True)

    source_id: str
    target_id: str
    kind: str
    weight: float | None
    direction: Literal["out", "in"]
    created_at: datetime
    updated_at: datetime


class LinksResponse(BaseModel):
    model_config = ConfigDict(frozen=True)

    item_id: str
    links: list[Link]  # newest first; only links whose two memories the caller can see


class ProposalView(BaseModel):
    """A proposed change to a memory (seed 004), as a reviewer or its proposer sees it."""

    model_config = ConfigDict(frozen=True)

    proposal_id: str
    item_id: str
    scope: str
    change: ProposableChange
    base_revision: int
    current_revision: int  # differs from base_revision: merging records it as outdated
    title: str | None
    content: str | None  # a correction's text; None for the other changes, or forgotten
    superseded_by: str | None
    # A relabel's new kind and tags (tags None: kept, or forgotten with the memory).
    kind: Kind | None = None
    tags: list[str] | None = None
    reason: str | None  # None once the memory is forgotten (its words about it go too)
    proposer: str
    proposer_agent: str | None = None  # the agent that proposed it for its member, if one did
    author: str | None  # who saved the memory: they (or an admin) merge or reject
    status: Literal["pending", "merged", "rejected", "withdrawn", "outdated", "expired"]
    proposed_at: datetime
    resolved_at: datetime | None
    resolution_reason: str | None


class ProposalsResponse(BaseModel):
    model_config = ConfigDict(frozen=True)

    proposals: list[ProposalView]


class RevisionView(BaseModel):
    """One kept revision of a memory: its text then, who made it and why."""

    model_config = ConfigDict(frozen=True)

    revision: int
    reason: str  # remembered, corrected, restored, undone, pinned, archived, ...
    title: str | None
    content: str | None  # None once the memory is forgotten
    member: str | None
    agent: str | None
    command_id: str
    occurred_at: datetime


class RevisionsResponse(BaseModel):
    model_config = ConfigDict(frozen=True)

    item_id: str
    revisions: list[RevisionView]  # newest first


class Change(BaseModel):
    """One event of a scope's history: the scope's version after it, what changed, who."""

    model_config = ConfigDict(frozen=True)

    version: int
    type: str  # the event type: MemoryRemembered, MemoryRevised, MemoryForgotten, ...
    item_id: str
    revision: int | None
    key: str | None  # the memory's key, when it has one (NULL once forgotten)
    member: str
    agent: str | None  # set when an agent (or extraction acting for one) made it
    # What made it: person, agent, extraction (the extractor's candidate), promotion, fork
    # or proposal (a merged one); None for changes recorded before this was.
    made_by: MadeBy | None
    command_id: str
    occurred_at: datetime
    charged: int = 0  # credits it cost (seed 004's pricing; 0: free, or not metered)


class ChangesResponse(BaseModel):
    model_config = ConfigDict(frozen=True)

    scope: str
    # The last version listed, or, when none is, the scope's current version (its newest
    # change the caller can see; 0 for an empty scope): pass it as ``after`` next time.
    version: int
    changes: list[Change]


class UsedIn(BaseModel):
    """A memory context (a run's packet) that gave the memory, and at which revision."""

    model_config = ConfigDict(frozen=True)

    context_id: str
    run_id: str | None
    query: str
    revision: int
    why: list[str]
    created_at: datetime


class ContextsResponse(BaseModel):
    model_config = ConfigDict(frozen=True)

    item_id: str
    contexts: list[UsedIn]  # newest first; the caller's own runs
