"""HTTP routes that read memories and what is kept about them: a run's memory context,
a memory whole, its contexts, revisions and links, a scope's changes, the proposals, and
the list a page at a time. ``handlers.router`` serves them."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from fastapi import Query, Request

from contracts.commands import ScopeChoice
from contracts.recall import (
    Change,
    ChangesResponse,
    ContextEntry,
    ContextResponse,
    ContextsResponse,
    Link,
    LinksResponse,
    ProposalsResponse,
    ProposalView,
    RequestText,
    RevisionsResponse,
    RevisionView,
    UsedIn,
)
from engram.auth import ScopeError
from engram.http import ProblemError, principal_from
from services.recall.core import bound, excerpt, page_cursor, read_cursor
from services.recall.guards import guarded_router

router = guarded_router()
Status = Literal["active", "disabled", "archived", "candidate"]
ProposalStatus = Literal["pending", "merged", "rejected", "withdrawn", "outdated", "expired"]


@router.get("/v1/contexts/{context_id}")
async def context(request: Request, context_id: RequestText) -> ContextResponse:
    app = request.app.state
    principal = principal_from(request, app.verifier)
    row = await app.store.context(principal, context_id)
    if row is None:
        raise ProblemError(404, "Context not found", f"no memory context {context_id}", "not_found")
    given = json.loads(row["entries"])
    now = await app.store.current_of(principal, [e["item_id"] for e in given])
    return ContextResponse(
        context_id=str(row["context_id"]),
        run_id=row["run_id"],
        query=row["query"],
        generation=row["generation"],
        created_at=row["created_at"],
        entries=[_entry(e, now.get(e["item_id"])) for e in given],
    )


def _entry(given: dict[str, Any], current: Any) -> ContextEntry:
    title = None
    if current is None:
        # Out of this token's sight (a forgotten memory keeps its row): the same member's
        # context read with a token that lacks the memory's agent, session or project scope
        # (QA: it read as forgotten).
        state, revision = "unavailable", None
    elif current["status"] == "forgotten":
        state, revision = "forgotten", None
    else:
        revision, title = current["revision"], current["title"]
        state = (
            "unavailable"
            if current["status"] != "active"
            else "changed"
            if revision != given["revision"]
            else "unchanged"
        )
    return ContextEntry(
        id=given["item_id"],
        revision=given["revision"],
        why=given["why"],
        state=state,
        current_revision=revision,
        title=title,
    )


@router.get("/v1/memories/{item_id}")
async def get_memory(request: Request, item_id: RequestText) -> dict[str, Any]:
    app = request.app.state
    row = await app.store.get_item(principal_from(request, app.verifier), item_id)
    if row is None:
        raise _not_found(item_id)
    return dict(row)


@router.get("/v1/changes")
async def get_changes(
    request: Request,
    scope: ScopeChoice = "private",
    after: int = Query(0, ge=0, le=2**63 - 1),
    limit: int = Query(100, ge=1, le=1000),
) -> ChangesResponse:
    """One scope's change log, oldest first, after version ``after`` (seed 002's agent
    memory log; any scope the token grants)."""
    app = request.app.state
    principal = principal_from(request, app.verifier)
    try:
        stream_id = principal.stream(scope)
    except ScopeError as exc:
        raise ProblemError(403, "Forbidden", str(exc), "forbidden") from exc
    rows, version = await app.store.changes(principal, stream_id, after, limit)
    return ChangesResponse(
        scope=stream_id.split("/", 1)[1],
        version=version,
        changes=[Change(**dict(r)) for r in rows],
    )


@router.get("/v1/memories/{item_id}/contexts")
async def get_contexts_of(
    request: Request, item_id: RequestText, limit: int = Query(50, ge=1, le=500)
) -> ContextsResponse:
    """The caller's runs that were given this memory, newest first (seed 001)."""
    app = request.app.state
    rows = await app.store.contexts_of(principal_from(request, app.verifier), item_id, limit)
    if rows is None:
        raise _not_found(item_id)
    return ContextsResponse(
        item_id=item_id,
        contexts=[
            UsedIn(**{**dict(r), "context_id": str(r["context_id"]), "why": json.loads(r["why"])})
            for r in rows
        ],
    )


