"""On-off fields of recall's requests take JSON's true and false only, and number fields
JSON numbers only: "no", "false", 0 or 1 for an on-off field, true or "500" for a number,
is refused with 422 problem+json naming the field, before anything is read (as the
commands and ``PUT /v1/session`` already do)."""

from __future__ import annotations

import types
import typing
from typing import Any

import pytest
from fastapi.routing import APIRoute
from pydantic import BaseModel, StrictBool

from contracts.orgs import OrgPolicy
from contracts.recall import RecallRequest
from services.recall.handlers import router
from tests.unit.test_recall_request_text import refused

# (method, path, body, the refused field)
CASES: list[tuple[str, str, dict[str, Any], str]] = [
    ("POST", "/v1/recall", {"query": "x", "use_memory": "no"}, "use_memory"),
    ("POST", "/v1/recall", {"query": "x", "use_memory": 0}, "use_memory"),
    ("POST", "/v1/recall", {"query": "x", "preview": 1}, "preview"),
    ("POST", "/v1/recall", {"query": "x", "preview": "true"}, "preview"),
    ("PUT", "/v1/policy", {"agent_memory": "false"}, "agent_memory"),
    ("PUT", "/v1/policy", {"session_generate": 0}, "session_generate"),
    ("PUT", "/v1/policy", {"session_use": "yes"}, "session_use"),
    ("PUT", "/v1/session", {"use": 1}, "use"),
    ("PUT", "/v1/session", {"generate": "off"}, "generate"),
    # Numbers likewise: true had become a limit of 1, "500" a limit of 500.
    ("POST", "/v1/recall", {"query": "x", "max_items": True}, "max_items"),
    ("POST", "/v1/recall", {"query": "x", "max_chars": "500"}, "max_chars"),
    ("POST", "/v1/search", {"query": "x", "limit": True}, "limit"),
    ("PUT", "/v1/policy", {"max_items": True}, "max_items"),
    ("PUT", "/v1/policy", {"max_chars": "500"}, "max_chars"),
    ("PUT", "/v1/policy", {"keep_revisions": "3"}, "keep_revisions"),
    ("PUT", "/v1/policy", {"max_candidates_per_run": False}, "max_candidates_per_run"),
]


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    CASES,
    ids=[f"{m} {p} {f}={b[f]!r}" for m, p, b, f in CASES],
)
async def test_an_on_off_field_takes_true_or_false_only(
    method: str, path: str, body: dict[str, Any], field: str
) -> None:
    r = await refused(method, path, body, session="s1")
    assert [tuple(e["loc"]) for e in r.json()["errors"]] == [("body", field)]


def test_true_and_false_themselves_are_taken() -> None:
    request = RecallRequest.model_validate_json(
        '{"query": "x", "use_memory": false, "preview": true}'
    )
    assert (request.use_memory, request.preview) == (False, True)
    policy = OrgPolicy.model_validate_json('{"agent_memory": false, "session_use": true}')
    assert (policy.agent_memory, policy.session_use) == (False, True)


def _boolean(annotation: Any) -> bool:
    if annotation is bool:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_boolean(a) for a in typing.get_args(annotation))
    return False


def _strict(model: type[BaseModel], name: str) -> bool:
    field = model.model_fields[name]
    return (
        bool(model.model_config.get("strict"))
        or any(getattr(m, "strict", False) for m in field.metadata)
        or field.annotation == StrictBool
    )


def test_every_on_off_field_a_recall_route_takes_is_strict() -> None:
    """A new boolean in a recall request body must be a StrictBool (or its model strict)."""
    loose = []
    for route in (r for r in router.routes if isinstance(r, APIRoute)):
        for body in route.dependant.body_params:
            model = body.field_info.annotation
            assert isinstance(model, type) and issubclass(model, BaseModel)
            loose += [
                f"{route.path} {name}"
                for name, f in model.model_fields.items()
                if _boolean(f.annotation) and not _strict(model, name)
            ]
    assert loose == []
