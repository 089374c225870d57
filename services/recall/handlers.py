"""HTTP routes of the recall service: token -> store/core -> response.

Here a packet, a search, the generation, and the org's policy and session's switches that
shape a packet; the reads of memories are ``memories``'s, served by this router too."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fastapi import Request

from contracts.orgs import OrgPolicy
from contracts.recall import (
    MAX_PROCESSED,
    GenerationResponse,
    RecallRequest,
    RecallResponse,
    SearchRequest,
    SearchResponse,
    SessionOverrides,
    SessionResponse,
    SessionSwitches,
    SessionSwitchesRequest,
)
from engram.auth import Principal
from engram.http import ProblemError, principal_from
from services.recall import memories
from services.recall.adapters.store import RecallStore
from services.recall.guards import guarded_router
from services.recall.packets import generation_text, recall
from services.recall.search import search

router = guarded_router()


async def _in_use(app: Any, principal: Principal) -> Principal:
    """The token's principal as its runs read memory: without its session when the
    session's `use` is off (its runs are given no memory of the session itself)."""
    if (
        principal.session
        and not (await app.store.session_switches(principal, principal.session))["use"]
    ):
        return replace(principal, session=None)
    return principal


@router.post("/v1/recall")
async def post_recall(request: Request, body: RecallRequest) -> RecallResponse:
    app = request.app.state
    principal = await _in_use(app, principal_from(request, app.verifier))
    return await recall(app.store, app.embedder, principal, body, app.settings)


@router.post("/v1/search")
async def post_search(request: Request, body: SearchRequest) -> SearchResponse:
    app = request.app.state
    principal = principal_from(request, app.verifier)
    return await search(app.store, app.embedder, principal, body, app.settings)


@router.get("/v1/policy")
async def get_policy(request: Request) -> OrgPolicy:
    app = request.app.state
    return await app.store.org_policy(principal_from(request, app.verifier))


@router.put("/v1/policy")
async def put_policy(request: Request, body: OrgPolicy) -> OrgPolicy:
    """Set the fields of the org's policy the body names (a missing one keeps its value,
    as in ``PUT /v1/session``); needs a person's token (no agent) with the ``admin`` role."""
    app = request.app.state
    principal = principal_from(request, app.verifier)
    if "admin" not in principal.roles or principal.is_agent:
        # A person's: an agent, even an admin's, would turn back on the memory switch that
        # governs it (QA), or lift its own run's cap.
        raise ProblemError(
            403,
            "Forbidden",
            "setting the org's policy needs a person's token with the admin role",
            "forbidden",
        )
    changes = {name: getattr(body, name) for name in body.model_fields_set}
    return await app.store.set_org_policy(principal, changes)


@router.get("/v1/generation")
async def generation(request: Request) -> GenerationResponse:
    app = request.app.state
    # Counted over what a packet holds, so a run's recorded generation matches it (QA: with
    # the session's `use` off, the packet's never did, and every run looked stale).
    gen = await app.store.generation(await _in_use(app, principal_from(request, app.verifier)))
    return GenerationResponse(generation=generation_text(gen), **gen)


@router.get("/v1/session")
async def get_session(request: Request) -> SessionResponse:
    """The token's session's switches (seed 002): as they apply, and what it set."""
    app = request.app.state
    principal = principal_from(request, app.verifier)
    return await _session_view(app.store, principal)


@router.put("/v1/session")
async def put_session(request: Request, body: SessionSwitchesRequest) -> SessionResponse:
    app = request.app.state
    principal = principal_from(request, app.verifier)
    session = _session_of(principal)
    changes = {name: getattr(body, name) for name in body.model_fields_set}
    await app.store.configure_session(principal, session, changes)
    return await _session_view(app.store, principal)


def _session_of(principal: Principal) -> str:
    if principal.session is None:
        raise ProblemError(
            403, "Forbidden", "this token names no session: its switches need one", "forbidden"
        )
    return principal.session


async def _session_view(store: RecallStore, principal: Principal) -> SessionResponse:
    session = _session_of(principal)
    row = await store.session_switches(principal, session)
    overrides = {name: row[name] for name in ("use", "generate") if row[f"{name}_set"]}
    return SessionResponse(
        session=session,
        settings=SessionSwitches(use=row["use"], generate=row["generate"]),
        overrides=SessionOverrides(**overrides),
        processed=await store.processed(principal, session, MAX_PROCESSED),
    )


# The memory reads take the same guards. They join as this router's own routes rather than
# as an included router, which FastAPI keeps behind one entry of its own: whoever lists
# ``router.routes`` (the checks that every route's inputs are bounded and strict) finds
# each of them.
router.routes.extend(memories.router.routes)
