"""Saving in other forms and seeing what used a memory: a lesson from a thumbs-down (seed
000), recent messages one memory each (seed 004's ingest), a packet's preview that records
nothing and the runs each memory was given to (seed 001)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import caller
from tests.support import eventually

pytestmark = pytest.mark.e2e


async def test_a_lesson_and_ingested_messages_are_saved(services: dict[str, str]) -> None:
    ana = caller()
    command, recall = services["command"], services["recall"]
    async with httpx.AsyncClient(timeout=10) as http:
        r = await http.post(
            f"{command}/v1/lessons",
            headers=ana.headers,
            json={"note": "Answer with the diff first.", "run_id": "run-9"},
        )
        assert r.status_code == 201, r.text
        lesson = r.json()["item_id"]
        long = await http.post(
            f"{command}/v1/lessons",
            headers=ana.headers,
            json={"note": "x" * 4001, "run_id": "run-9"},
        )
        assert long.status_code == 422
        assert long.json()["errors"][0]["loc"] == ["note"], "the route's own field"

        messages = [
            {"content": "We ship on Tuesdays.", "id": "m-1"},
            {"content": "Ana owns the release notes.", "kind": "fact", "id": "m-2"},
        ]
        bad = await http.post(
            f"{command}/v1/memories/ingest",
            headers=ana.headers,
            json={"messages": [*messages, {"content": "x" * 4001}]},
        )
        assert (bad.status_code, bad.json()["index"]) == (422, 2)  # and nothing saved
        # QA: an id that is no string was dropped, and the message saved with no source.
        for odd in (12345, ["m-3"], ""):
            bad = await http.post(
                f"{command}/v1/memories/ingest",
                headers=ana.headers,
                json={"messages": [*messages, {"content": "x", "id": odd}]},
            )
            assert (bad.status_code, bad.json()["index"]) == (422, 2), bad.text
        key = {"Idempotency-Key": f"ingest-{ana.org}", **ana.headers}
        first = await http.post(
            f"{command}/v1/memories/ingest",
            headers=key,
            json={"messages": messages, "related_ids": [lesson]},
        )
        assert first.status_code == 200, first.text
        results = first.json()["results"]
        assert [(x["index"], x["ok"], x["status"]) for x in results] == [
            (0, True, "active"),
            (1, True, "active"),
        ]
        again = await http.post(
            f"{command}/v1/memories/ingest",
            headers=key,
            json={"messages": messages, "related_ids": [lesson]},
        )
        assert [x["item_id"] for x in again.json()["results"]] == [x["item_id"] for x in results]
        assert all(x["duplicate"] for x in again.json()["results"])
        # The same key with other messages (here, without the links) is another request,
        # refused whole.
        other = await http.post(
            f"{command}/v1/memories/ingest", headers=key, json={"messages": messages}
        )
        assert (other.status_code, other.json()["code"]) == (422, "idempotency_key_reused")

        async def saved() -> dict[str, Any] | None:
            r = await http.get(f"{recall}/v1/memories", headers=ana.headers)
            found = {m["content"]: m for m in r.json()["memories"]}
            return found if len(found) == 3 else None

        found = await eventually(saved, what="the lesson and two messages")
        assert (
            found["Answer with the diff first."]["kind"],
            found["Answer with the diff first."]["pinned"],
        ) == ("lesson", True)
        got = await http.get(f"{recall}/v1/memories/{lesson}", headers=ana.headers)
        assert got.json()["sources"] == ["run-9"]
        assert found["Ana owns the release notes."]["kind"] == "fact"
        assert not found["Ana owns the release notes."]["truncated"]
        # Each ingested message links to the memories the call named (seed 004).
        links = await http.get(
            f"{recall}/v1/memories/{lesson}/links", headers=ana.headers, params={"direction": "in"}
        )
        assert sorted((x["source_id"], x["kind"]) for x in links.json()["links"]) == sorted(
            (x["item_id"], "related") for x in results
        )


async def test_a_long_memory_is_listed_as_its_head_and_read_whole_by_id(
    services: dict[str, str],
) -> None:
    ana = caller()
    text = " ".join(f"Step {n}: check the deploy log for warnings." for n in range(60))
    async with httpx.AsyncClient(timeout=10) as http:
        r = await http.post(
            f"{services['command']}/v1/memories", headers=ana.headers, json={"content": text}
        )
        item = r.json()["item_id"]

        async def listed() -> dict[str, Any] | None:
            r = await http.get(f"{services['recall']}/v1/memories", headers=ana.headers)
            return r.json()["memories"][0] if r.json()["memories"] else None

        head = await eventually(listed, what="the long memory listed")
        assert (head["truncated"], head["full_length"]) == (True, len(text))
        assert len(head["content"]) <= 1200 and text.startswith(head["content"])
        whole = await http.get(f"{services['recall']}/v1/memories/{item}", headers=ana.headers)
        assert whole.json()["content"] == text


async def test_a_preview_records_nothing_and_a_memory_lists_the_runs_it_was_given_to(
    services: dict[str, str],
) -> None:
    ana = caller()
    command, recall = services["command"], services["recall"]
    async with httpx.AsyncClient(timeout=10) as http:
        r = await http.post(
            f"{command}/v1/memories",
            headers=ana.headers,
            json={"content": "The staging database is db-stage-2."},
        )
        item = r.json()["item_id"]

        async def packet(**body: Any) -> dict[str, Any] | None:
            r = await http.post(
                f"{recall}/v1/recall",
                headers=ana.headers,
                json={"query": "which staging database?", **body},
            )
            found = r.json()
            return found if [i["id"] for i in found["items"]] == [item] else None

        preview = await eventually(lambda: packet(preview=True), what="a preview with it")
        assert preview["context_id"] is None
        used = await http.get(f"{recall}/v1/memories/{item}/contexts", headers=ana.headers)
        assert used.json()["contexts"] == []

        given = await packet(run_id="run-1")
        assert given is not None and given["context_id"]
        used = await http.get(f"{recall}/v1/memories/{item}/contexts", headers=ana.headers)
        [context] = used.json()["contexts"]
        assert (context["context_id"], context["run_id"], context["revision"]) == (
            given["context_id"],
            "run-1",
            1,
        )
        assert context["why"]
        other = caller(org=ana.org, member="bob")
        hidden = await http.get(f"{recall}/v1/memories/{item}/contexts", headers=other.headers)
        assert hidden.status_code == 404


async def test_a_memory_read_by_id_or_listed_says_when_it_expires_and_whether_it_has(
    services: dict[str, str],
) -> None:
    """Recall leaves an expired memory out; reading it by id or in a list says so."""
    ana = caller()
    command, recall = services["command"], services["recall"]
    async with httpx.AsyncClient(timeout=10) as http:

        async def save(text: str, expires_at: str | None) -> str:
            r = await http.post(
                f"{command}/v1/memories",
                headers=ana.headers,
                json={"content": text, "expires_at": expires_at},
            )
            assert r.status_code == 201, r.text
            return str(r.json()["item_id"])

        past = await save("The spring offsite is in Lisbon.", "2020-05-01T09:00:00Z")
        future = await save("The badge office is on floor 2.", "2999-01-01T00:00:00+00:00")
        lasting = await save("Invoices go to finance@example.com.", None)

        async def listed() -> dict[str, Any] | None:
            r = await http.get(f"{recall}/v1/memories", headers=ana.headers)
            found = {m["item_id"]: m for m in r.json()["memories"]}
            return found if len(found) == 3 else None

        found = await eventually(listed, what="the three memories")
        assert [(found[i]["status"], found[i]["expired"]) for i in (past, future, lasting)] == [
            ("active", True),
            ("active", False),
            ("active", False),
        ]
        assert found[lasting]["expires_at"] is None
        by_id = (await http.get(f"{recall}/v1/memories/{past}", headers=ana.headers)).json()
        assert (by_id["expired"], by_id["expires_at"][:19]) == (True, "2020-05-01T09:00:00")
        future_by_id = await http.get(f"{recall}/v1/memories/{future}", headers=ana.headers)
        assert future_by_id.json()["expired"] is False
        assert future_by_id.json()["expires_at"].startswith("2999-01-01T00:00:00")