@router.get("/v1/memories/{item_id}/revisions")
async def get_revisions(request: Request, item_id: RequestText) -> RevisionsResponse:
    """A memory's kept revisions, newest first, with who made each (seed 004)."""
    app = request.app.state
    rows = await app.store.revisions(principal_from(request, app.verifier), item_id)
    if rows is None:
        raise _not_found(item_id)
    return RevisionsResponse(item_id=item_id, revisions=[RevisionView(**dict(r)) for r in rows])


@router.get("/v1/memories/{item_id}/links")
async def get_links(
    request: Request,
    item_id: RequestText,
    direction: Literal["out", "in", "both"] = "both",
    limit: int = Query(100, ge=1, le=1000),
) -> LinksResponse:
    """A memory's links, outbound, inbound or both, newest first (seed 004's list_links)."""
    app = request.app.state
    rows = await app.store.links(principal_from(request, app.verifier), item_id, direction, limit)
    if rows is None:
        raise _not_found(item_id)
    return LinksResponse(
        item_id=item_id,
        links=[
            Link(**dict(r), direction="out" if r["source_id"] == item_id else "in") for r in rows
        ],
    )


@router.get("/v1/proposals")
async def get_proposals(
    request: Request,
    view: Literal["review", "mine", "all"] = "all",
    status: ProposalStatus | None = None,
    limit: int = Query(50, ge=1, le=500),
) -> ProposalsResponse:
    """Proposals on memories the caller can see, newest first (seed 004): ``review`` holds
    only what others proposed on the caller's memories (an admin's: anyone's), and for a
    person what its agents proposed; ``mine`` the caller's own. Resolved ones leave 30
    days after, and ones that expired unanswered 30 days after they expired."""
    app = request.app.state
    rows = await app.store.proposals(principal_from(request, app.verifier), view, status, limit)
    return ProposalsResponse(proposals=[ProposalView(**dict(r)) for r in rows])


@router.get("/v1/memories")
async def list_memories(
    request: Request,
    status: Status = "active",
    limit: int = Query(20, ge=1, le=100),
    cursor: RequestText | None = None,
) -> dict[str, Any]:
    """Newest first, a page at a time; ``cursor`` is the ``next`` of the previous page. A
    memory over 1,200 characters comes as its head, marked ``truncated`` with its
    ``full_length`` (seed 004): ``GET /v1/memories/{id}`` reads it whole. A page ends
    early rather than carry more than ``search_chars`` of text (16,000)."""
    app = request.app.state
    before, before_id = _position(cursor)
    rows = await app.store.list_items(
        principal_from(request, app.verifier), [status], before, before_id, limit
    )
    return _page([_bounded(dict(r)) for r in rows], limit, app.settings.search_chars)


def _position(cursor: str | None) -> tuple[datetime | None, str]:
    """Where a page starts: after the one whose ``next`` is ``cursor``, else the newest."""
    try:
        return read_cursor(cursor) if cursor else (None, "")
    except ValueError as exc:
        wrong = {"loc": ["query", "cursor"], "msg": "not a cursor", "type": "invalid_cursor"}
        raise ProblemError(
            422,
            "Invalid cursor",
            "use the `next` value of a previous page",
            "invalid",
            errors=[wrong],
        ) from exc


def _page(items: list[dict[str, Any]], limit: int, budget: int) -> dict[str, Any]:
    # Seed 004: a whole result is bounded, not just each row (a seed audit found a page of
    # 100 at 47,910 characters). The page ends early; its ``next`` goes on from its last
    # memory, so none is left out.
    sizes = [len(i["content"] or "") + len(i.get("title") or "") for i in items]
    kept = bound(sizes, budget)
    last = items[kept - 1] if items and (kept < len(items) or len(items) == limit) else None
    return {
        "memories": items[:kept],
        "next": page_cursor(last["updated_at"], last["item_id"]) if last else None,
    }


def _bounded(item: dict[str, Any]) -> dict[str, Any]:
    cut = excerpt(item["content"] or "", "")  # no query: the head
    return {**item, "content": cut.text, "truncated": cut.truncated, "full_length": cut.full_length}


def _not_found(item_id: str) -> ProblemError:
    return ProblemError(404, "Memory not found", f"no memory {item_id} you can see", "not_found")
