"""An org's settings, as recall serves them to its people and its admins set them: the
packet policy and limits (``PUT /v1/policy``), entity aliases (seed 004), and the account
of seed 004's pricing and holds (``GET /v1/billing``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictInt

from contracts.commands import MAX_CANDIDATES_PER_RUN
from contracts.recall import Policy, RequestText

# What the extractor's learning does (seeds 000 and 002 differ): ``suggest`` makes each
# learned fact a candidate a person confirms (seed 000); ``apply`` uses it at once in a
# session's or an agent's memory (seed 002's learned memory), as an unconfirmed inference.
Learning = Literal["suggest", "apply"]


class OrgPolicy(BaseModel):
    """An org's default packet policy and limits. As the body of ``PUT /v1/policy``
    (admins only), a field present sets it (null clears a limit where null is allowed) and
    a missing field keeps its current value (an org's first policy starts from the
    defaults below), as ``PUT /v1/session`` does."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy: Policy = "hybrid"
    max_items: StrictInt | None = Field(default=None, ge=1, le=50)
    max_chars: StrictInt | None = Field(default=None, ge=200, le=32_000)
    # How many prior revisions each memory keeps besides its current one (seed 004: 3);
    # None keeps every revision (seed 000). Older ones leave the read models and can no
    # longer be restored.
    keep_revisions: StrictInt | None = Field(default=None, ge=1, le=1000)
    # Session switches' defaults (seed 002): a session's runs are given its own memories
    # (use), and the extractor learns from its turns (generate); a session may override.
    session_use: StrictBool = True
    session_generate: StrictBool = True
    # How many candidates one agent run may propose in a scope (seed 001: three); None:
    # no cap (seed 000). Past it, a save that would be a candidate is refused (429).
    max_candidates_per_run: StrictInt | None = Field(default=MAX_CANDIDATES_PER_RUN, ge=1, le=1000)
    # How many memories one scope may hold (active, candidate, disabled or archived: all
    # but the forgotten), so no runaway caller grows one without bound (seed 004: storage
    # quotas protect the service); None: no quota. Past it, a command that would add one
    # is refused (429).
    max_memories_per_scope: StrictInt | None = Field(default=None, ge=1, le=1_000_000)
    # Seed 004's memory capability: off, runs are given no memory, agents read and change
    # none, and the extractor learns nothing; what is held stays, and people still read,
    # correct and forget it. An org's switch, which no other org's touches.
    memory: StrictBool = True
    # Whether the extractor learns into agents' memory from their turns (seed 002's
    # agentMemory); off, agents keep what is saved or promoted, and learn nothing new.
    agent_memory: StrictBool = True
    # Whether what the extractor learns in a session's or an agent's memory waits for a
    # person (``suggest``, seed 000) or is used at once (``apply``, seed 002); in the other
    # scopes it always waits. An applied fact never replaces a confirmed one, nor brings
    # back a retracted one: those still wait as candidates.
    learning: Learning = "suggest"


# Seed 004's entity aliases: an org names an entity and the other names it goes by, and a
# search that names any of them also looks for the others.
MAX_ALIASES, MAX_ENTITIES, MAX_NAME = 20, 1_000, 100
Name = Annotated[RequestText, Field(min_length=1, max_length=MAX_NAME)]


def _has_a_word(name: str) -> str:
    if not any(ch.isalnum() for ch in name):
        raise ValueError("a name needs a letter or a digit")
    return " ".join(name.split()).strip("/ ")  # "CI/CD/" is "CI/CD" (a path's end)


EntityName = Annotated[Name, AfterValidator(_has_a_word)]


class AliasesRequest(BaseModel):
    """The body of ``PUT /v1/aliases/{entity}``: every other name of the entity (replacing
    the ones it had)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    aliases: list[EntityName] = Field(min_length=1, max_length=MAX_ALIASES)


class EntityAliases(BaseModel):
    model_config = ConfigDict(frozen=True)

    entity: str
    aliases: list[str]
    updated_by: str
    updated_at: datetime


class AliasesResponse(BaseModel):
    model_config = ConfigDict(frozen=True)

    entities: list[EntityAliases]  # by entity name


class BillingView(BaseModel):
    """The org's account (seed 004's pricing and holds), as ``GET /v1/billing`` answers:
    open while the org is held, so its people can see why. An org without an account is
    not metered: nothing is charged nor held."""

    model_config = ConfigDict(frozen=True)

    metered: bool
    suspended: bool = False
    balance: int | None = None  # credits left (negative: spent past it meanwhile)
    monthly_cap: int | None = None  # credits one caller may spend a calendar month (UTC)
    month: str  # this month, "YYYY-MM" (UTC)
    # Credits spent this month by caller ("member:<id>" or "agent:<id>"): the token's own
    # caller's; an admin's token sees every caller's.
    spent: dict[str, int]
