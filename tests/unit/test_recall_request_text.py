"""Text a recall request sends to PostgreSQL cannot hold a NUL (its ``text`` type has no
room for one): every such field and parameter, on every route, is refused with 422
problem+json naming it, before anything is read; never a 500 from the database."""

from __future__ import annotations

import base64
import types
import typing
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, TypeAdapter, ValidationError

from contracts.recall import RequestText
from engram.auth import TokenVerifier, mint_token
from engram.http import PROBLEM, install_problem_handlers
from engram.settings import CommonSettings
from services.recall.core import page_cursor, read_cursor
from services.recall.handlers import router
from services.recall.settings import RecallSettings

SECRET = "a-development-secret-of-at-least-32-bytes"
NUL = "a\u0000b"
CURSOR_WITH_NUL = base64.urlsafe_b64encode(b"2026-01-01T00:00:00+00:00|a\x00b").decode()

# (method, path, body, where the NUL is: the problem's ``loc``)
CASES: list[tuple[str, str, dict[str, Any] | None, tuple[str, str]]] = [
    ("POST", "/v1/recall", {"query": NUL}, ("body", "query")),
    ("POST", "/v1/recall", {"query": "trip", "run_id": NUL}, ("body", "run_id")),
    ("POST", "/v1/search", {"query": NUL}, ("body", "query")),
    ("GET", "/v1/memories/a%00b", None, ("path", "item_id")),
    ("GET", "/v1/memories/a%00b/contexts", None, ("path", "item_id")),
    ("GET", "/v1/memories/a%00b/revisions", None, ("path", "item_id")),
    ("GET", "/v1/memories/a%00b/links", None, ("path", "item_id")),
    ("GET", "/v1/contexts/a%00b", None, ("path", "context_id")),
    ("GET", "/v1/memories?cursor=a%00b", None, ("query", "cursor")),
    # A cursor is the id of the page's last memory, encoded: decoded, it holds a NUL.
    ("GET", f"/v1/memories?cursor={CURSOR_WITH_NUL}", None, ("query", "cursor")),
    # Fixed choices refuse anything else, a NUL too.
    ("GET", "/v1/changes?scope=a%00b", None, ("query", "scope")),
    ("GET", "/v1/proposals?status=a%00b", None, ("query", "status")),
    ("GET", "/v1/proposals?view=a%00b", None, ("query", "view")),
    ("GET", "/v1/memories?status=a%00b", None, ("query", "status")),
    ("GET", "/v1/memories/x/links?direction=a%00b", None, ("query", "direction")),
    ("PUT", "/v1/policy", {"policy": NUL}, ("body", "policy")),
]


class NoStore:
    """A request refused as invalid reads nothing (but its org's holds, seed 004: none
    here): any other read fails the test."""

    async def account(self, p: Any, fresh: bool = False) -> None:
        return None  # not metered

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the store was asked for {name}")


def recall_app() -> FastAPI:
    app = FastAPI()
    install_problem_handlers(app)
    app.include_router(router)
    app.state.store, app.state.embedder, app.state.settings = NoStore(), None, RecallSettings()
    app.state.verifier = TokenVerifier(CommonSettings.model_validate({"ENGRAM_JWT_SECRET": SECRET}))
    return app


@pytest.mark.parametrize(
    ("method", "path", "body", "loc"),
    CASES,
    ids=[f"{m} {p.split('?')[0]} {loc[1]}" for m, p, _, loc in CASES],
)
async def test_a_nul_in_request_text_is_a_422_naming_the_field(
    method: str, path: str, body: dict[str, Any] | None, loc: tuple[str, str]
) -> None:
    r = await refused(method, path, body)
    assert r.json()["code"] == "invalid"
    assert [tuple(e["loc"]) for e in r.json()["errors"]] == [loc]


