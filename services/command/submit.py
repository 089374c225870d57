"""How an HTTP route submits its command: validate it (a bad request never reaches the
log), resolve its stream from the token, hand it to this instance's writer or publish it
sealed, and answer with the writer's reply as JSON or problem+json."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.datastructures import State

from contracts import commands as c
from contracts.envelope import COMMAND_ID_LENGTH, CommandEnvelope, CommandReply
from engram.auth import Principal, ScopeError
from engram.crypto import has_sensitive, seal_payload
from engram.http import ProblemError, bearer_token, principal_from
from engram.ids import random_id
from engram.keystore import KeyStore
from services.command.adapters.ingests import ingest_key_used, key_hash, key_reused
from services.command.adapters.replies import ReplyTimeout, Seal
from services.command.answers import json_errors
from services.command.core import new_item_id
from services.command.settle import send_move


async def read_json(request: Request, optional: bool = False) -> dict[str, Any]:
    raw = await request.body()
    if optional and not raw:
        return {}
    try:
        body = await request.json()
    except ValueError as exc:
        raise ProblemError(
            422, "Invalid request", f"the body is not JSON: {exc}", "invalid"
        ) from exc
    except RecursionError as exc:  # the parser's own limit on nesting
        raise ProblemError(
            422,
            "Invalid request",
            "the body is not JSON this service reads: it nests too deep",
            "invalid",
        ) from exc
    if not isinstance(body, dict):
        raise ProblemError(422, "Invalid request", "the body must be a JSON object", "invalid")
    return body


def idempotency_key(request: Request) -> str | None:
    """The request's ``Idempotency-Key`` (it becomes the command id): 8 to 100 characters."""
    key = request.headers.get("idempotency-key")
    shortest, longest = COMMAND_ID_LENGTH
    if key is not None and not shortest <= len(key) <= longest:
        raise ProblemError(
            422,
            "Invalid request",
            f"Idempotency-Key: {shortest} to {longest} characters, not {len(key)}",
            "invalid",
        )
    return key


async def submit(
    request: Request,
    type_: str,
    payload: dict[str, Any],
    *,
    command_id: str | None = None,
    created: bool = False,
    id_per_stream: Callable[[str], str] | None = None,
    names: Mapping[str, str] | None = None,
) -> JSONResponse:
    """``id_per_stream``: the command's id follows from its stream (a once-only command);
    ``names``: the route's own name of a command field, for its errors."""
    reply, command = await send(
        request,
        type_,
        payload,
        command_id=command_id,
        id_per_stream=id_per_stream,
        names=names,
    )
    return _response(reply, created, command)


async def send(
    request: Request,
    type_: str,
    payload: dict[str, Any],
    *,
    command_id: str | None = None,
    id_per_stream: Callable[[str], str] | None = None,
    names: Mapping[str, str] | None = None,
    ingest_digest: str | None = None,
) -> tuple[CommandReply, c.Command]:
    """The writer's reply to the command, and the command as validated (``ingest_digest``:
    the ingest route's, for each message it sends)."""
    app = request.app.state
    principal = principal_from(request, app.verifier)
    model = _model(type_)
    _refuse_reserved(payload)
    if ingest_digest is not None:
        payload = {**payload, "ingest_digest": ingest_digest}
    command, stream = _validated(model, payload, principal, names)
    command_id = await _command_id(request, stream, command_id, id_per_stream, ingest_digest)
    once = id_per_stream is not None  # the id names the act (a scope's import)
    envelope = _envelope(request, type_, command, stream, command_id, once)
    return await _delivered(app, principal, envelope, command), command


def _invalid(detail: str, **extra: Any) -> ProblemError:
    return ProblemError(422, "Invalid command", detail, "invalid", **extra)


def _model(type_: str) -> type[c.Command]:
    """The command's contract model, by its wire name, if HTTP may send it."""
    model = c.COMMANDS.get(type_)
    if model is None:
        raise _invalid(f"unknown command type {type_!r}", known=sorted(c.COMMANDS))
    if model is c.ForgetMoved:
        raise _invalid(
            "ForgetMoved is the command service's own (a move's forget): move with MoveMemory"
        )
    return model


def _refuse_reserved(payload: dict[str, Any]) -> None:
    if payload.get("extracted") is not None:
        raise _invalid(
            "extracted: only the extractor says a memory is its candidate (on engram.commands)"
        )
    if payload.get("ingest_digest") is not None:
        raise _invalid("ingest_digest: only the ingest route sets it")


