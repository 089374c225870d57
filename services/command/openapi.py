"""The command service's OpenAPI description.

Its command routes are plain Starlette routes (``handlers.py``), which FastAPI does not
describe, so this builds their description from what the routes themselves use: the
contract models each route validates its body with (``contracts.commands``), the
actions' tables (``handlers.ACTIONS``, ``PROPOSAL_ACTIONS``) and the fields the saving
routes take (``saving``). A route or a field added there appears here without an edit.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic.json_schema import models_json_schema

from contracts import commands as c
from engram.http import BEARER
from services.command import operations as op
from services.command import saving
from services.command.handlers import ACTIONS, PROPOSAL_ACTIONS, CommandRequest


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
    schemas = _schemas()
    remember = schemas["RememberMemory"]["properties"]
    paths = {
        **_memory_paths(schemas),
        **_session_paths(),
        "/v1/commands": {"post": _any_command()},
        **_saving_paths(remember),
        **_action_paths(schemas),
    }
    return paths, schemas


def _schemas() -> dict[str, Any]:
    """The schemas of the commands the routes validate with, as HTTP takes them."""
    models: list[type[c.Command]] = [m for m, _ in ACTIONS.values()]
    models += [*PROPOSAL_ACTIONS.values(), c.RememberMemory, c.ClearMemories, c.RetractKey]
    models += [c.PromoteSession, c.ForkSession]
    _, defs = models_json_schema([(m, "validation") for m in set(models)], ref_template=op.REF)
    schemas: dict[str, Any] = defs.get("$defs", {})
    # Only the extractor, on engram.commands, says a save was extracted; HTTP refuses it.
    schemas["RememberMemory"]["properties"].pop("extracted", None)
    schemas["RememberMemory"]["properties"].pop("ingest_digest", None)  # the ingest route's
    return schemas


def _memory_paths(schemas: dict[str, Any]) -> dict[str, Any]:
    return {
        "/v1/memories": {
            "post": op.operation("Remember a memory", op.ref("RememberMemory"), creates=True)
        },
        "/v1/memories/retract": {
            "post": op.operation(
                "Disable the active memory that holds a key (409: none does)",
                op.ref("RetractKey"),
            )
        },
        "/v1/memories/clear": {
            "post": op.operation("Forget every memory of one scope", op.ref("ClearMemories"))
        },
        "/v1/memories/{item_id}": {"delete": _forget(schemas)},
    }


def _forget(schemas: dict[str, Any]) -> dict[str, Any]:
    remember = schemas["RememberMemory"]["properties"]
    forget = schemas["ForgetMemory"]["properties"]
    return op.operation(
        "Forget a memory: its content is erased everywhere, a tombstone stays",
        # scope and expected_version: in the query or the body, each once
        op.trimmed_body(schemas, "ForgetMemory", drop=("item_id",)),
        parameters=[
            op.path("item_id"),
            op.query("scope", remember["scope"]),
            op.query("expected_version", forget["expected_version"]),
        ],
        body_required=False,
    )


def _session_paths() -> dict[str, Any]:
    return {
        "/v1/session/promote": {
            "post": op.operation(
                "Copy the session's lasting memories into its agent's",
                op.ref("PromoteSession"),
                body_required=False,
            )
        },
        "/v1/session/fork": {
            "post": op.operation(
                "Copy the forked session's memory into this session",
                op.ref("ForkSession"),
                body_required=False,
            )
        },
    }


def _any_command() -> dict[str, Any]:
    return op.operation(
        "Any command by its wire name (`type`), its fields in `payload`",
        {"schema": CommandRequest.model_json_schema(ref_template=op.REF)},
    )


def _saving_paths(remember: dict[str, Any]) -> dict[str, Any]:
    """The routes of ``saving``, which take fields of their own."""
    lesson = op.fields(
        saving.LESSON_FIELDS, remember, note="content", run_id="run_id", required=("note",)
    )
    ingest = op.fields(saving.INGEST_FIELDS, _ingest_properties(remember), required=("messages",))
    return {
        "/v1/memories/import-memory-md": {
            "post": op.operation(
                "Import a legacy MEMORY.md once per scope, as a pinned note",
                op.fields(saving.IMPORT_FIELDS, remember),
                creates=True,
            )
        },
        "/v1/lessons": {
            "post": op.operation(
                "Keep a thumbs-down's note as a pinned lesson", lesson, creates=True
            )
        },
        "/v1/memories/ingest": {
            "post": op.operation(
                "Save recent messages, one memory each; every one is checked first", ingest
            )
        },
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


def _action_paths(schemas: dict[str, Any]) -> dict[str, Any]:
    """One route an action: a memory's (``handlers.ACTIONS``), then a proposal's."""
    memories = {
        f"/v1/memories/{{item_id}}/{action}": {
            "post": _action(schemas, "item_id", action, model, fixed)
        }
        for action, (model, fixed) in ACTIONS.items()
    }
    proposals = {
        f"/v1/proposals/{{proposal_id}}/{action}": {
            "post": _action(schemas, "proposal_id", action, model, {})
        }
        for action, model in PROPOSAL_ACTIONS.items()
    }
    return memories | proposals


def _action(
    schemas: dict[str, Any],
    target: str,
    action: str,
    model: type[c.Command],
    fixed: dict[str, Any],
) -> dict[str, Any]:
    """An action's operation: its body without the target the path names or the fields
    the action fixes."""
    drop = (target, *fixed)
    return op.operation(
        op.action_summary(model, action, fixed),
        op.trimmed_body(schemas, model.__name__, drop=drop),
        parameters=[op.path(target)],
        body_required=bool(op.still_required(schemas[model.__name__], drop)),
    )
