"""HTTP routes of the command service: decode -> hand over or publish -> await the answer.

Plain Starlette routes, not FastAPI's: each parses and validates its own body and builds
its own response, so FastAPI's dependency and routing layers only cost time (about 80 us
of CPU a request, a third of the service's HTTP handling; measured on an invalid
remember). Errors still go through the app's problem+json handlers."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.routing import Route

from contracts import commands as c
from contracts.envelope import CommandEnvelope, CommandReply
from engram.auth import ScopeError
from engram.crypto import SENSITIVE_FIELDS, seal_payload
from engram.http import ProblemError, bearer_token, principal_from
from engram.keystore import KeyStore
from services.command.adapters.replies import ReplyTimeout
from services.command.adapters.writer import json_errors
from services.command.core import new_item_id

ACTIONS: dict[str, tuple[type[c.Command], dict[str, Any]]] = {
    "correct": (c.CorrectMemory, {}),
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
    command_id: str | None = Field(default=None, min_length=8, max_length=100)
    payload: dict[str, Any]


async def remember(request: Request) -> JSONResponse:
    return await _submit(request, "RememberMemory", await _json(request), created=True)


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
    body = await _json(request, optional=True)
    return await _submit(request, model.__name__, {**body, **fixed, "item_id": item_id})


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
    body = await _json(request, optional=True)
    return await _submit(request, model.__name__, {**body, "proposal_id": proposal_id})


async def forget(request: Request) -> JSONResponse:
    item_id, scope = request.path_params["item_id"], request.query_params.get("scope", "private")
    return await _submit(request, "ForgetMemory", {"item_id": item_id, "scope": scope})


# A stream's MEMORY.md import is one command id, so that the writer's idempotency record
# keeps it from ever happening twice (the first answer comes back, marked duplicate).
_IMPORT_NAMESPACE = uuid.UUID("3b0c9f4e-5d2a-4e61-8f0b-7c1d2e3f4a5b")


async def import_memory_md(request: Request) -> JSONResponse:
    """A legacy MEMORY.md, imported once per scope as a pinned note (seed 000):
    ``{"content": <the file's text>, "scope": ...}``."""
    body = await _json(request)
    payload = {
        "content": _memory_md(body),
        "kind": "note",
        "pinned": True,
        "title": "Imported MEMORY.md",
        "sources": ["MEMORY.md"],
        "scope": body.get("scope", "private"),
    }
    return await _submit(
        request,
        "RememberMemory",
        payload,
        created=True,
        id_per_stream=lambda stream: str(uuid.uuid5(_IMPORT_NAMESPACE, f"MEMORY.md:{stream}")),
    )


def _memory_md(body: dict[str, Any]) -> str:
    """The file's text, or a 422 that says what is wrong with it (the scope is checked as
    every command's is)."""
    content = body.get("content")
    if not isinstance(content, str) or not content.strip():
        raise ProblemError(422, "Invalid request", "content: the file's text, not empty", "invalid")
    if len(content) > c.MAX_CONTENT:
        raise ProblemError(
            422,
            "Invalid request",
            f"MEMORY.md holds {len(content)} characters and one memory at most "
            f"{c.MAX_CONTENT}: shorten it, or save its parts as separate memories",
            "invalid",
        )
    return content


async def clear(request: Request) -> JSONResponse:
    """Forget every memory of one scope (``{"confirm": true, "scope": ...}``)."""
    return await _submit(request, "ClearMemories", await _json(request, optional=True))


async def promote(request: Request) -> JSONResponse:
    """Copy the token's session's lasting memories into its agent's (``kinds`` optional)."""
    return await _submit(request, "PromoteSession", await _json(request, optional=True))


async def fork(request: Request) -> JSONResponse:
    """Copy the memory of the session the token's session forks into it."""
    return await _submit(request, "ForkSession", await _json(request, optional=True))


async def any_command(request: Request) -> JSONResponse:
    try:
        body = CommandRequest.model_validate(await _json(request))
    except ValidationError as exc:
        raise ProblemError(
            422,
            "Invalid request",
            "the request body is invalid",
            "invalid",
            errors=json_errors(exc),
        ) from exc
    return await _submit(request, body.type, body.payload, command_id=body.command_id)


routes = [
    Route("/v1/memories", remember, methods=["POST"]),
    # Before the item routes: these are no item ids.
    Route("/v1/memories/clear", clear, methods=["POST"]),
    Route("/v1/memories/import-memory-md", import_memory_md, methods=["POST"]),
    Route("/v1/memories/{item_id}/{action}", item_action, methods=["POST"]),
    Route("/v1/memories/{item_id}", forget, methods=["DELETE"]),
    Route("/v1/proposals/{proposal_id}/{action}", proposal_action, methods=["POST"]),
    Route("/v1/session/promote", promote, methods=["POST"]),
    Route("/v1/session/fork", fork, methods=["POST"]),
    Route("/v1/commands", any_command, methods=["POST"]),
]


async def _json(request: Request, optional: bool = False) -> dict[str, Any]:
    raw = await request.body()
    if optional and not raw:
        return {}
    try:
        body = await request.json()
    except ValueError as exc:
        raise ProblemError(
            422, "Invalid request", f"the body is not JSON: {exc}", "invalid"
        ) from exc
    if not isinstance(body, dict):
        raise ProblemError(422, "Invalid request", "the body must be a JSON object", "invalid")
    return body


async def _submit(
    request: Request,
    type_: str,
    payload: dict[str, Any],
    *,
    command_id: str | None = None,
    created: bool = False,
    id_per_stream: Callable[[str], str] | None = None,
) -> JSONResponse:
    """``id_per_stream``: the command's id follows from its stream (a once-only command)."""
    app = request.app.state
    principal = principal_from(request, app.verifier)
    model = c.COMMANDS.get(type_)
    if model is None:
        raise ProblemError(
            422,
            "Invalid command",
            f"unknown command type {type_!r}",
            "invalid",
            known=sorted(c.COMMANDS),
        )
    try:  # validate here too: a bad request never reaches the log
        command = model.model_validate(payload)
        stream = principal.stream(command.scope)
    except ValidationError as exc:
        raise ProblemError(
            422,
            "Invalid command",
            "the command is invalid",
            "invalid",
            errors=json_errors(exc),
        ) from exc
    except ScopeError as exc:
        raise ProblemError(403, "Forbidden", str(exc), "forbidden") from exc
    if id_per_stream is not None:
        command_id = id_per_stream(stream)
    command_id = command_id or request.headers.get("idempotency-key") or str(uuid.uuid4())
    payload = command.model_dump(mode="json", exclude_defaults=True) | {"scope": command.scope}
    envelope = CommandEnvelope(
        command_id=command_id,
        type=type_,
        token=bearer_token(request),
        stream_id=stream,
        payload=payload,
    )

    async def sealed(plain: CommandEnvelope) -> CommandEnvelope:
        text = await _sealed(app.keystore, principal.org, command, command_id, plain.payload)
        return plain.model_copy(update={"payload": text})

    try:
        reply = await app.gateway.send(envelope, app.settings.reply_timeout_seconds, sealed)
    except ReplyTimeout as exc:
        raise ProblemError(
            504,
            "No answer in time",
            "the writer did not answer in time; retry "
            "with the same Idempotency-Key to get the first answer",
            "timeout",
            command_id=envelope.command_id,
        ) from exc
    return _response(reply, created, command)


async def _sealed(
    keystore: KeyStore, org: str, command: c.Command, command_id: str, payload: dict[str, Any]
) -> dict[str, Any]:
    """Seal the person's text before it touches Kafka, so a forget shreds this copy too:
    text for an existing item goes under that item's key, a new item's under its own."""
    if not any(isinstance(payload.get(f), str) for f in SENSITIVE_FIELDS):
        return payload
    key_id = getattr(command, "item_id", None)
    keys = await keystore.get_many({key_id}) if key_id else {}
    if key_id is None or key_id not in keys:
        key_id = new_item_id(command_id)
        keys = await keystore.create_many([(key_id, org)])
        if key_id not in keys:
            raise ProblemError(
                410,
                "Memory forgotten",
                "this command id belongs to a forgotten memory; send a new one",
                "forgotten",
            )
    return seal_payload(payload, key_id, keys[key_id])


def _response(reply: CommandReply, created: bool, command: c.Command) -> JSONResponse:
    if not reply.ok and reply.rejection is not None:
        r = reply.rejection
        extra = dict(r.extra)
        if r.code == "conflict" and isinstance(text := getattr(command, "content", None), str):
            extra["content"] = text  # the caller's unsaved text, so nothing is lost
        raise ProblemError(
            r.status, r.title, r.detail, r.code, command_id=reply.command_id, **extra
        )
    body = {"command_id": reply.command_id, **reply.result, "events": reply.events}
    status = 201 if created and not reply.result.get("duplicate") else 200
    return JSONResponse(body, status_code=status)