def _validated(
    model: type[c.Command],
    payload: dict[str, Any],
    principal: Principal,
    names: Mapping[str, str] | None,
) -> tuple[c.Command, str]:
    """The command and its stream."""
    try:  # validate here too: a bad request never reaches the log
        command = model.model_validate(payload)
        stream = principal.stream(command.scope)
    except ValidationError as exc:
        raise _invalid_fields(exc, names) from exc
    except ScopeError as exc:
        raise ProblemError(403, "Forbidden", str(exc), "forbidden") from exc
    return command, stream


def _invalid_fields(exc: ValidationError, names: Mapping[str, str] | None) -> ProblemError:
    errors = [_renamed(e, names or {}) for e in json_errors(exc)]
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"])
    return _invalid(
        f"the command is invalid: {where + ': ' if where else ''}{first['msg']}", errors=errors
    )


def _renamed(error: dict[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """The error, its field named as the route names it."""
    if not error["loc"]:
        return error
    field, *rest = error["loc"]
    return {**error, "loc": [names.get(field, field), *rest]}


async def _command_id(
    request: Request,
    stream: str,
    command_id: str | None,
    id_per_stream: Callable[[str], str] | None,
    ingest_digest: str | None,
) -> str:
    if id_per_stream is not None:
        command_id = id_per_stream(stream)
    elif ingest_digest is None:
        command_id = command_id or idempotency_key(request)
        # An ingest's key is its whole request's, whatever became of its first message:
        # no other command takes it, by the header or by /v1/commands' body (QA, twice).
        app = request.app.state
        if command_id and await ingest_key_used(
            app.pool, stream, key_hash(app.keystore.master, command_id)
        ):
            raise key_reused(command_id, "an ingest")
    return command_id or random_id()


def _envelope(
    request: Request, type_: str, command: c.Command, stream: str, command_id: str, once: bool
) -> CommandEnvelope:
    payload = command.model_dump(mode="json", exclude_defaults=True) | {"scope": command.scope}
    return CommandEnvelope(
        command_id=command_id,
        type=type_,
        token=bearer_token(request),
        stream_id=stream,
        payload=payload,
        once=once,
    )


async def _delivered(
    app: State, principal: Principal, envelope: CommandEnvelope, command: c.Command
) -> CommandReply:
    """The writer's reply, through this instance's writer or Kafka."""
    sealed = _sealer(app.keystore, principal)
    timeout = app.settings.reply_timeout_seconds
    try:
        if isinstance(command, c.MoveMemory):  # answered once settled (settle.py)
            master = app.keystore.master
            return await send_move(
                app.gateway, master, principal, envelope, command, timeout, sealed
            )
        return await app.gateway.send(envelope, timeout, sealed)
    except ReplyTimeout as exc:
        raise ProblemError(
            504,
            "No answer in time",
            "the writer did not answer in time; retry "
            "with the same Idempotency-Key to get the first answer",
            "timeout",
            command_id=envelope.command_id,
        ) from exc


def _sealer(keystore: KeyStore, principal: Principal) -> Seal:
    async def sealed(plain: CommandEnvelope) -> CommandEnvelope:
        text = await _sealed(keystore, principal.org, plain)
        return plain.model_copy(update={"payload": text})

    return sealed


async def _sealed(keystore: KeyStore, org: str, plain: CommandEnvelope) -> dict[str, Any]:
    """Seal the person's text before it touches Kafka, under the command's own key: its
    new item's, or, when it makes none, a key the writer deletes once it has decided (so
    this copy is shredded then; the writer opens text sealed under no other key)."""
    payload = plain.payload
    if not has_sensitive(payload):
        return payload
    key_id = new_item_id(plain.stream_id, plain.command_id)
    keys = await keystore.create_current([(key_id, org)])
    if key_id not in keys:
        raise ProblemError(
            410,
            "Memory forgotten",
            f"this was done once already, as memory {key_id}, since forgotten or moved: it "
            "is not done again"
            if plain.once  # an id that names the act: there is no new one to send
            else "this command id belongs to a forgotten memory; send a new one",
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
    # 201 only for a memory this command made: a keyed save that revised the key's holder,
    # or a repeat, changed or made nothing new.
    made = created and reply.result.get("revision") == 1 and not reply.result.get("duplicate")
    status = 201 if made else 200
    return JSONResponse(body, status_code=status)
