"""What every command shares: the bounds on its fields, the field types and their
validators, and the ``Command`` and ``ItemCommand`` bases. ``contracts.commands``
re-exports all of it."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt, model_validator

from contracts.text import refuse_nul

MAX_CONTENT = 4000
MAX_TITLE = 200
MAX_SOURCE = 2048  # a source names a run, a message or a URL
# Links (seed 004): a memory holds at most this many outgoing links, and at most this
# many kinds toward any one other memory; past a bound the command is refused with
# ``link_capacity_exceeded``.
MAX_LINKS = 1000
MAX_LINK_KINDS = 16
# Written by archiving (``superseded_by``), never by a link command.
RESERVED_LINK_KINDS = frozenset({"supersedes"})
# A pending proposal expires this long after it was made (seed 004).
PROPOSAL_DAYS = 30
# A promotion or a fork copies at most this many memories in one command.
MAX_COPIES = 1000
# A run (seed 001's task) proposes at most this many candidates in one scope, unless the
# org's policy (``max_candidates_per_run``) says otherwise.
MAX_CANDIDATES_PER_RUN = 3

Kind = Literal["fact", "preference", "decision", "procedure", "lesson", "note", "hypothesis"]
# What a promotion copies from a session into its agent's memory: lasting experience
# (seed 002).
LASTING_KINDS: tuple[Kind, ...] = ("procedure", "preference", "decision")
ScopeChoice = Literal["private", "shared", "agent", "session", "project"]


RelatedIds = Annotated[
    tuple[Annotated[str, Field(min_length=1, max_length=64)], ...], Field(max_length=32)
]
LinkKind = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$")]


def _not_reserved(kind: str) -> str:
    if kind in RESERVED_LINK_KINDS:
        raise ValueError(
            f"the kind {kind!r} is reserved: archiving writes it, unarchiving removes it"
        )
    return kind


# A kind a link or an unlink command may name (not one archiving keeps for itself).
OwnLinkKind = Annotated[LinkKind, AfterValidator(_not_reserved)]
RunId = Annotated[str, Field(min_length=1, max_length=200)]


def short_tags(tags: tuple[str, ...]) -> tuple[str, ...]:
    if any(not t or len(t) > 64 for t in tags):
        raise ValueError("each tag must have 1 to 64 characters")
    return tags


# A memory's tags: at most 32, each of 1 to 64 characters.
Tags = Annotated[tuple[str, ...], Field(max_length=32), AfterValidator(short_tags)]


class Command(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)

    # The scope the command acts in, resolved against the token (never an id).
    scope: ScopeChoice = "private"
    # The scope's version (its stream's last seq) the caller last saw: when it moved on
    # since, the command is refused with 409 naming the current one (seed 002's
    # ``expected``). None: no check.
    expected_version: StrictInt | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _no_nul(self) -> Command:
        refuse_nul(self.__dict__)  # Postgres's text cannot hold one (contracts.text)
        return self


class ItemCommand(Command):
    item_id: str = Field(min_length=1, max_length=64)
