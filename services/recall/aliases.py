"""Seed 004's entity aliases over HTTP: the org's entities and their other names.

Anyone of the org reads them; an admin in person sets or removes them. A search or a
packet's hybrid query that names an entity also looks for its other names (a list of
its own in the fusion, ``alias``: see ``packets.matches``)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response, Security

from contracts.orgs import MAX_ENTITIES, AliasesRequest, AliasesResponse, EntityAliases, EntityName
from engram.auth import Principal
from engram.http import BEARER, PROBLEM_RESPONSES, ProblemError, principal_from
from services.recall.billing import not_held
from services.recall.entities import folded, names_of

router = APIRouter(responses=PROBLEM_RESPONSES, dependencies=[Security(BEARER), Depends(not_held)])


@router.get("/v1/aliases")
async def get_aliases(request: Request) -> AliasesResponse:
    app = request.app.state
    rows = await app.store.entity_aliases(principal_from(request, app.verifier))
    return AliasesResponse(entities=[EntityAliases(**dict(r)) for r in rows])


@router.put("/v1/aliases/{entity:path}")
async def put_aliases(request: Request, entity: EntityName, body: AliasesRequest) -> EntityAliases:
    """Set an entity's other names (replacing those it had). A name belongs to one
    entity of the org: one another entity holds is refused (409, naming it)."""
    app = request.app.state
    principal = _admin(principal_from(request, app.verifier))
    seen, aliases = {folded(entity)}, []
    for alias in body.aliases:  # each name once, as first written, case and spacing aside
        if (name := folded(alias)) not in seen:
            seen.add(name)
            aliases.append(alias)
    if not aliases:
        raise ProblemError(
            422, "Invalid request", "aliases: name at least one other name", "invalid"
        )
    row, taken = await app.store.set_entity_aliases(
        principal, entity, aliases, names_of(entity, aliases), MAX_ENTITIES
    )
    if taken is not None:
        raise ProblemError(
            409,
            "Name taken",
            f"entity {taken!r} of this org goes by one of these names already: a name "
            "belongs to one entity",
            "alias_taken",
            entity=taken,
        )
    if row is None:
        raise ProblemError(
            422,
            "Too many entities",
            f"this org names {MAX_ENTITIES} entities already: remove one first",
            "invalid",
        )
    return EntityAliases(**dict(row))


@router.delete("/v1/aliases/{entity:path}", status_code=204)
async def delete_aliases(request: Request, entity: EntityName) -> Response:
    app = request.app.state
    principal = _admin(principal_from(request, app.verifier))
    if not await app.store.delete_entity_aliases(principal, entity):
        raise ProblemError(404, "Not found", f"this org names no entity {entity!r}", "not_found")
    return Response(status_code=204)


def _admin(principal: Principal) -> Principal:
    if "admin" not in principal.roles or principal.is_agent:
        raise ProblemError(
            403,
            "Forbidden",
            "setting the org's entity aliases needs a person's token with the admin role",
            "forbidden",
        )
    return principal
