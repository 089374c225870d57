"""Routes that save text brought in other forms: a legacy MEMORY.md (seed 000), a lesson
from a thumbs-down (seed 000), recent messages one memory each (seed 004's ingest)."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.routing import Route

from contracts import commands as c
from contracts.envelope import CommandReply
from engram.auth import ScopeError
from engram.billing import ERASING_ONLY
from engram.http import ProblemError, principal_from
from engram.ids import name_id
from services.command.adapters.ingests import first_request, key_hash, key_reused, release
from services.command.answers import json_errors
from services.command.submit import idempotency_key, read_json, send, submit

# A stream's MEMORY.md import is one command id, so that the writer's idempotency record
# keeps it from ever happening twice (the first answer comes back, marked duplicate).
# The fields each route takes (``openapi`` describes them from the command's own).
IMPORT_FIELDS = ("content", "scope", "expected_version")
LESSON_FIELDS = ("note", "run_id", "scope", "expected_version")
INGEST_FIELDS = ("messages", "scope", "related_ids", "run_id", "user_message")
_IMPORT_NAMESPACE = uuid.UUID("3b0c9f4e-5d2a-4e61-8f0b-7c1d2e3f4a5b")


async def import_memory_md(request: Request) -> JSONResponse:
    """A legacy MEMORY.md, imported once per scope as a pinned note (seed 000):
    ``{"content": <the file's text>, "scope": ...}``."""
    body = _only(await read_json(request), *IMPORT_FIELDS)
    payload = {
        "content": _memory_md(body),
        "kind": "note",
        "pinned": True,
        "title": "Imported MEMORY.md",
        "sources": ["MEMORY.md"],
        "scope": body.get("scope", "private"),
    } | ({"expected_version": body["expected_version"]} if "expected_version" in body else {})
    return await submit(
        request,
        "RememberMemory",
        payload,
        created=True,
        id_per_stream=lambda stream: name_id(_IMPORT_NAMESPACE, f"MEMORY.md:{stream}"),
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


async def lesson(request: Request) -> JSONResponse:
    """A thumbs-down's note kept as a lesson (seed 000): a pinned memory of kind lesson, its
    source the run that prompted it (``{"note", "run_id", "scope"}``)."""
    body = _only(await read_json(request), *LESSON_FIELDS)
    note, run_id = body.get("note"), body.get("run_id")
    if not isinstance(note, str) or not note.strip():
        raise ProblemError(422, "Invalid request", "note: the lesson's text, not empty", "invalid")
    if run_id is not None and not isinstance(run_id, str):
        raise ProblemError(422, "Invalid request", "run_id: a string", "invalid")
    payload = {
        "content": note,
        "kind": "lesson",
        "pinned": True,
        "scope": body.get("scope"),
        "expected_version": body.get("expected_version"),
    }
    payload = {k: v for k, v in payload.items() if v is not None}
    return await submit(
        request,
        "RememberMemory",
        payload | ({"sources": [run_id]} if run_id else {}),
        created=True,
        names={"content": "note", "sources": "run_id"},
    )


_INGEST_NAMESPACE = uuid.UUID("9a4f1c2e-7b3d-4e5f-8a6b-1c2d3e4f5a6b")
MAX_MESSAGES = 50


async def ingest(request: Request) -> JSONResponse:
    """Recent messages saved as memories, one each (seed 004's ingest): ``{"messages":
    [{"content", "kind"?, "id"?}], "scope"?, "related_ids"?, "run_id"?, "user_message"?}``
    (each memory gets a ``related`` link to each of ``related_ids``; an agent's run id and
    user message count for every message, as a save's do). Every message is checked before any is
    sent, so a bad one saves nothing; each answer says what became of its message. An
    ``Idempotency-Key`` makes a retry get the first answers."""
    body = _only(await read_json(request), *INGEST_FIELDS)
    messages = body.get("messages")
    if not isinstance(messages, list) or not 1 <= len(messages) <= MAX_MESSAGES:
        raise ProblemError(
            422, "Invalid request", f"messages: a list of 1 to {MAX_MESSAGES}", "invalid"
        )
    shared = {"scope": body.get("scope", "private")} | {
        k: body[k] for k in ("related_ids", "run_id", "user_message") if body.get(k) is not None
    }
    payloads = [_message(i, m, shared) for i, m in enumerate(messages)]
    key = idempotency_key(request)
    if key is None:
        sent = await asyncio.gather(*(send(request, "RememberMemory", p) for p in payloads))
    else:
        sent = await _ingest_once(request, key, payloads)
    results = [_outcome(i, reply) for i, (reply, _) in enumerate(sent)]
    first = sent[0][0].rejection
    if (
        first is not None
        and first.code in ERASING_ONLY
        and all(r.get("code") == first.code for r in results)
    ):
        # a refusal of the org or the caller, not of a message: as every route answers
        raise ProblemError(first.status, first.title, first.detail, first.code)
    return JSONResponse({"results": results})


async def _ingest_once(
    request: Request, key: str, payloads: list[dict[str, Any]]
) -> list[tuple[CommandReply, c.Command]]:
    """An ingest under an Idempotency-Key: one request, however its messages fare. The key
    keeps, per stream, a keyed digest of the request it was first sent with
    (``command.ingest_requests``): sent again with another request, the ingest is refused
    whole before any message is sent (QA: a longer list saved its new messages; and when
    the first request's first message was refused, another request under the key was
    saved). Its first message takes the key itself as its command id, so a save under the
    key, before or after, is another request the writer refuses; it is sent alone first,
    and every message carries the digest."""
    app = request.app.state
    try:
        stream = principal_from(request, app.verifier).stream(payloads[0]["scope"])
    except ScopeError as exc:
        raise ProblemError(403, "Forbidden", str(exc), "forbidden") from exc
    master = app.keystore.master
    digest = master.digest(json.dumps(payloads, sort_keys=True).encode()).hex()
    hashed = key_hash(master, key)
    first_digest, kept = await first_request(app.pool, stream, hashed, digest)
    if first_digest != digest:
        raise key_reused(key, "another ingest")
    ids = [
        key,
        *(name_id(_INGEST_NAMESPACE, f"{key}/{i}") for i in range(1, len(payloads))),
    ]
    first = await send(request, "RememberMemory", payloads[0], command_id=key, ingest_digest=digest)
    rejection = first[0].rejection
    if rejection is not None and rejection.code == "idempotency_key_reused":
        if kept:  # a save used the key: it stays the save's
            await release(app.pool, stream, hashed)
        raise key_reused(key, "another request")
    rest = await asyncio.gather(
        *(
            send(request, "RememberMemory", p, command_id=i, ingest_digest=digest)
            for p, i in zip(payloads[1:], ids[1:], strict=True)
        )
    )
    return [first, *rest]


def _only(body: dict[str, Any], *fields: str) -> dict[str, Any]:
    """The body, when it holds none but these fields (as a command refuses others)."""
    if unknown := sorted(set(body) - set(fields)):
        raise ProblemError(
            422,
            "Invalid request",
            f"unknown field(s) {', '.join(unknown)}: this route takes {', '.join(fields)}",
            "invalid",
        )
    return body


def _message(index: int, message: Any, shared: dict[str, Any]) -> dict[str, Any]:
    """One message's command: its content, kind and id (a source), with the fields every
    message shares (scope, related_ids, and an agent's run_id and user_message)."""
    if not isinstance(message, dict) or not isinstance(message.get("content"), str):
        raise ProblemError(
            422, "Invalid request", f"messages[{index}]: an object with content", "invalid"
        )
    if unknown := sorted(set(message) - {"content", "kind", "id"}):
        raise ProblemError(
            422,
            "Invalid request",
            f"messages[{index}]: unknown field(s) {', '.join(unknown)}: a message takes "
            "content, kind and id; nothing was saved",
            "invalid",
            index=index,
        )
    payload = {"content": message["content"], "kind": message.get("kind", "note"), **shared}
    if message.get("id") is not None:  # a source, checked as one (QA: a number was dropped)
        payload["sources"] = [message["id"]]
    try:
        c.RememberMemory.model_validate(payload)
    except ValidationError as exc:
        raise ProblemError(
            422,
            "Invalid request",
            f"messages[{index}] is invalid; nothing was saved",
            "invalid",
            index=index,
            errors=json_errors(exc),
        ) from exc
    return payload


def _outcome(index: int, reply: CommandReply) -> dict[str, Any]:
    if reply.ok:
        return {"index": index, "ok": True, "command_id": reply.command_id, **reply.result}
    assert reply.rejection is not None
    r = reply.rejection
    return {"index": index, "ok": False, "code": r.code, "status": r.status, "detail": r.detail}


routes = [
    Route("/v1/memories/import-memory-md", import_memory_md, methods=["POST"]),
    Route("/v1/memories/ingest", ingest, methods=["POST"]),
    Route("/v1/lessons", lesson, methods=["POST"]),
]
