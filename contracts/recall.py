"""HTTP bodies of the recall service: a packet, a search, the generation and a session's
switches. The bodies of its reads of memories are ``memory_reads``'s, importable from here
too."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictInt

from contracts.memory_reads import Change as Change
from contracts.memory_reads import ChangesResponse as ChangesResponse
from contracts.memory_reads import ContextEntry as ContextEntry
from contracts.memory_reads import ContextResponse as ContextResponse
from contracts.memory_reads import ContextsResponse as ContextsResponse
from contracts.memory_reads import Link as Link
from contracts.memory_reads import LinksResponse as LinksResponse
from contracts.memory_reads import ProposalsResponse as ProposalsResponse
from contracts.memory_reads import ProposalView as ProposalView
from contracts.memory_reads import RevisionsResponse as RevisionsResponse
from contracts.memory_reads import RevisionView as RevisionView
from contracts.memory_reads import UsedIn as UsedIn
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
