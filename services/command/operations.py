"""The parts of the command routes' OpenAPI operations (``openapi.py``): an operation with
its token, Idempotency-Key and refusals, and the bodies and parameters it takes."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from contracts import commands as c
from contracts.envelope import COMMAND_ID_LENGTH
from engram.http import PROBLEM_RESPONSES

REF = "#/components/schemas/{model}"
SECURITY: list[dict[str, list[str]]] = [{"HTTPBearer": []}]
DESCRIPTION = (
    "The command's answer: its `command_id`, the ids of the `events` it wrote and what it "
    "did (`item_id`, `revision`, `status`, a forget's `erased` receipt, `duplicate` for a "
    "repeat that gets the first answer, ...)."
)
ANSWER: dict[str, Any] = {
    "description": DESCRIPTION,
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["command_id", "events"],
                "properties": {
                    "command_id": {"type": "string"},
                    "events": {"type": "array", "items": {"type": "string"}},
                },
                "additionalProperties": True,
            }
        }
    },
}
IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "Becomes the command id: a retry with it gets the first answer.",
    "schema": {
        "type": "string",
        "minLength": COMMAND_ID_LENGTH[0],
        "maxLength": COMMAND_ID_LENGTH[1],
    },
}


def operation(
    summary: str,
    body: dict[str, Any],
    creates: bool = False,
    *,
    parameters: Sequence[dict[str, Any]] = (),
    body_required: bool = True,
) -> dict[str, Any]:
    responses: dict[str, Any] = {"200": ANSWER}
    if creates:
        responses["201"] = ANSWER | {"description": f"A new memory. {DESCRIPTION}"}
    responses.update({str(status): answer for status, answer in PROBLEM_RESPONSES.items()})
    return {
        "summary": summary,
        "security": SECURITY,
        "parameters": [*parameters, IDEMPOTENCY_KEY],
        "requestBody": {"required": body_required, "content": {"application/json": body}},
        "responses": responses,
    }


def ref(name: str) -> dict[str, Any]:
    """A command's schema as a body, whole."""
    return {"schema": {"$ref": REF.format(model=name)}}


def trimmed_body(schemas: dict[str, Any], name: str, drop: tuple[str, ...]) -> dict[str, Any]:
    """A command's schema as a body: without the fields the path (or route) gives."""
    schema = copy.deepcopy(schemas[name])
    for field in drop:
        schema["properties"].pop(field, None)
    schema["required"] = still_required(schemas[name], drop)
    if not schema["required"]:
        del schema["required"]
    return {"schema": schema}


def still_required(schema: dict[str, Any], drop: tuple[str, ...]) -> list[str]:
    """The fields a body must have once the path (or route) gives those it drops."""
    return [f for f in schema.get("required", []) if f not in drop]


def fields(
    names: tuple[str, ...],
    properties: dict[str, Any],
    required: tuple[str, ...] = ("content",),
    **renamed: str,
) -> dict[str, Any]:
    """A saving route's body: its fields, described as the command's fields it fills."""
    return {
        "schema": {
            "type": "object",
            "additionalProperties": False,
            "required": list(required),
            "properties": {f: properties[renamed.get(f, f)] for f in names},
        }
    }


def action_summary(model: type[c.Command], action: str, fixed: dict[str, Any]) -> str:
    doc = (model.__doc__ or action).strip().splitlines()[0]
    return f"{doc} ({', '.join(f'{k}={v}' for k, v in fixed.items())})" if fixed else doc


def path(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def query(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema}
