"""A memory moved to another scope (seed 004: an update that changes its scope) through
the services: a copy where it goes, at the revision its caller saw; the forget where it
was follows in the move's own transaction, over Kafka, and erases it from the read models
there; it can move back."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import caller
from tests.e2e.api import ServicesApi
from tests.support import eventually

pytestmark = pytest.mark.e2e


async def test_a_private_memory_moves_to_the_shared_scope_and_back(
        services: dict[str, str]) -> None:
    ana = caller()
    bob = caller(ana.org, member="bob")
    text = "The release train leaves every second Tuesday."
    async with httpx.AsyncClient(timeout=30) as http:
        api = ServicesApi(http, services)
        saved = await api.remember(ana, text, kind="decision", title="Release train",
                                   pinned=True, tags=["release"])
        assert await eventually(lambda: api.memory(ana, saved["item_id"]), what="saved")
        assert await api.memory(bob, saved["item_id"]) == {}  # ana's own

        stale = await api.post(ana, f"/v1/memories/{saved['item_id']}/move", scope="shared",
                               from_scope="private", base_revision=2)
        assert (stale.status_code, stale.json()["current_revision"]) == (409, 1), stale.text
        move = {"scope": "shared", "from_scope": "private", "base_revision": 1}
        url, key = f"{api.command}/v1/memories/{saved['item_id']}/move", {"Idempotency-Key":
                                                                       f"move-{ana.org}"}
        moved = await http.post(url, headers={**ana.headers, **key}, json=move)
        assert moved.status_code == 200, moved.text
        copy_id = moved.json()["item_id"]
        assert copy_id != saved["item_id"] and moved.json()["stream_id"] == f"{ana.org}/shared"

        # The teammate reads it in the shared scope, as it was: kind, title, pin, tags.
        shared = await eventually(lambda: api.memory(bob, copy_id), what="bob sees the move")
        assert (shared["content"], shared["scope"], shared["kind"], shared["title"]) == (
            text, "shared", "decision", "Release train")
        assert shared["pinned"] is True and shared["tags"] == ["release"]
        assert shared["sources"][0] == saved["item_id"]

        # Where it was, it is erased (the forget the move sent): no text, a tombstone.
        async def gone() -> bool | None:
            r = await http.get(f"{api.recall}/v1/memories/{saved['item_id']}",
                               headers=ana.headers)
            return True if r.status_code in (404, 410) else None

        await eventually(gone, what="the private memory erased")
        r = await http.get(f"{api.recall}/v1/memories", headers=ana.headers,
                           params={"limit": 100})
        assert [m["item_id"] for m in r.json()["memories"]] == [copy_id]
        # A retry is answered as the move was, and moves nothing again; another move finds
        # nothing to move.
        again = await http.post(url, headers={**ana.headers, **key}, json=move)
        assert again.status_code == 200 and again.json()["item_id"] == copy_id, again.text
        other = await http.post(url, headers=ana.headers, json=move)
        assert (other.status_code, other.json()["code"]) == (404, "not_found"), other.text

        # Back to the private scope: moved text is not forgotten text there.
        back = await api.post(ana, f"/v1/memories/{copy_id}/move", scope="private",
                              from_scope="shared", base_revision=1)
        assert back.status_code == 200, back.text
        home = await eventually(lambda: api.memory(ana, back.json()["item_id"]),
                                what="moved back")
        assert home["scope"] == "member:ana" and home["content"] == text

        async def unshared() -> bool | None:
            return True if await api.memory(bob, copy_id) == {} else None

        await eventually(unshared, what="the shared copy erased")

        # Bob cannot move ana's shared memory out of the team's reach, nor an agent at all.
        theirs = await api.remember(ana, "Standups are at 9:30.", scope="shared")
        r = await api.post(bob, f"/v1/memories/{theirs['item_id']}/move", scope="private",
                           from_scope="shared", base_revision=1)
        assert (r.status_code, r.json()["code"]) == (403, "forbidden"), r.text
        helper = caller(ana.org, member="ana", agent="helper")
        r = await api.post(helper, f"/v1/memories/{theirs['item_id']}/move", scope="private",
                           from_scope="shared", base_revision=1)
        assert (r.status_code, r.json()["code"]) == (403, "forbidden"), r.text
        r = await api.post(ana, f"/v1/memories/{theirs['item_id']}/move", scope="private",
                           from_scope="shared")
        assert (r.status_code, r.json()["code"]) == (422, "invalid")  # no base_revision
