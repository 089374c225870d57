"""Links between memories (seed 004), through the five services: link, re-weight, unlink,
related_ids, "supersedes" from archiving, bounds, visibility across members, forgetting,
and a Kafka caller's link with its rejection reply."""

from __future__ import annotations

from typing import Any

import asyncpg
import httpx
import pytest

from contracts.envelope import CommandEnvelope
from engram.crypto import MasterKey, load_master_key
from engram.settings import CommonSettings
from services.projector.replay import replay
from tests.conftest import Caller, caller
from tests.e2e.api import ServicesApi
from tests.support import (
    eventually,
    new_command_id,
    read_replies,
    send_commands,
    shadow_database,
)

pytestmark = pytest.mark.e2e


class Api(ServicesApi):
    async def act(self, who: Caller, item_id: str, action: str, **body: Any) -> httpx.Response:
        return await self.post(who, f"/v1/memories/{item_id}/{action}", **body)

    async def links(
        self, who: Caller, item_id: str, direction: str = "both"
    ) -> list[tuple[str, str, str, float | None, str]]:
        r = await self.http.get(
            f"{self.recall}/v1/memories/{item_id}/links",
            headers=who.headers,
            params={"direction": direction},
        )
        assert r.status_code == 200, r.text
        return [
            (x["source_id"], x["target_id"], x["kind"], x["weight"], x["direction"])
            for x in r.json()["links"]
        ]

    async def until_links(
        self, who: Caller, item_id: str, want: list[Any], direction: str = "both"
    ) -> None:
        async def probe() -> bool:
            return await self.links(who, item_id, direction) == want

        await eventually(probe, what=f"links of {item_id} to be {want}")

    async def visible(self, who: Caller, item_id: str) -> None:
        async def probe() -> bool:
            return bool(await self.memory(who, item_id))

        await eventually(probe, what=f"memory {item_id} in the read model")


async def test_links_are_made_reweighted_listed_and_removed(services: dict[str, str]) -> None:
    ana = caller()
    async with httpx.AsyncClient(timeout=10) as http:
        api = Api(http, services)
        a = (await api.remember(ana, "The release needs the staging sign-off."))["item_id"]
        b = (await api.remember(ana, "Staging sign-off comes from Lee."))["item_id"]

        first = await api.act(ana, a, "link", target_id=b, kind="depends-on", weight=0.4)
        assert first.status_code == 200, first.text
        assert len(first.json()["events"]) == 1 and first.json()["item_id"] == a
        again = await api.act(ana, a, "link", target_id=b, kind="depends-on", weight=0.4)
        assert again.status_code == 200 and again.json()["events"] == []  # changes nothing
        await api.act(ana, a, "link", target_id=b, kind="depends-on", weight=0.9)
        await api.until_links(ana, a, [(a, b, "depends-on", 0.9, "out")])
        await api.until_links(ana, b, [(a, b, "depends-on", 0.9, "in")])
        assert await api.links(ana, b, "out") == []

        # related_ids on a save write "related" links from the new memory.
        saved = await api.remember(ana, "Lee is on leave in May.", related_ids=[b])
        assert len(saved["events"]) == 2
        await api.until_links(
            ana, b, [(saved["item_id"], b, "related", None, "in"), (a, b, "depends-on", 0.9, "in")]
        )

        gone = await api.act(ana, a, "unlink", target_id=b, kind="depends-on")
        assert gone.status_code == 200, gone.text
        await api.until_links(ana, a, [])
        missing = await api.act(ana, a, "unlink", target_id=b, kind="depends-on")
        assert (missing.status_code, missing.json()["code"]) == (404, "not_found")


async def test_bad_links_get_clear_errors(services: dict[str, str]) -> None:
    ana = caller()
    async with httpx.AsyncClient(timeout=10) as http:
        api = Api(http, services)
        a = (await api.remember(ana, "Invoices go out on the first."))["item_id"]
        b = (await api.remember(ana, "Invoices are in EUR."))["item_id"]
        for body, status, code in [
            ({"target_id": b, "kind": "supersedes"}, 422, "invalid"),  # reserved
            ({"target_id": b, "weight": 2}, 422, "invalid"),
            ({"target_id": a}, 422, "invalid"),  # itself
            ({"target_id": "no-such-memory"}, 404, "not_found"),
        ]:
            r = await api.act(ana, a, "link", **body)
            assert (r.status_code, r.json()["code"]) == (status, code), r.text
            assert r.headers["content-type"].startswith("application/problem+json")
        for n in range(16):  # 16 kinds toward one memory, then the bound
            assert (await api.act(ana, a, "link", target_id=b, kind=f"k{n}")).status_code == 200
        over = await api.act(ana, a, "link", target_id=b, kind="k16")
        assert (over.status_code, over.json()["code"]) == (422, "link_capacity_exceeded")
        assert over.json()["limit"] == 16


