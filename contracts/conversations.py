"""Conversation turns: what other services publish on ``engram.conversations``.

A turn is published once the run's reply is complete. The extractor reads it
and proposes candidate memories acting with the turn's own bearer token, so it
can only ever propose into scopes that token already grants. The record key is
the turn's ``<org>/<scope>`` stream id or its run id; the extractor relies on
neither, only on ``turn_id`` being stable when the same turn is published again (a turn
id is its caller's: the extractor tells turns apart by it with their stream and author).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from contracts.commands import ScopeChoice
from contracts.text import refuse_nul

MAX_MESSAGE = 20_000  # the same cap as RememberMemory.user_message
MAX_SOURCES = 31  # a proposal's sources are the turn id plus these, at most 32


class ConversationTurn(BaseModel):
    """One completed turn of a run: the user's message and the ids it rests on."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)

    turn_id: str = Field(min_length=1, max_length=100)
    run_id: str = Field(min_length=1, max_length=100)
    # The bearer token of the person or agent the run belongs to.
    token: str = Field(min_length=1)
    user_message: str = Field(max_length=MAX_MESSAGE)
    # Kept for context only: proposals quote the user, never the assistant.
    assistant_message: str | None = Field(default=None, max_length=MAX_MESSAGE)
    # Ids of the message items (or memory items) this turn rests on.
    sources: tuple[str, ...] = Field(default=(), max_length=MAX_SOURCES)
    completed_at: datetime
    # Where proposals go, resolved against the token like any command's scope.
    scope: ScopeChoice = "private"

    @field_validator("sources")
    @classmethod
    def _short_ids(cls, sources: tuple[str, ...]) -> tuple[str, ...]:
        if any(not s or len(s) > 100 for s in sources):
            raise ValueError("each source id must have 1 to 100 characters")
        return sources

    @model_validator(mode="after")
    def _no_nul(self) -> ConversationTurn:
        refuse_nul(self.__dict__)  # Postgres's text cannot hold one (contracts.text)
        return self
