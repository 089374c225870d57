"""Every error a service answers is problem+json: routes and methods it does not have,
bodies over the limit (declared or chunked), its own errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from unittest.mock import ANY

import asyncpg
import httpx
from fastapi import APIRouter, FastAPI, Request
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from engram.http import (
    MAX_BODY_BYTES,
    PROBLEM,
    ProblemError,
    http_problem,
    install_problem_handlers,
)
from services.command.submit import read_json


class Query(BaseModel):
    query: str


def service() -> FastAPI:
    app = FastAPI()
    install_problem_handlers(app)

    @app.post("/raw")
    async def raw(request: Request) -> dict[str, int]:  # reads the body itself
        return {"read": len(await request.body())}

    @app.post("/model")
    async def model(body: Query) -> dict[str, int]:  # FastAPI parses the body
        return {"read": len(body.query)}

    @app.post("/command")
    async def command(request: Request) -> dict[str, int]:  # as the command service reads
        return {"fields": len(await read_json(request))}

    @app.get("/setting")
    async def read_setting() -> dict[str, int]:
        return {"value": 1}

    @app.put("/setting")
    async def write_setting() -> dict[str, int]:
        return {"value": 2}

    included = APIRouter()  # as recall's routes are (QA: its 405 named GET alone)

    @included.get("/policy")
    async def read_policy() -> dict[str, int]:
        return {"value": 1}

    @included.put("/policy")
    async def write_policy() -> dict[str, int]:
        return {"value": 2}

    app.include_router(included)

    @app.get("/database-away")
    async def database_away() -> None:  # as a route meets a restarting Postgres
        raise asyncpg.CannotConnectNowError("the database system is starting up")

    @app.get("/bug")
    async def bug() -> None:
        raise KeyError("nobody handled this")

    @app.post("/conflict")
    async def conflict() -> None:  # details named like the problem's own members
        raise ProblemError(
            409, "Conflict", "it is archived", "conflict", status="archived", title="x"
        )

    return app


def client() -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=service()), base_url="http://t")


async def test_an_unknown_route_and_a_wrong_method_are_problems() -> None:
    async with client() as http:
        missing = await http.get("/v1/nothing")
        wrong = await http.put("/raw")
    assert missing.status_code == 404 and missing.headers["content-type"] == PROBLEM
    assert missing.json()["code"] == "not_found"
    assert missing.json()["detail"] == "no route GET /v1/nothing"
    assert wrong.status_code == 405 and wrong.headers["content-type"] == PROBLEM
    assert wrong.headers["allow"] == "POST"
    assert wrong.json() | {"type": ""} == {
        "type": "",
        "title": "Method not allowed",
        "status": 405,
        "detail": "/raw takes POST, not PUT",
        "code": "method_not_allowed",
    }


async def _chunks(total: int) -> AsyncIterator[bytes]:
    for _ in range(total // 65536):
        yield b"x" * 65536


async def test_a_body_over_the_limit_is_refused_declared_or_chunked() -> None:
    big = b'{"query": "' + b"x" * MAX_BODY_BYTES + b'"}'
    async with client() as http:
        answers = [
            await http.post("/raw", content=big),
            await http.post("/model", content=big),
            await http.post("/raw", content=_chunks(2 * MAX_BODY_BYTES)),  # no Content-Length
            await http.post("/model", content=_chunks(2 * MAX_BODY_BYTES)),
        ]
        fits = await http.post("/model", json={"query": "x" * 4000})
    for answer in answers:
        assert answer.status_code == 413 and answer.headers["content-type"] == PROBLEM
        assert answer.json()["code"] == "too_large"
        assert answer.json()["detail"] == f"the body is over {MAX_BODY_BYTES} bytes"
    assert fits.status_code == 200 and fits.json() == {"read": 4000}


async def test_details_named_like_the_problems_members_never_change_them() -> None:
    async with client() as http:
        r = await http.post("/conflict")
    assert r.status_code == 409
    assert (r.json()["status"], r.json()["title"], r.json()["code"]) == (
        409,
        "Conflict",
        "conflict",
    )


async def test_a_body_nested_too_deep_to_parse_is_422_not_400_or_500() -> None:
    deep = b'{"query": "x", "tags": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    async with client() as http:
        parsed_by_fastapi = await http.post("/model", content=deep)
        read_by_a_route = await http.post("/command", content=deep)
        fine = await http.post("/command", json={"query": "x", "tags": [[[]]]})
    for answer in (parsed_by_fastapi, read_by_a_route):
        assert answer.status_code == 422 and answer.headers["content-type"] == PROBLEM
        assert answer.json()["code"] == "invalid"
    assert "nests too deep" in read_by_a_route.json()["detail"]
    assert fine.json() == {"fields": 2}
    # FastAPI answers some bodies it cannot parse with a bare 400 (the recall service did,
    # for 1,000 levels): that is a bad body too.
    unparsed = http_problem(StarletteHTTPException(400, "There was an error parsing the body"))
    assert unparsed.status_code == 422
    assert b"there was an error parsing the body" in unparsed.body


async def test_a_wrong_method_names_every_method_the_path_takes() -> None:
    async with client() as http:
        wrong = await http.patch("/setting")
    assert wrong.status_code == 405
    assert wrong.headers["allow"] == "GET, PUT"
    assert wrong.json()["detail"] == "/setting takes GET, PUT, not PATCH"
    async with client() as http:
        routed = await http.delete("/policy")
    assert (routed.status_code, routed.headers["allow"]) == (405, "GET, PUT")


def test_recalls_openapi_gives_its_refusals_as_problems() -> None:
    """QA: it said FastAPI's 422 body ({"detail": [...]}, application/json), which no
    Engram service sends."""
    from services.recall.handlers import router

    app = FastAPI()
    app.include_router(router)
    spec = app.openapi()
    answers = spec["paths"]["/v1/recall"]["post"]["responses"]
    assert "422" not in answers and "HTTPValidationError" not in str(spec)
    assert PROBLEM in answers["4XX"]["content"]


def test_recalls_openapi_names_the_bearer_token_its_routes_need() -> None:
    """Review: it declared no security scheme, so a generated client sent no token."""
    from services.recall.handlers import router

    app = FastAPI()
    app.include_router(router)
    spec = app.openapi()
    assert spec["components"]["securitySchemes"]["HTTPBearer"] == {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": ANY,
    }
    for path, operations in spec["paths"].items():
        for operation in operations.values():
            assert operation["security"] == [{"HTTPBearer": []}], path


async def test_a_fault_of_the_moment_is_a_503_to_retry_and_a_bug_a_500() -> None:
    """Chaos QA: with Postgres away every route answered 500 internal, with a traceback in
    the log, where the README promises a 503 to retry. And the 503 is answered where the
    app goes on (QA: answered in ServerErrorMiddleware, the error was raised again, and
    the server closed the keep-alive connection): the transport raises nothing here."""
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=service()), base_url="http://t"
    ) as http:
        away = await http.get("/database-away")
    transport = httpx.ASGITransport(app=service(), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        bug = await http.get("/bug")
    assert (away.status_code, away.headers["retry-after"]) == (503, "1")
    assert away.headers["content-type"] == PROBLEM and away.json()["code"] == "unavailable"
    assert "incident" not in away.json()
    assert (bug.status_code, bug.json()["code"]) == (500, "internal")
    assert "incident" in bug.json()