async def test_links_reach_only_memories_the_caller_can_see(services: dict[str, str]) -> None:
    ana = caller()
    bob = caller(org=ana.org, member="bob")
    async with httpx.AsyncClient(timeout=10) as http:
        api = Api(http, services)
        mine = (await api.remember(ana, "Ana reviews the API changes."))["item_id"]
        shared = await api.remember(bob, "The API freeze is on Friday.", scope="shared")
        private = (await api.remember(bob, "Bob's notes on the freeze."))["item_id"]
        await api.visible(bob, shared["item_id"])
        await api.visible(bob, private)

        # A teammate's shared memory is linkable; their private one is not there for Ana.
        ok = await api.act(ana, mine, "link", target_id=shared["item_id"])
        assert ok.status_code == 200, ok.text
        hidden = await api.act(ana, mine, "link", target_id=private)
        assert (hidden.status_code, hidden.json()["code"]) == (404, "not_found")
        # Ana cannot link from Bob's memory either: it is no memory of her stream.
        theirs = await api.act(ana, shared["item_id"], "link", target_id=mine)
        assert theirs.status_code == 404

        await api.until_links(
            ana, shared["item_id"], [(mine, shared["item_id"], "related", None, "in")]
        )
        # Bob sees the shared memory but not Ana's private one: not the link between them.
        assert await api.links(bob, shared["item_id"]) == []
        r = await http.get(f"{api.recall}/v1/memories/{mine}/links", headers=bob.headers)
        assert (r.status_code, r.json()["code"]) == (404, "not_found")

        # A forgotten memory of a scope Ana sees answers as in her own stream: 410.
        gone = await http.request(
            "DELETE",
            f"{api.command}/v1/memories/{shared['item_id']}",
            headers=bob.headers,
            json={"scope": "shared"},
        )
        assert gone.status_code == 200, gone.text
        later = (await api.remember(ana, "Ana drafts the freeze notice."))["item_id"]
        refused = await api.act(ana, later, "link", target_id=shared["item_id"])
        assert (refused.status_code, refused.json()["code"]) == (410, "forgotten")


async def test_archiving_writes_supersedes_and_forgetting_removes_links(
    services: dict[str, str],
) -> None:
    ana = caller()
    async with httpx.AsyncClient(timeout=10) as http:
        api = Api(http, services)
        old = (await api.remember(ana, "Standup is at 9:30."))["item_id"]
        new = (await api.remember(ana, "Standup is at 10:00."))["item_id"]
        note = (await api.remember(ana, "Standup notes live in the wiki.", related_ids=[old, new]))[
            "item_id"
        ]

        archived = await api.act(ana, old, "archive", superseded_by=new)
        assert archived.status_code == 200, archived.text
        await api.until_links(
            ana, new, [(new, old, "supersedes", None, "out"), (note, new, "related", None, "in")]
        )
        await api.act(ana, old, "unarchive")
        await api.until_links(ana, new, [(note, new, "related", None, "in")])

        forgotten = await http.delete(f"{api.command}/v1/memories/{note}", headers=ana.headers)
        assert forgotten.status_code == 200, forgotten.text
        await api.until_links(ana, new, [])
        await api.until_links(ana, old, [])
        refused = await api.act(ana, new, "link", target_id=note)
        assert (refused.status_code, refused.json()["code"]) == (410, "forgotten")
        await api.act(ana, old, "archive", superseded_by=new)
        await api.until_links(ana, old, [(new, old, "supersedes", None, "in")])

    # A replay of the log rebuilds the same links (the checksum covers memory.links).
    common = CommonSettings()
    name = f"engram_links_{ana.org.replace('-', '_')}"
    async with shadow_database(common.database_url, name) as shadow:
        report = await replay(
            common.database_url,
            shadow,
            common.kafka_bootstrap_servers,
            MasterKey(load_master_key(common)),
            org_pattern=ana.org,
        )
        assert report.matches, "the replay must rebuild the live links"
        replayed = await asyncpg.connect(shadow)
        try:
            rows = await replayed.fetch("SELECT source_id, target_id, kind FROM memory.links")
        finally:
            await replayed.close()
    assert [tuple(r) for r in rows] == [(new, old, "supersedes")]


async def test_a_kafka_caller_links_and_gets_a_rejection_reply_for_a_bad_target(
    services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    ana = caller()
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    stream = f"{ana.org}/member:ana"
    async with httpx.AsyncClient(timeout=10) as http:
        api = Api(http, services)
        a = (await api.remember(ana, "Deploys need a green build."))["item_id"]
        b = (await api.remember(ana, "The build runs on every push."))["item_id"]
    good, bad = new_command_id(), new_command_id()
    await send_commands(
        bootstrap,
        [
            CommandEnvelope(
                command_id=good,
                type="LinkMemory",
                token=ana.token,
                stream_id=stream,
                payload={"item_id": a, "target_id": b, "kind": "depends-on"},
            ),
            CommandEnvelope(
                command_id=bad,
                type="LinkMemory",
                token=ana.token,
                stream_id=stream,
                payload={"item_id": a, "target_id": "nowhere"},
            ),
        ],
    )
    replies = await read_replies(bootstrap, {good, bad})
    [ok], [rejected] = replies[good], replies[bad]
    assert ok.ok and len(ok.events) == 1, ok
    assert not rejected.ok and rejected.rejection is not None
    assert (rejected.rejection.code, rejected.rejection.status) == ("not_found", 404)
    async with httpx.AsyncClient(timeout=10) as http:
        await Api(http, services).until_links(ana, a, [(a, b, "depends-on", None, "out")])
