"""The recall service as a process, as QA found it: a change log asked past its end, a
policy set one field at a time, and text PostgreSQL cannot hold."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from tests.conftest import caller
from tests.support import eventually

pytestmark = pytest.mark.e2e


async def test_a_change_log_past_its_end_answers_the_scopes_version(
    services: dict[str, str],
) -> None:
    ana = caller()
    command, recall = services["command"], services["recall"]
    async with httpx.AsyncClient(timeout=10) as http:
        for n in range(2):
            r = await http.post(
                f"{command}/v1/memories",
                headers=ana.headers,
                json={"content": f"Standup is at {9 + n} o'clock."},
            )
            assert r.status_code == 201, r.text

        async def listed() -> int | None:
            body = (await http.get(f"{recall}/v1/changes", headers=ana.headers)).json()
            return int(body["version"]) if len(body["changes"]) == 2 else None

        assert await eventually(listed, what="two changes in the log") == 2
        past = await http.get(f"{recall}/v1/changes", headers=ana.headers, params={"after": 99999})
        assert (past.json()["version"], past.json()["changes"]) == (2, [])
        empty = await http.get(
            f"{recall}/v1/changes", headers=ana.headers, params={"scope": "shared", "after": 7}
        )
        assert (empty.json()["version"], empty.json()["changes"]) == (0, [])


async def test_a_policy_put_keeps_the_fields_it_leaves_out(services: dict[str, str]) -> None:
    admin = caller(roles=("admin",))
    url = f"{services['recall']}/v1/policy"
    async with httpx.AsyncClient(timeout=10) as http:
        first = await http.put(
            url, headers=admin.headers, json={"max_items": 5, "keep_revisions": 3}
        )
        assert first.status_code == 200, first.text
        uncapped = await http.put(url, headers=admin.headers, json={"max_candidates_per_run": None})
        assert uncapped.json() == {**first.json(), "max_candidates_per_run": None}
        same = await http.put(url, headers=admin.headers, json={})
        assert same.json() == uncapped.json()
        assert (await http.get(url, headers=admin.headers)).json() == uncapped.json()


async def test_text_with_a_nul_is_refused_naming_the_field(services: dict[str, str]) -> None:
    ana, recall = caller(), services["recall"]
    cursor = base64.urlsafe_b64encode(b"2026-01-01T00:00:00+00:00|a\x00b").decode()
    asks: list[tuple[str, str, dict[str, Any], list[str]]] = [
        ("POST", "/v1/recall", {"json": {"query": "a\u0000b"}}, ["body", "query"]),
        ("POST", "/v1/recall", {"json": {"query": "x", "run_id": "r\u0000"}}, ["body", "run_id"]),
        ("POST", "/v1/search", {"json": {"query": "a\u0000b"}}, ["body", "query"]),
        ("GET", "/v1/memories/a%00b", {}, ["path", "item_id"]),
        ("GET", "/v1/memories/a%00b/revisions", {}, ["path", "item_id"]),
        ("GET", "/v1/memories", {"params": {"cursor": cursor}}, ["query", "cursor"]),
    ]
    async with httpx.AsyncClient(timeout=10) as http:
        for method, path, kwargs, loc in asks:
            r = await http.request(method, f"{recall}{path}", headers=ana.headers, **kwargs)
            assert r.status_code == 422, (path, r.text)
            assert r.headers["content-type"] == "application/problem+json"
            assert [e["loc"] for e in r.json()["errors"]] == [loc]
        # The same connection still answers: nothing failed on the server's side.
        fine = await http.post(f"{recall}/v1/search", headers=ana.headers, json={"query": "ab"})
        assert fine.status_code == 200, fine.text


async def test_newest_first_holds_as_many_items_as_asked(services: dict[str, str]) -> None:
    admin = caller(roles=("admin",))
    command, recall = services["command"], services["recall"]
    async with httpx.AsyncClient(timeout=10) as http:
        saved = []
        for n in range(30):
            r = await http.post(
                f"{command}/v1/memories",
                headers=admin.headers,
                json={"content": f"Short fact {n}.", "pinned": n == 0},
            )
            assert r.status_code == 201, r.text
            saved.append(r.json()["item_id"])

        async def packet(**body: object) -> list[str]:
            r = await http.post(
                f"{recall}/v1/recall",
                headers=admin.headers,
                json={"query": "x", "policy": "newest_first", **body},
            )
            assert r.status_code == 200, r.text
            return [i["id"] for i in r.json()["items"]]

        async def all_thirty() -> list[str] | None:
            ids = await packet(max_items=50)
            return ids if len(ids) == 30 else None

        assert await eventually(all_thirty, what="30 memories") == saved[::-1]
        assert await packet(max_items=3) == saved[::-1][:3]  # pinned or not
        assert await packet() == saved[::-1][:12]  # a packet's default, as every policy's
        r = await http.put(f"{recall}/v1/policy", headers=admin.headers, json={"max_items": 5})
        assert r.status_code == 200, r.text
        assert await packet() == saved[::-1][:5]
        assert await packet(max_items=2) == saved[::-1][:2]


async def test_on_off_fields_take_true_or_false_only(services: dict[str, str]) -> None:
    admin, recall = caller(roles=("admin",)), services["recall"]
    asks = [
        ("POST", "/v1/recall", {"query": "x", "use_memory": "no"}, "use_memory"),
        ("POST", "/v1/recall", {"query": "x", "preview": 1}, "preview"),
        ("PUT", "/v1/policy", {"agent_memory": "false"}, "agent_memory"),
        ("PUT", "/v1/policy", {"session_generate": 0}, "session_generate"),
    ]
    async with httpx.AsyncClient(timeout=10) as http:
        policy = (await http.get(f"{recall}/v1/policy", headers=admin.headers)).json()
        for method, path, body, field in asks:
            r = await http.request(method, f"{recall}{path}", headers=admin.headers, json=body)
            assert r.status_code == 422, (body, r.text)
            assert r.headers["content-type"] == "application/problem+json"
            assert [e["loc"] for e in r.json()["errors"]] == [["body", field]]
        # Nothing was set by the refused puts.
        assert (await http.get(f"{recall}/v1/policy", headers=admin.headers)).json() == policy
        off = await http.post(
            f"{recall}/v1/recall",
            headers=admin.headers,
            json={"query": "x", "use_memory": False, "preview": True},
        )
        assert off.status_code == 200 and off.json()["items"] == []
