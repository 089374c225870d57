"""The command service's OpenAPI describes its plain Starlette routes too, from the
contract models they validate with (review: it listed only /live, /health, /metrics)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from engram.http import PROBLEM
from services.command.handlers import ACTIONS, PROPOSAL_ACTIONS, routes
from services.command.openapi import install_openapi


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    app = FastAPI()
    app.router.routes.extend(routes)
    install_openapi(app)
    return app.openapi()


def concrete(path: str) -> list[str]:
    """A route's paths as the description names them (an action route, one per action)."""
    if path.endswith("/{action}"):
        actions = ACTIONS if path.startswith("/v1/memories") else PROPOSAL_ACTIONS
        return [path.replace("{action}", a) for a in actions]
    return [path]


def test_every_route_and_method_is_described_with_its_token_and_refusals(
    spec: dict[str, Any],
) -> None:
    for route in routes:
        assert not isinstance(route, APIRoute)
        for path in concrete(route.path):
            for method in route.methods or ():
                if method == "HEAD":
                    continue
                operation = spec["paths"][path][method.lower()]
                assert operation["security"] == [{"HTTPBearer": []}], path
                assert PROBLEM in operation["responses"]["4XX"]["content"]
                assert "200" in operation["responses"]
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


def body(spec: dict[str, Any], path: str, method: str = "post") -> dict[str, Any]:
    schema = spec["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]
    if "$ref" in schema:
        return dict(spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]])
    return dict(schema)


def test_a_body_names_what_the_route_takes_and_not_what_its_path_gives(
    spec: dict[str, Any],
) -> None:
    remember = body(spec, "/v1/memories")
    assert remember["required"] == ["content"]
    assert remember["properties"]["content"]["maxLength"] == 4000
    correct = body(spec, "/v1/memories/{item_id}/correct")
    assert "item_id" not in correct["properties"]
    assert set(correct["required"]) == {"content", "base_revision"}
    pin = body(spec, "/v1/memories/{item_id}/pin")
    assert "pinned" not in pin["properties"] and "required" not in pin
    assert not spec["paths"]["/v1/memories/{item_id}/pin"]["post"]["requestBody"]["required"]
    merge = body(spec, "/v1/proposals/{proposal_id}/merge")
    assert "proposal_id" not in merge["properties"]
    forget = spec["paths"]["/v1/memories/{item_id}"]["delete"]
    assert [p["name"] for p in forget["parameters"]] == [
        "item_id",
        "scope",
        "expected_version",
        "Idempotency-Key",
    ]
    forget_body = forget["requestBody"]["content"]["application/json"]["schema"]
    assert {"scope", "expected_version", "reason"} <= set(forget_body["properties"])
    assert "extracted" not in remember["properties"]  # HTTP refuses it (QA)
    assert "5XX" in spec["paths"]["/v1/memories"]["post"]["responses"]
    lesson = body(spec, "/v1/lessons")
    assert set(lesson["properties"]) == {"note", "run_id", "scope", "expected_version"}
    assert lesson["properties"]["note"]["maxLength"] == 4000
    ingest = body(spec, "/v1/memories/ingest")["properties"]["messages"]
    assert (ingest["minItems"], ingest["maxItems"]) == (1, 50)
    assert set(ingest["items"]["properties"]) == {"content", "kind", "id"}


def test_every_schema_it_refers_to_is_there(spec: dict[str, Any]) -> None:
    refs = {r.split("'")[0] for r in str(spec).split("#/components/schemas/")[1:]}
    assert {"RememberMemory", "ClearMemories"} <= refs
    assert refs <= set(spec["components"]["schemas"]), refs - set(spec["components"]["schemas"])
