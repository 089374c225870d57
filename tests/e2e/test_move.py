"""A memory moved to another scope (seed 004: an update that changes its scope) through
the services: a copy where it goes, at the revision its caller saw; the forget where it
was follows in the move's own transaction, over Kafka, and erases it from the read models
there; it can move back."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from contracts.envelope import CommandEnvelope
from engram.crypto import MasterKey, load_master_key
from engram.settings import CommonSettings
from tests.conftest import caller
from tests.e2e.api import ServicesApi
from tests.support import eventually, new_command_id, read_replies, send_commands

pytestmark = pytest.mark.e2e


async def test_a_private_memory_moves_to_the_shared_scope_and_back(
    services: dict[str, str],
) -> None:
    ana = caller()
    bob = caller(ana.org, member="bob")
    text = "The release train leaves every second Tuesday."
    async with httpx.AsyncClient(timeout=30) as http:
        api = ServicesApi(http, services)
        saved = await api.remember(
            ana, text, kind="decision", title="Release train", pinned=True, tags=["release"]
        )
        assert await eventually(lambda: api.memory(ana, saved["item_id"]), what="saved")
        assert await api.memory(bob, saved["item_id"]) == {}  # ana's own

        stale = await api.post(
            ana,
            f"/v1/memories/{saved['item_id']}/move",
            scope="shared",
            from_scope="private",
            base_revision=2,
        )
        assert (stale.status_code, stale.json()["current_revision"]) == (409, 1), stale.text
        move = {"scope": "shared", "from_scope": "private", "base_revision": 1}
        url, key = (
            f"{api.command}/v1/memories/{saved['item_id']}/move",
            {"Idempotency-Key": f"move-{ana.org}"},
        )
        moved = await http.post(url, headers={**ana.headers, **key}, json=move)
        assert moved.status_code == 200, moved.text
        copy_id = moved.json()["item_id"]
        assert copy_id != saved["item_id"] and moved.json()["stream_id"] == f"{ana.org}/shared"

        # The teammate reads it in the shared scope, as it was: kind, title, pin, tags.
        shared = await eventually(lambda: api.memory(bob, copy_id), what="bob sees the move")
        assert (shared["content"], shared["scope"], shared["kind"], shared["title"]) == (
            text,
            "shared",
            "decision",
            "Release train",
        )
        assert shared["pinned"] is True and shared["tags"] == ["release"]
        assert shared["sources"][0] == saved["item_id"]

        # Where it was, it is erased (the forget the move sent): no text, a tombstone.
        async def gone() -> bool | None:
            r = await http.get(f"{api.recall}/v1/memories/{saved['item_id']}", headers=ana.headers)
            return True if r.status_code in (404, 410) else None

        await eventually(gone, what="the private memory erased")
        r = await http.get(f"{api.recall}/v1/memories", headers=ana.headers, params={"limit": 100})
        assert [m["item_id"] for m in r.json()["memories"]] == [copy_id]
        # A retry is answered as the move was, and moves nothing again; another move finds
        # nothing to move.
        again = await http.post(url, headers={**ana.headers, **key}, json=move)
        assert again.status_code == 200 and again.json()["item_id"] == copy_id, again.text
        other = await http.post(url, headers=ana.headers, json=move)
        assert (other.status_code, other.json()["code"]) == (410, "forgotten"), other.text

        # Back to the private scope: moved text is not forgotten text there.
        back = await api.post(
            ana,
            f"/v1/memories/{copy_id}/move",
            scope="private",
            from_scope="shared",
            base_revision=1,
        )
        assert back.status_code == 200, back.text
        home = await eventually(lambda: api.memory(ana, back.json()["item_id"]), what="moved back")
        assert home["scope"] == "member:ana" and home["content"] == text

        async def unshared() -> bool | None:
            return True if await api.memory(bob, copy_id) == {} else None

        await eventually(unshared, what="the shared copy erased")

        # Bob cannot move ana's shared memory out of the team's reach, nor an agent at all.
        theirs = await api.remember(ana, "Standups are at 9:30.", scope="shared")
        r = await api.post(
            bob,
            f"/v1/memories/{theirs['item_id']}/move",
            scope="private",
            from_scope="shared",
            base_revision=1,
        )
        assert (r.status_code, r.json()["code"]) == (403, "forbidden"), r.text
        helper = caller(ana.org, member="ana", agent="helper")
        r = await api.post(
            helper,
            f"/v1/memories/{theirs['item_id']}/move",
            scope="private",
            from_scope="shared",
            base_revision=1,
        )
        assert (r.status_code, r.json()["code"]) == (403, "forbidden"), r.text
        r = await api.post(
            ana, f"/v1/memories/{theirs['item_id']}/move", scope="private", from_scope="shared"
        )
        assert (r.status_code, r.json()["code"]) == (422, "invalid")  # no base_revision


async def test_two_moves_of_one_memory_at_once_leave_one_copy(services: dict[str, str]) -> None:
    """QA: moves of one memory into two scopes at once each made a copy, and one forget
    erased the memory where it was: two copies. A move is answered once settled: one
    answers 200; the other finds the memory moved (410), or its forget refused and itself
    undone (409, its copy forgotten, and its retry 410). One copy is left, either way."""
    ana = caller(session="trip")
    async with httpx.AsyncClient(timeout=30) as http:
        api = ServicesApi(http, services)
        saved = await api.remember(ana, "The hotel is booked until Sunday.")
        assert await eventually(lambda: api.memory(ana, saved["item_id"]), what="saved")
        url = f"{api.command}/v1/memories/{saved['item_id']}/move"
        scopes = ("shared", "session")
        keys = [f"move-{ana.org}-{scope}" for scope in scopes]
        answers = await asyncio.gather(
            *(
                http.post(
                    url,
                    headers={**ana.headers, "Idempotency-Key": key},
                    json={"scope": scope, "base_revision": 1},
                )
                for key, scope in zip(keys, scopes, strict=True)
            )
        )
        codes = [a.status_code for a in answers]
        assert sorted(codes) in ([200, 409], [200, 410]), [a.text for a in answers]
        kept = answers[codes.index(200)].json()["item_id"]
        other = codes.index(409 if 409 in codes else 410)
        # Settled before the answer: the copy is the memory's only home.
        assert await eventually(lambda: api.memory(ana, kept), what="the copy")

        async def gone(item_id: str) -> bool | None:
            return None if await api.memory(ana, item_id) else True

        await eventually(lambda: gone(saved["item_id"]), what="the memory moved")
        if codes[other] == 409:
            undone = answers[other].json()["copy_id"]
            assert "the move was undone" in answers[other].json()["detail"]
            await eventually(lambda: gone(undone), what="the undone copy forgotten")
            retry = await http.post(
                url,
                headers={**ana.headers, "Idempotency-Key": keys[other]},
                json={"scope": scopes[other], "base_revision": 1},
            )
            assert retry.status_code == 410, retry.text
        # The text was moved, not forgotten: it may be saved where the other move went.
        again = await api.post(
            ana, "/v1/memories", content="The hotel is booked until Sunday.", scope=scopes[other]
        )
        assert again.status_code == 201, again.text


async def test_a_move_is_answered_once_settled_so_the_next_command_sees_it_moved(
    services: dict[str, str],
) -> None:
    """QA: a clear of the scope right after a move erased the memory and then undid the
    move, so the text was in no scope; a fork right after copied it once more."""
    ana = caller(session="a")
    fork = caller(org=ana.org, member=ana.member, session="b", fork_of="a")
    async with httpx.AsyncClient(timeout=30) as http:
        api = ServicesApi(http, services)
        out = await api.remember(ana, "The moved fact.", scope="session")
        await api.remember(ana, "The staying fact.", scope="session")
        assert await eventually(lambda: api.memory(ana, out["item_id"]), what="saved")
        moved = await api.post(
            ana,
            f"/v1/memories/{out['item_id']}/move",
            scope="private",
            from_scope="session",
            base_revision=1,
        )
        assert moved.status_code == 200, moved.text
        forked = await http.post(f"{api.command}/v1/session/fork", headers=fork.headers)
        assert forked.status_code == 200, forked.text
        assert len(forked.json()["copied"]) == 1  # the staying fact only
        cleared = await api.post(ana, "/v1/memories/clear", scope="session", confirm=True)
        assert cleared.status_code == 200, cleared.text
        erased = [e["item_id"] for e in cleared.json()["receipt"]["erased"]]
        assert out["item_id"] not in erased  # forgotten already, by the move
        home = await eventually(lambda: api.memory(ana, moved.json()["item_id"]), what="moved")
        assert home["content"] == "The moved fact."


async def test_a_refused_forget_of_a_moved_memory_undoes_the_move(
    services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    """The undo, made to happen: a ForgetMoved, as the command service issues it, of a
    memory at a revision it is no longer at (as a move's is, when a correction got there
    first) is refused, and the writer forgets the copy it names in its own transaction,
    as moved text; the memory stays. One a caller makes up is refused, touching nothing."""
    ana = caller()
    master = MasterKey(load_master_key(CommonSettings()))  # the stack's: as the service
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    async with httpx.AsyncClient(timeout=30) as http:
        api = ServicesApi(http, services)
        kept = await api.remember(ana, "Invoices go out on the 3rd.")
        copy = await api.remember(ana, "Invoices go out on the 3rd, as moved.", scope="shared")
        stream = f"{ana.org}/member:{ana.member}"
        payload = {
            "item_id": kept["item_id"],
            "base_revision": 2,
            "moved_to": copy["item_id"],
            "to_scope": "shared",
            "follows": f"{ana.org}/shared {new_command_id()}",
        }
        made_up = CommandEnvelope(
            command_id=new_command_id(),
            type="ForgetMoved",
            token=ana.token,
            stream_id=stream,
            payload=payload,
        )
        issued = made_up.model_copy(
            update={"command_id": master.issued_id(stream, ana.token, payload)}
        )
        await send_commands(bootstrap, [made_up, issued])
        [refused] = (await read_replies(bootstrap, {made_up.command_id}))[made_up.command_id]
        assert refused.rejection is not None and refused.rejection.status == 403

        async def undone() -> bool | None:
            return None if await api.memory(ana, copy["item_id"]) else True

        await eventually(undone, what="the copy forgotten")
        assert (await api.memory(ana, kept["item_id"]))["revision"] == 1
        r = await http.get(
            f"{api.recall}/v1/changes", headers=ana.headers, params={"scope": "shared"}
        )
        assert [c["type"] for c in r.json()["changes"]] == ["MemoryRemembered", "MemoryForgotten"]
        # Moved text, not forgotten text: saved again there with no resave_forgotten.
        await api.remember(ana, "Invoices go out on the 3rd, as moved.", scope="shared")
        # Over HTTP it is the command service's own.
        r = await api.post(ana, "/v1/commands", type="ForgetMoved", payload=payload)
        assert (r.status_code, r.json()["code"]) == (422, "invalid"), r.text
