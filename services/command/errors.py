"""Errors of the command service: one root, small named subclasses."""

from __future__ import annotations

from typing import Any

from contracts.envelope import Rejection
from engram.billing import Hold


class CommandServiceError(Exception):
    """Root of the command service's errors."""


class DomainError(CommandServiceError):
    """Rejects a command: rendered as problem+json or a rejection reply."""

    code = "rejected"
    status = 422
    title = "Command rejected"

    def __init__(self, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extra = extra

    def rejection(self) -> Rejection:
        return Rejection(
            code=self.code,
            status=self.status,
            title=self.title,
            detail=self.detail,
            extra=self.extra,
        )


class InvalidCommand(DomainError):
    """The command is malformed or breaks a limit."""

    code, status, title = "invalid", 422, "Invalid command"


class Unauthenticated(DomainError):
    """No valid bearer token."""

    code, status, title = "unauthenticated", 401, "Not authenticated"


class Forbidden(DomainError):
    """The token does not allow this."""

    code, status, title = "forbidden", 403, "Forbidden"


class ProposalRequired(DomainError):
    """A teammate's shared memory changes through a proposal (seed 004)."""

    code, status, title = "proposal_required", 403, "Propose the change instead"


class NotFound(DomainError):
    """No such memory in this scope."""

    code, status, title = "not_found", 404, "Memory not found"


class ProposalNotFound(DomainError):
    """No such proposal in this scope."""

    code, status, title = "not_found", 404, "Proposal not found"


class Conflict(DomainError):
    """The base revision is stale, or the item's state does not allow the change."""

    code, status, title = "conflict", 409, "Conflict"


class AlreadyHeld(DomainError):
    """A save that would be a candidate, of text the scope holds already, as a memory or
    a candidate: a person would only be asked to confirm what is there."""

    code, status, title = "already_held", 409, "Already held"


class LinkCapacityExceeded(DomainError):
    """A memory's links would pass a bound (seed 004's ``link_capacity_exceeded``)."""

    code, status, title = "link_capacity_exceeded", 422, "Link capacity exceeded"


class CandidateLimitReached(DomainError):
    """A run has proposed as many candidates in this scope as the org's policy allows."""

    code, status, title = "candidate_limit_reached", 429, "Too many candidates from this run"


class MemoryOff(DomainError):
    """The org turned its memory capability off (seed 004): agents change nothing."""

    code, status, title = "memory_off", 403, "Memory is off"


class MemoryQuotaReached(DomainError):
    """The scope holds as many memories as the org's quota allows (seed 004's storage
    quotas): nothing more is added until some are forgotten or the quota is raised."""

    code, status, title = "memory_quota_reached", 429, "The scope is full"


class Held(DomainError):
    """Seed 004's holds: the org is suspended, out of credit, or the caller has spent its
    monthly cap (``engram.billing.hold_on`` says which, as code, status and title)."""

    def __init__(self, hold: Hold, **extra: Any) -> None:
        super().__init__(hold.detail, **extra)
        self.code, self.status, self.title = hold.code, hold.status, hold.title


class NotDecidable(DomainError):
    """A command that broke the writer in a way no rule names (its record is also
    dead-lettered, for a look): refused alone, the rest of its batch goes on."""

    code, status, title = "not_decidable", 422, "Command not decidable"


class IdempotencyKeyReused(DomainError):
    """A command id (an Idempotency-Key) sent again with another request."""

    code, status, title = "idempotency_key_reused", 422, "Idempotency-Key reused"


class NotReadable(DomainError):
    """What the command reads outside its stream is not in the read model yet (the
    projector is down or far behind): nothing was done, and a retry can succeed."""

    code, status, title = "not_readable_yet", 503, "Try again shortly"


class Gone(DomainError):
    """The memory was forgotten; nothing of it can come back."""

    code, status, title = "forgotten", 410, "Memory forgotten"


class TransientError(CommandServiceError):
    """Retry with backoff (broker or database briefly unavailable)."""


class PoisonMessageError(CommandServiceError):
    """A record that can never be decoded: it goes to the dead-letter topic."""
