"""The command service's OpenAPI description.

Its command routes are plain Starlette routes (``handlers.py``), which FastAPI does not
describe, so this builds their description from what the routes themselves use: the
contract models each route validates its body with (``contracts.commands``), the
actions' tables (``handlers.ACTIONS``, ``PROPOSAL_ACTIONS``) and the fields the saving
routes take (``saving``). A route or a field added there appears here without an edit.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI
from pydantic.json_schema import models_json_schema

from contracts import commands as c
from contracts.envelope import COMMAND_ID_LENGTH
from engram.http import BEARER, PROBLEM_RESPONSES
from services.command import saving
from services.command.handlers import ACTIONS, PROPOSAL_ACTIONS, CommandRequest

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


def install_openapi(app: FastAPI) -> None:
    """``app.openapi()`` (``/openapi.json``) describes the command routes too."""
    described = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = described()
            paths, schemas = command_paths()
            spec["paths"].update(paths)
            components = spec.setdefault("components", {})
            components.setdefault("schemas", {}).update(schemas)
            components.setdefault("securitySchemes", {})["HTTPBearer"] = BEARER.model.model_dump(
                mode="json", by_alias=True, exclude_none=True
            )
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def command_paths() -> tuple[dict[str, Any], dict[str, Any]]:
    """The command routes' OpenAPI paths, and the schemas they refer to."""
    models: list[type[c.Command]] = [m for m, _ in ACTIONS.values()]
    models += [*PROPOSAL_ACTIONS.values(), c.RememberMemory, c.ClearMemories, c.RetractKey]
    models += [c.PromoteSession, c.ForkSession]
    _, defs = models_json_schema([(m, "validation") for m in set(models)], ref_template=REF)
    schemas: dict[str, Any] = defs.get("$defs", {})
    # Only the extractor, on engram.commands, says a save was extracted; HTTP refuses it.
    schemas["RememberMemory"]["properties"].pop("extracted", None)
    schemas["RememberMemory"]["properties"].pop("ingest_digest", None)  # the ingest route's
    remember = schemas["RememberMemory"]["properties"]
    paths: dict[str, Any] = {
        "/v1/memories": {
            "post": _operation("Remember a memory", _ref("RememberMemory"), creates=True)
        },
        "/v1/memories/retract": {
            "post": _operation(
                "Disable the active memory that holds a key (409: none does)", _ref("RetractKey")
            )
        },
        "/v1/memories/clear": {
            "post": _operation("Forget every memory of one scope", _ref("ClearMemories"))
        },
        "/v1/memories/{item_id}": {
            "delete": _operation(
                "Forget a memory: its content is erased everywhere, a tombstone stays",
                # scope and expected_version: in the query or the body, each once
                _body(schemas, "ForgetMemory", drop=("item_id",)),
                parameters=[
                    _path("item_id"),
                    _query("scope", remember["scope"]),
                    _query(
                        "expected_version",
                        schemas["ForgetMemory"]["properties"]["expected_version"],
                    ),
                ],
                body_required=False,
            )
        },
        "/v1/session/promote": {
            "post": _operation(
                "Copy the session's lasting memories into its agent's",
                _ref("PromoteSession"),
                body_required=False,
            )
        },
        "/v1/session/fork": {
            "post": _operation(
                "Copy the forked session's memory into this session",
                _ref("ForkSession"),
                body_required=False,
            )
        },
        "/v1/commands": {
            "post": _operation(
                "Any command by its wire name (`type`), its fields in `payload`",
                {"schema": CommandRequest.model_json_schema(ref_template=REF)},
            )
        },
        "/v1/memories/import-memory-md": {
            "post": _operation(
                "Import a legacy MEMORY.md once per scope, as a pinned note",
                _fields(saving.IMPORT_FIELDS, remember),
                creates=True,
            )
        },
        "/v1/lessons": {
            "post": _operation(
                "Keep a thumbs-down's note as a pinned lesson",
                _fields(
                    saving.LESSON_FIELDS,
                    remember,
                    note="content",
                    run_id="run_id",
                    required=("note",),
                ),
                creates=True,
            )
        },
        "/v1/memories/ingest": {
            "post": _operation(
                "Save recent messages, one memory each; every one is checked first",
                _fields(saving.INGEST_FIELDS, _ingest_properties(remember), required=("messages",)),
            )
        },
    }
    for action, (model, fixed) in ACTIONS.items():
        drop = ("item_id", *fixed)
        paths[f"/v1/memories/{{item_id}}/{action}"] = {
            "post": _operation(
                _summary(model, action, fixed),
                _body(schemas, model.__name__, drop=drop),
                parameters=[_path("item_id")],
                body_required=bool(_required(schemas[model.__name__], drop)),
            )
        }
    for action, model in PROPOSAL_ACTIONS.items():
        paths[f"/v1/proposals/{{proposal_id}}/{action}"] = {
            "post": _operation(
                _summary(model, action, {}),
                _body(schemas, model.__name__, drop=("proposal_id",)),
                parameters=[_path("proposal_id")],
                body_required=bool(_required(schemas[model.__name__], ("proposal_id",))),
            )
        }
    return paths, schemas


def _operation(
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


def _ref(name: str) -> dict[str, Any]:
    """A command's schema as a body, whole."""
    return {"schema": {"$ref": REF.format(model=name)}}


def _body(schemas: dict[str, Any], name: str, drop: tuple[str, ...]) -> dict[str, Any]:
    """A command's schema as a body: without the fields the path (or route) gives."""
    schema = copy.deepcopy(schemas[name])
    for field in drop:
        schema["properties"].pop(field, None)
    schema["required"] = _required(schemas[name], drop)
    if not schema["required"]:
        del schema["required"]
    return {"schema": schema}


def _required(schema: dict[str, Any], drop: tuple[str, ...]) -> list[str]:
    return [f for f in schema.get("required", []) if f not in drop]


def _fields(
    fields: tuple[str, ...],
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
            "properties": {f: properties[renamed.get(f, f)] for f in fields},
        }
    }


def _ingest_properties(remember: dict[str, Any]) -> dict[str, Any]:
    message = {
        "type": "object",
        "additionalProperties": False,
        "required": ["content"],
        "properties": {
            "content": remember["content"],
            "kind": remember["kind"],
            "id": {"type": "string", "description": "The message's id, kept as its source"},
        },
    }
    return remember | {
        "messages": {
            "type": "array",
            "minItems": 1,
            "maxItems": saving.MAX_MESSAGES,
            "items": message,
        }
    }


def _summary(model: type[c.Command], action: str, fixed: dict[str, Any]) -> str:
    doc = (model.__doc__ or action).strip().splitlines()[0]
    return f"{doc} ({', '.join(f'{k}={v}' for k, v in fixed.items())})" if fixed else doc


def _path(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def _query(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema}
