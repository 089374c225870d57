"""HTTP routes of the command service: decode -> hand over or publish -> await the answer.

Plain Starlette routes, not FastAPI's: each parses and validates its own body and builds
its own response, so FastAPI's dependency and routing layers only cost time (about 80 us
of CPU a request, a third of the service's HTTP handling; measured on an invalid
remember). Errors still go through the app's problem+json handlers. The routes that save
text brought in other forms (a MEMORY.md, a lesson, a batch of messages) are in
``saving.py``; the way every route submits its command, in ``submit.py``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from starlette.routing import Route

from contracts import commands as c
from contracts.envelope import COMMAND_ID_LENGTH
from contracts.text import postgres_text
from engram.http import ProblemError
from services.command.answers import json_errors
from services.command.saving import routes as saving_routes
from services.command.submit import read_json, submit

ACTIONS: dict[str, tuple[type[c.Command], dict[str, Any]]] = {
    "correct": (c.CorrectMemory, {}),
    "relabel": (c.RelabelMemory, {}),
    "restore-revision": (c.RestoreRevision, {}),
    "undo": (c.UndoChange, {}),
    "pin": (c.PinMemory, {"pinned": True}),
    "unpin": (c.PinMemory, {"pinned": False}),
    "disable": (c.DisableMemory, {"disabled": True}),
    "enable": (c.DisableMemory, {"disabled": False}),
    "archive": (c.ArchiveMemory, {}),
    "unarchive": (c.UnarchiveMemory, {}),
    "confirm": (c.ConfirmCandidate, {}),
    "dismiss": (c.DismissCandidate, {}),
    "forget": (c.ForgetMemory, {}),
    "move": (c.MoveMemory, {}),
    "link": (c.LinkMemory, {}),
    "unlink": (c.UnlinkMemory, {}),
    "propose": (c.ProposeChange, {}),
}
PROPOSAL_ACTIONS: dict[str, type[c.Command]] = {
    "merge": c.MergeProposal,
    "reject": c.RejectProposal,
    "withdraw": c.WithdrawProposal,
}


class CommandRequest(BaseModel):
    """Any command by its wire name, for callers that prefer one route."""

    model_config = ConfigDict(extra="forbid")

    type: str
    # A NUL or a lone surrogate refused here, as a 422 naming the field (QA: the envelope's
    # own check refused it later, outside the route's handling, as a 500).
    command_id: Annotated[str, AfterValidator(postgres_text)] | None = Field(
        default=None, min_length=COMMAND_ID_LENGTH[0], max_length=COMMAND_ID_LENGTH[1]
    )
    payload: dict[str, Any]


async def remember(request: Request) -> JSONResponse:
    return await submit(request, "RememberMemory", await read_json(request), created=True)


async def item_action(request: Request) -> JSONResponse:
    item_id, action = request.path_params["item_id"], request.path_params["action"]
    if action not in ACTIONS:
        raise ProblemError(
            422,
            "Invalid request",
            f"unknown action {action!r}",
            "invalid",
            known=sorted(ACTIONS),
        )
    model, fixed = ACTIONS[action]
    body = await read_json(request, optional=True)
    return await submit(request, model.__name__, {**body, **fixed, "item_id": item_id})


async def proposal_action(request: Request) -> JSONResponse:
    proposal_id, action = request.path_params["proposal_id"], request.path_params["action"]
    model = PROPOSAL_ACTIONS.get(action)
    if model is None:
        raise ProblemError(
            422,
            "Invalid request",
            f"unknown action {action!r}",
            "invalid",
            known=sorted(PROPOSAL_ACTIONS),
        )
    body = await read_json(request, optional=True)
    return await submit(request, model.__name__, {**body, "proposal_id": proposal_id})


async def forget(request: Request) -> JSONResponse:
    """Forget a memory: its scope as ``?scope=`` or in an optional body, with a ``reason``."""
    body = await read_json(request, optional=True)
    query: dict[str, Any] = {}
    if "scope" in request.query_params:
        query["scope"] = request.query_params["scope"]
    if (version := request.query_params.get("expected_version")) is not None:
        # ASCII digits ("²" and "٣" are digits too), no more than a bigint holds (Python's
        # int() refuses 4,301 digits: QA, a 500).
        if not (version.isascii() and version.isdigit() and len(version) <= 19):
            raise ProblemError(
                422, "Invalid request", "expected_version: a whole number, 0 or more", "invalid"
            )
        query["expected_version"] = int(version)
    if twice := sorted(k for k in query if k in body and body[k] != query[k]):
        raise ProblemError(
            422,
            "Invalid request",
            f"{', '.join(twice)}: given in the query and in the body, differently; give each once",
            "invalid",
        )
    body.update(query)
    return await submit(
        request, "ForgetMemory", {**body, "item_id": request.path_params["item_id"]}
    )


async def clear(request: Request) -> JSONResponse:
    """Forget every memory of one scope (``{"confirm": true, "scope": ...}``)."""
    return await submit(request, "ClearMemories", await read_json(request, optional=True))


async def retract(request: Request) -> JSONResponse:
    """Disable the active memory that holds a key (``{"key": ..., "scope": ...}``)."""
    return await submit(request, "RetractKey", await read_json(request))


async def promote(request: Request) -> JSONResponse:
    """Copy the token's session's lasting memories into its agent's (``kinds`` optional)."""
    return await submit(request, "PromoteSession", await read_json(request, optional=True))


async def fork(request: Request) -> JSONResponse:
    """Copy the memory of the session the token's session forks into it."""
    return await submit(request, "ForkSession", await read_json(request, optional=True))


async def any_command(request: Request) -> JSONResponse:
    try:
        body = CommandRequest.model_validate(await read_json(request))
    except ValidationError as exc:
        raise ProblemError(
            422,
            "Invalid request",
            "the request body is invalid",
            "invalid",
            errors=json_errors(exc),
        ) from exc
    return await submit(request, body.type, body.payload, command_id=body.command_id)


routes = [
    Route("/v1/memories", remember, methods=["POST"]),
    # Before the item routes: these are no item ids.
    Route("/v1/memories/clear", clear, methods=["POST"]),
    Route("/v1/memories/retract", retract, methods=["POST"]),
    *saving_routes,
    Route("/v1/memories/{item_id}/{action}", item_action, methods=["POST"]),
    Route("/v1/memories/{item_id}", forget, methods=["DELETE"]),
    Route("/v1/proposals/{proposal_id}/{action}", proposal_action, methods=["POST"]),
    Route("/v1/session/promote", promote, methods=["POST"]),
    Route("/v1/session/fork", fork, methods=["POST"]),
    Route("/v1/commands", any_command, methods=["POST"]),
]
