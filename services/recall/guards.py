"""What recall's routes of packets and memories ask before they answer: a bearer token, an
org not held (``billing.not_held``), and, for an agent, its org's memory on."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Security

from engram.http import BEARER, PROBLEM_RESPONSES, ProblemError, principal_from
from services.recall.billing import not_held

# What an agent may still read while its org's memory is off: the policy, its session's
# switches, the generation, and a packet (empty then).
OPEN_WHEN_OFF = frozenset({"/v1/recall", "/v1/policy", "/v1/session", "/v1/generation"})


async def _memory_on_for_agents(request: Request) -> None:
    """Seed 004: an org that turns its memory capability off hides it from its agents:
    their reads are refused (403 ``memory_off``) and a packet is empty; what is held stays,
    for the org's people to read, correct and forget."""
    if request.url.path in OPEN_WHEN_OFF:
        return
    app = request.app.state
    principal = principal_from(request, app.verifier)
    if principal.is_agent and not (await app.store.org_policy(principal)).memory:
        raise ProblemError(
            403,
            "Memory is off",
            "memory is off for this org (its policy's memory): its agents read none",
            "memory_off",
        )


def guarded_router() -> APIRouter:
    """A router whose routes ask all three, in that order."""
    return APIRouter(
        responses=PROBLEM_RESPONSES,
        dependencies=[Security(BEARER), Depends(not_held), Depends(_memory_on_for_agents)],
    )
