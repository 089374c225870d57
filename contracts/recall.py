"""HTTP bodies of the recall service."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictInt

from contracts.commands import Kind, ProposableChange
from contracts.envelope import MadeBy
from contracts.text import postgres_text

Policy = Literal["hybrid", "preferences_first", "newest_first"]


# Every text of a recall request that reaches PostgreSQL: body fields, path and query
# parameters alike.
RequestText = Annotated[str, AfterValidator(postgres_text)]

# Seed 004's exact matching: a phrase in double quotes (straight, or curly: both are
# straight once read) must appear as written, at word boundaries, case aside, however its
# words are spaced. At most five phrases of at most 200 characters each: more is refused,
# never dropped.
CURLY = str.maketrans({"\u201c": '"', "\u201d": '"'})
QUOTED = re.compile(r'"([^"]*)"')
MAX_PHRASES, MAX_PHRASE = 5, 200


def phrases_of(query: str) -> list[str]:
    """The query's quoted phrases, each once whatever its case, their spaces single."""
    found = (" ".join(m.group(1).split()) for m in QUOTED.finditer(query.translate(CURLY)))
    unique: dict[str, str] = {}
    for phrase in found:
        if phrase:
            unique.setdefault(phrase.lower(), phrase)
    return list(unique.values())


def _phrases_fit(query: str) -> str:
    phrases = phrases_of(query)
    if len(phrases) > MAX_PHRASES:
        raise ValueError(f"at most {MAX_PHRASES} phrases in double quotes, not {len(phrases)}")
    if any(len(p) > MAX_PHRASE for p in phrases):
        raise ValueError(f"a phrase in double quotes holds at most {MAX_PHRASE} characters")
    return query


Query = Annotated[RequestText, AfterValidator(_phrases_fit)]


class RecallRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    query: Query = Field(max_length=20_000)
    run_id: RequestText | None = Field(default=None, max_length=200)
    # On-off fields take JSON's true and false only (StrictBool), as the commands do.
    use_memory: StrictBool = True  # a run can turn memory off: nothing supplied, nothing recorded
    # A preview of what a run would be given (seed 001's composer): nothing is recorded.
    preview: StrictBool = False
    policy: Policy | None = None
    max_items: StrictInt | None = Field(default=None, ge=1, le=50)
    max_chars: StrictInt | None = Field(default=None, ge=200, le=32_000)


class RecalledItem(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    revision: int
    scope: str
    kind: str
    why: list[str]
    score: float


class RecallResponse(BaseModel):
    model_config = ConfigDict(frozen=True)

    context_id: str | None
    generation: str
    policy: Policy
    items: list[RecalledItem]
    packet: str
    omitted: int = 0


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


class GenerationResponse(BaseModel):
    model_config = ConfigDict(frozen=True)

    generation: str  # shared:own:expired
    shared: int
    own: int
    expired: int


class SearchRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    query: Query = Field(min_length=1, max_length=20_000)
    limit: StrictInt = Field(default=10, ge=1, le=100)
    # Diagnostics and benchmarks: one retriever alone instead of the fused ranking.
    retrieval: Literal["hybrid", "full_text", "vector"] = "hybrid"


class SearchHit(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    revision: int
    scope: str
    kind: str
    title: str | None
    memory: str  # whole up to 1,200 characters, else the passage that matched
    truncated: bool = False
    full_length: int
    score: float
    why: list[str]


class SearchResponse(BaseModel):
    model_config = ConfigDict(frozen=True)

    memories: list[SearchHit]
    omitted: int = 0  # lower-ranked matches dropped to keep the result bounded


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


class SessionSwitches(BaseModel):
    model_config = ConfigDict(frozen=True)

    use: bool
    generate: bool


class SessionOverrides(BaseModel):
    """What the session sets itself; a switch it does not name follows the org."""

    model_config = ConfigDict(frozen=True)

    use: bool | None = None
    generate: bool | None = None


MAX_PROCESSED = 100


class SessionResponse(BaseModel):
    """A session's switches as they apply (``settings``) and what it set (``overrides``)."""

    model_config = ConfigDict(frozen=True)

    session: str
    settings: SessionSwitches
    overrides: SessionOverrides
    # The session's turns the extractor has read for memory (seed 002's ``processed``):
    # their ids, oldest first, the last ``MAX_PROCESSED``.
    processed: list[str] = []


class SessionSwitchesRequest(BaseModel):
    """``PUT /v1/session``: true or false sets a switch for this session, null makes it
    follow the org's default again, a missing field keeps it as it is (seed 002)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    use: bool | None = None
    generate: bool | None = None


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