async def refused(
    method: str, path: str, body: dict[str, Any] | None, **claims: Any
) -> httpx.Response:
    """The recall app's answer to an admin's request that it must refuse: a 422 problem."""
    token = mint_token(SECRET, org="acme", member="ana", roles=("admin",), **claims)
    transport = httpx.ASGITransport(app=recall_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://recall") as http:
        r = await http.request(
            method, path, json=body, headers={"Authorization": f"Bearer {token}"}
        )
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == PROBLEM
    return r


def _free_text(annotation: Any) -> bool:
    """Whether a parameter's type takes any text (a Literal's fixed choices do not)."""
    if annotation is str:
        return True
    if typing.get_origin(annotation) is typing.Annotated:
        return _free_text(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_free_text(a) for a in typing.get_args(annotation))
    return False


def _text_inputs(route: APIRoute) -> set[tuple[str, str]]:
    dependant = route.dependant
    found = {("path", f.name) for f in dependant.path_params if _free_text(f.field_info.annotation)}
    found |= {
        ("query", f.name) for f in dependant.query_params if _free_text(f.field_info.annotation)
    }
    for body in dependant.body_params:
        model = body.field_info.annotation
        assert isinstance(model, type) and issubclass(model, BaseModel)
        found |= {
            ("body", name) for name, f in model.model_fields.items() if _free_text(f.annotation)
        }
    return found


def test_every_text_a_recall_route_takes_is_checked_above() -> None:
    """A new route or field that takes text must join CASES (and use RequestText)."""
    routes = [r for r in router.routes if isinstance(r, APIRoute)]
    taken = {(m, r.path, *where) for r in routes for m in _methods(r) for where in _text_inputs(r)}
    covered = {(m, p, *loc) for m, p, _, loc in CASES}
    # CASES names concrete paths; the routes, templates.
    templated = {(m, _template(p, routes, m), *loc) for m, p, *loc in covered}
    assert taken <= templated, f"not covered: {sorted(taken - templated)}"


def _methods(route: APIRoute) -> set[str]:
    assert route.methods is not None  # an APIRoute always has its methods (GET by default)
    return route.methods


def _template(path: str, routes: list[APIRoute], method: str) -> str:
    bare = path.split("?")[0]
    for route in routes:
        if method in _methods(route) and route.path_regex.match(bare):
            return route.path
    raise AssertionError(f"no route {method} {bare}")


@given(st.text(alphabet=st.characters(exclude_categories=())))  # lone surrogates too
def test_request_text_refuses_exactly_the_texts_postgres_cannot_hold(text: str) -> None:
    adapter = TypeAdapter(RequestText)
    surrogate = any("\ud800" <= c <= "\udfff" for c in text)
    if "\x00" in text or surrogate:
        with pytest.raises(ValidationError) as refused:
            adapter.validate_python(text)
        expected = "nul_character" if "\x00" in text else "string_unicode"
        assert refused.value.errors()[0]["type"] == expected
    else:
        assert adapter.validate_python(text) == text


# A page ends at a memory's updated_at, a time Postgres gave: never the first or the last
# instant a datetime holds, which ``in_utc`` refuses (hypothesis found datetime.min).
STAMPS = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)


@given(STAMPS, st.text(min_size=1).filter(lambda t: "\x00" not in t))
def test_a_cursor_reads_back_as_the_position_it_names(stamp: datetime, item_id: str) -> None:
    assert read_cursor(page_cursor(stamp, item_id)) == (stamp, item_id)


def test_a_cursor_at_a_time_no_utc_date_holds_is_none_of_ours() -> None:
    crafted = base64.urlsafe_b64encode(b"0001-01-01T00:00:00+05:00|x").decode()
    with pytest.raises(ValueError, match="out of range"):
        read_cursor(crafted)


async def test_past_the_largest_version_is_a_422_not_a_500() -> None:
    r = await refused("GET", f"/v1/changes?after={2**63}", None)
    assert [tuple(e["loc"]) for e in r.json()["errors"]] == [("query", "after")]


@pytest.mark.parametrize(
    "kind",
    ["application/x-www-form-urlencoded", "text/plain", None, "text/json", "application/jsonl"],
)
async def test_a_json_body_sent_as_another_type_is_told_so(kind: str | None) -> None:
    """QA: curl -d '{"query": "x"}' (sent as a form) was refused with "Input should be a
    valid dictionary", which said nothing of the content type FastAPI wants."""
    token = mint_token(SECRET, org="acme", member="ana")
    headers = {"Authorization": f"Bearer {token}", **({"Content-Type": kind} if kind else {})}
    transport = httpx.ASGITransport(app=recall_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://recall") as http:
        r = await http.post("/v1/recall", content=b'{"query": "x"}', headers=headers)
    assert r.status_code == 422 and r.headers["content-type"] == PROBLEM, r.text
    assert "Content-Type: application/json" in r.json()["detail"]
    assert (kind or "no content type") in r.json()["detail"]
