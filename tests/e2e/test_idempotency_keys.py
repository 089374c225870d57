"""Idempotency keys are the caller's: the same key in another scope or org is another
command (never the same memory, nor its key), and the same key with another request is
refused, not answered with the first answer. Found by a QA pass, as were the bad inputs
at the end: text Postgres cannot hold, keys out of bounds, loose booleans."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from tests.conftest import Caller, caller
from tests.e2e.api import ServicesApi
from tests.support import eventually

pytestmark = pytest.mark.e2e


class Api(ServicesApi):
    async def keyed(self, who: Caller, key: str, path: str, **body: Any) -> httpx.Response:
        return await self.http.post(
            f"{self.command}{path}", json=body, headers={**who.headers, "Idempotency-Key": key}
        )

    async def content(self, who: Caller, item_id: str) -> str | None:
        async def seen() -> dict[str, Any] | None:
            return await self.memory(who, item_id) or None

        return (await eventually(seen, what=f"memory {item_id}")).get("content")


async def test_the_same_key_in_another_org_or_scope_is_another_memory(
    services: dict[str, str],
) -> None:
    ana, eve = caller(), caller()  # two orgs
    bob = caller(org=ana.org, member="bob")
    key = f"k7-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(timeout=10) as http:
        api = Api(http, services)
        mine = await api.keyed(ana, key, "/v1/memories", content="The locker code is 4711.")
        theirs = await api.keyed(eve, key, "/v1/memories", content="A decoy.")
        his = await api.keyed(bob, key, "/v1/memories", content="Bob's own note.")
        assert [r.status_code for r in (mine, theirs, his)] == [201, 201, 201]
        ids = {r.json()["item_id"] for r in (mine, theirs, his)}
        assert len(ids) == 3, "one key, three scopes: three memories"
        decoy = theirs.json()["item_id"]
        fixed = await api.post(
            eve, f"/v1/memories/{decoy}/correct", base_revision=1, content="PWNED by eve"
        )
        assert fixed.status_code == 200, fixed.text
        gone = await http.delete(f"{api.command}/v1/memories/{decoy}", headers=eve.headers)
        assert gone.status_code == 200, gone.text
        # Ana's memory, and Bob's, are their own: untouched, readable, and unshredded.
        assert await api.content(ana, mine.json()["item_id"]) == "The locker code is 4711."
        assert await api.content(bob, his.json()["item_id"]) == "Bob's own note."


async def test_a_key_reused_for_another_request_is_refused(services: dict[str, str]) -> None:
    ana = caller()
    key = f"key-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(timeout=10) as http:
        api = Api(http, services)
        first = await api.keyed(ana, key, "/v1/memories", content="Standup is at 9:30.")
        assert first.status_code == 201, first.text
        again = await api.keyed(ana, key, "/v1/memories", content="Standup is at 9:30.")
        assert (again.status_code, again.json()["duplicate"]) == (200, True)
        other = await api.keyed(ana, key, "/v1/memories", content="Standup is at 10:00.")
        assert (other.status_code, other.json()["code"]) == (422, "idempotency_key_reused")
        assert other.json()["first_item_id"] == first.json()["item_id"]
        second = await api.remember(ana, "Retro is on Fridays.")
        pin = await api.keyed(ana, key, f"/v1/memories/{second['item_id']}/pin")
        assert (pin.status_code, pin.json()["code"]) == (422, "idempotency_key_reused")
        # A scope's MEMORY.md import is one act: a second one is its first answer.
        imported = await api.post(ana, "/v1/memories/import-memory-md", content="# Notes\nA")
        assert imported.status_code == 201, imported.text
        twice = await api.post(ana, "/v1/memories/import-memory-md", content="# Notes\nB")
        assert (twice.status_code, twice.json()["duplicate"]) == (200, True)


async def test_an_ingest_under_a_used_key_is_one_request_refused_whole(
    services: dict[str, str],
) -> None:
    """QA: an ingest sent again under its key with other messages saved its new ones (each
    message's id came from the key and its index), and a save under an ingest's key, or
    the other way round, was saved again."""
    ana = caller()
    key = f"ingest-{uuid.uuid4().hex[:8]}"
    first = [{"content": "Ingest a."}, {"content": "Ingest b."}]
    async with httpx.AsyncClient(timeout=10) as http:
        api = Api(http, services)
        saved = await api.keyed(ana, key, "/v1/memories/ingest", messages=first)
        assert saved.status_code == 200 and all(r["ok"] for r in saved.json()["results"])
        again = await api.keyed(ana, key, "/v1/memories/ingest", messages=first)
        assert [r["duplicate"] for r in again.json()["results"]] == [True, True], again.text
        for messages in (
            [{"content": "Ingest CHANGED."}, *first[1:], {"content": "New."}],
            [*first, {"content": "Ingest NEW third."}],
            [first[0], {"content": "Ingest b, changed."}],
        ):
            other = await api.keyed(ana, key, "/v1/memories/ingest", messages=messages)
            assert (other.status_code, other.json()["code"]) == (422, "idempotency_key_reused"), (
                other.text
            )
        save = await api.keyed(ana, key, "/v1/memories", content="Ingest a.", sources=["m1"])
        assert (save.status_code, save.json()["code"]) == (422, "idempotency_key_reused")
        other_key = f"save-{uuid.uuid4().hex[:8]}"
        plain = await api.keyed(ana, other_key, "/v1/memories", content="A plain save.")
        assert plain.status_code == 201, plain.text
        ingest = await api.keyed(
            ana, other_key, "/v1/memories/ingest", messages=[{"content": "A plain save."}]
        )
        assert (ingest.status_code, ingest.json()["code"]) == (422, "idempotency_key_reused")

        async def listed() -> list[str] | None:
            r = await http.get(f"{api.recall}/v1/memories", headers=ana.headers)
            texts = sorted(m["content"] for m in r.json()["memories"])
            return texts if len(texts) >= 3 else None

        assert await eventually(listed, what="the saved memories") == [
            "A plain save.",
            "Ingest a.",
            "Ingest b.",
        ]


async def test_an_ingest_whose_first_message_was_refused_keeps_its_key(
    services: dict[str, str],
) -> None:
    """QA: a refused message leaves its command id unused, so when an ingest's first
    message was refused, another request under its key was saved, and a retry of the
    first was then refused."""
    ana = caller()
    key = f"ingest-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(timeout=10) as http:
        api = Api(http, services)
        alpha = await api.remember(ana, "Alpha fact about the build.")
        gone = await http.delete(
            f"{api.command}/v1/memories/{alpha['item_id']}", headers=ana.headers
        )
        assert gone.status_code == 200, gone.text
        first = [
            {"content": "Alpha fact about the build."},
            {"content": "Beta fact about the build."},
        ]
        sent = await api.keyed(ana, key, "/v1/memories/ingest", messages=first)
        assert [(r["ok"], r.get("code")) for r in sent.json()["results"]] == [
            (False, "conflict"),
            (True, None),
        ], sent.text
        other = await api.keyed(
            ana,
            key,
            "/v1/memories/ingest",
            messages=[{"content": "Gamma fact."}, {"content": "Delta fact."}],
        )
        assert (other.status_code, other.json()["code"]) == (422, "idempotency_key_reused")
        again = await api.keyed(ana, key, "/v1/memories/ingest", messages=first)
        results = again.json()["results"]
        assert (results[0]["ok"], results[1]["duplicate"]) == (False, True), again.text
        # QA: a save took the key, the ingest's first message having been refused.
        save = await api.keyed(ana, key, "/v1/memories", content="Totally different save.")
        assert (save.status_code, save.json()["code"]) == (422, "idempotency_key_reused")
        one_route = await http.post(
            f"{api.command}/v1/commands",
            headers=ana.headers,
            json={"type": "RememberMemory", "command_id": key, "payload": {"content": "Another."}},
        )
        assert (one_route.status_code, one_route.json()["code"]) == (
            422,
            "idempotency_key_reused",
        ), one_route.text  # review: the body's id went round
        # An ingest refused for a save's key leaves the key the save's: its retry answers.
        saved_key = f"save-{uuid.uuid4().hex[:8]}"
        plain = await api.keyed(ana, saved_key, "/v1/memories", content="A plain fact.")
        refused = await api.keyed(
            ana, saved_key, "/v1/memories/ingest", messages=[{"content": "Another fact."}]
        )
        assert refused.status_code == 422, refused.text
        retry = await api.keyed(ana, saved_key, "/v1/memories", content="A plain fact.")
        assert (retry.status_code, retry.json()["item_id"]) == (200, plain.json()["item_id"])


@pytest.mark.parametrize(
    ("body", "key", "field"),
    [
        ({"content": "nul \u0000 byte"}, None, "content"),
        ({"content": "fine", "title": "a\u0000"}, None, "title"),
        ({"content": "fine"}, "k" * 101, "Idempotency-Key"),
        ({"content": "fine"}, "short", "Idempotency-Key"),
        ({"content": "fine", "pinned": "yes"}, None, "pinned"),
        ({"content": "fine", "candidate": True, "extracted": True}, None, "extracted"),
    ],
)
async def test_bad_input_is_a_clear_422(
    services: dict[str, str], body: dict[str, Any], key: str | None, field: str
) -> None:
    ana = caller()
    headers = {**ana.headers, **({"Idempotency-Key": key} if key else {})}
    async with httpx.AsyncClient(timeout=10) as http:
        r = await http.post(f"{services['command']}/v1/memories", json=body, headers=headers)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert field in r.text


@pytest.mark.parametrize("command_id", ["abcdefgh\u0000", "abcdefgh\ud800"])
async def test_a_command_id_postgres_cannot_hold_is_a_422_on_the_one_route(
    services: dict[str, str], command_id: str
) -> None:
    """QA: a NUL in /v1/commands' command_id was refused by the envelope, outside the
    route's handling: a 500, and the keep-alive connection closed."""
    ana = caller()
    async with httpx.AsyncClient(timeout=10) as http:
        body = json.dumps(
            {"type": "RememberMemory", "command_id": command_id, "payload": {"content": "x"}}
        )
        r = await http.post(
            f"{services['command']}/v1/commands",
            content=body,
            headers={**ana.headers, "Content-Type": "application/json"},
        )
        assert (r.status_code, r.json()["code"]) == (422, "invalid"), r.text
        assert "command_id" in r.text
        after = await http.post(
            f"{services['command']}/v1/memories",
            headers=ana.headers,
            json={"content": "After a refused command id."},
        )
        assert after.status_code == 201, after.text


async def test_archiving_and_proposing_what_changes_nothing_are_refused(
    services: dict[str, str],
) -> None:
    ana = caller()
    bob = caller(org=ana.org, member="bob")
    async with httpx.AsyncClient(timeout=10) as http:
        api = Api(http, services)
        item = (await api.remember(ana, "Deploys need two approvals.", scope="shared"))["item_id"]
        itself = await api.post(
            ana, f"/v1/memories/{item}/archive", scope="shared", superseded_by=item
        )
        assert (itself.status_code, itself.json()["code"]) == (422, "invalid")
        same = await api.post(
            bob,
            f"/v1/memories/{item}/propose",
            change="correct",
            base_revision=1,
            content="Deploys need two approvals.",
            reason="no change",
        )
        assert (same.status_code, same.json()["code"]) == (409, "conflict")
        clear = await api.post(ana, "/v1/memories/clear", confirm="yes")
        assert clear.status_code == 422, "only JSON's true confirms a clear"
        private = await api.post(bob, f"/v1/memories/{item}/pin")
        assert private.status_code == 404 and "scope: shared" in private.json()["detail"]
        # A forget names its scope in the query or, as every other command, in its body.
        forgot = await http.request(
            "DELETE",
            f"{api.command}/v1/memories/{item}",
            headers=ana.headers,
            json={"scope": "shared", "reason": "obsolete"},
        )
        assert forgot.status_code == 200, forgot.text
        assert forgot.json()["receipt"]["erased"][0]["item_id"] == item


async def test_every_route_holds_to_expected_version_and_its_fields(
    services: dict[str, str],
) -> None:
    """QA: a forget's ?expected_version and the lesson and import routes' body went
    unchecked (a stale version saved anyway; an unknown field was ignored)."""
    ana = caller()
    async with httpx.AsyncClient(timeout=10) as http:
        api = Api(http, services)
        first = await api.remember(ana, "Lunch is at noon.")
        await api.remember(ana, "Coffee is at three.")
        stale = await http.delete(
            f"{api.command}/v1/memories/{first['item_id']}",
            params={"expected_version": 1},
            headers=ana.headers,
        )
        assert (stale.status_code, stale.json()["current_version"]) == (409, 2)
        lesson = await api.post(ana, "/v1/lessons", note="Answer shorter.", expected_version=1)
        assert lesson.status_code == 409, lesson.text
        loose = await api.post(ana, "/v1/memories", content="x", expected_version="2")
        assert loose.status_code == 422, "a version is a JSON number"
        # QA: "²" and 4,301 digits answered 500, "٣" read as 3.
        for version in ("two", "\u00b2", "\u0663", "9" * 4301):
            bad = await http.delete(
                f"{api.command}/v1/memories/{first['item_id']}",
                params={"expected_version": version},
                headers=ana.headers,
            )
            assert bad.status_code == 422, bad.text
        twice = await http.request(
            "DELETE",
            f"{api.command}/v1/memories/{first['item_id']}",
            params={"scope": "shared"},
            json={"scope": "private"},
            headers=ana.headers,
        )
        assert twice.status_code == 422 and "scope" in twice.json()["detail"], twice.text
        for path, body in (
            ("/v1/lessons", {"note": "x", "bogus": 1}),
            ("/v1/memories/import-memory-md", {"content": "# x", "bogus": 1}),
            ("/v1/memories/ingest", {"messages": [{"content": "x"}], "bogus": 1}),
            ("/v1/memories/ingest", {"messages": [{"content": "x", "bogus": 1}]}),
        ):
            r = await api.post(ana, path, **body)
            assert (r.status_code, "bogus" in r.json()["detail"]) == (422, True), r.text


async def test_a_retry_of_a_command_that_changed_nothing_gets_its_first_answer(
    services: dict[str, str],
) -> None:
    """QA: a pin of a pinned memory wrote nothing and kept no answer, so its retry after an
    unpin was decided again and pinned the memory a second time."""
    ana = caller()
    key = f"noop-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(timeout=10) as http:
        api = Api(http, services)
        saved = await api.post(ana, "/v1/memories", content="Standup is at 9:30.", pinned=True)
        item = saved.json()["item_id"]
        first = await api.keyed(ana, key, f"/v1/memories/{item}/pin")
        assert first.status_code == 200, first.text
        assert (first.json()["events"], first.json()["item_id"]) == ([], item)
        unpinned = await api.post(ana, f"/v1/memories/{item}/unpin")
        assert unpinned.status_code == 200, unpinned.text
        again = await api.keyed(ana, key, f"/v1/memories/{item}/pin")
        assert again.status_code == 200, again.text
        assert again.json()["duplicate"] is True and again.json()["events"] == []
        assert again.json()["revision"] == first.json()["revision"]

        async def unpinned_read() -> dict[str, Any] | None:
            got = await api.memory(ana, item)
            return got if got and got["revision"] == 2 else None

        assert (await eventually(unpinned_read, what="the unpin"))["pinned"] is False


async def test_a_retried_clear_of_an_empty_scope_erases_nothing_saved_since(
    services: dict[str, str],
) -> None:
    """QA: in a scope with no events yet, the answer of a command that changed nothing
    was dropped with the scope's empty state, so a retried clear erased what was saved
    in between."""
    ana = caller()
    key = f"clear-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(timeout=10) as http:
        api = Api(http, services)
        first = await api.keyed(ana, key, "/v1/memories/clear", confirm=True)
        assert first.status_code == 200, first.text
        assert first.json()["receipt"]["erased"] == []
        kept = await api.post(ana, "/v1/memories", content="Keep this one.")
        assert kept.status_code == 201, kept.text
        again = await api.keyed(ana, key, "/v1/memories/clear", confirm=True)
        assert again.status_code == 200, again.text
        assert again.json()["duplicate"] is True and again.json()["receipt"]["erased"] == []
        assert await api.content(ana, kept.json()["item_id"]) == "Keep this one."


async def test_a_repeat_of_a_save_whose_memory_was_forgotten_is_gone(
    services: dict[str, str],
) -> None:
    """QA: its first answer named the memory as active; through the gateway's Kafka path
    (which cannot seal the retry under the shredded key) it was 410. Both are 410 now."""
    ana = caller()
    key = f"gone-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(timeout=10) as http:
        api = Api(http, services)
        saved = (await api.keyed(ana, key, "/v1/memories", content="Safe: 9931.")).json()
        forgot = await http.delete(
            f"{api.command}/v1/memories/{saved['item_id']}", headers=ana.headers
        )
        assert forgot.status_code == 200, forgot.text
        gone = await api.keyed(ana, key, "/v1/memories", content="Safe: 9931.")
        assert (gone.status_code, gone.json()["code"]) == (410, "forgotten"), gone.text
