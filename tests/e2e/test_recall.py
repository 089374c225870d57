"""Recall through the services: the seeds' packet rules, contexts, generations, search."""

from __future__ import annotations

from functools import partial
from typing import Any

import httpx
import pytest

from services.recall.core import PREAMBLE
from tests.conftest import Caller, caller
from tests.support import eventually

pytestmark = pytest.mark.e2e


class Client:
    def __init__(self, http: httpx.AsyncClient, services: dict[str, str], who: Caller) -> None:
        self.http, self.services, self.who = http, services, who

    async def remember(self, **body: Any) -> dict[str, Any]:
        r = await self.http.post(
            f"{self.services['command']}/v1/memories", headers=self.who.headers, json=body
        )
        assert r.status_code == 201, r.text
        return dict(r.json())

    async def act(self, item_id: str, action: str, **body: Any) -> dict[str, Any]:
        r = await self.http.post(
            f"{self.services['command']}/v1/memories/{item_id}/{action}",
            headers=self.who.headers,
            json=body,
        )
        assert r.status_code == 200, r.text
        return dict(r.json())

    async def recall(self, query: str, **body: Any) -> dict[str, Any]:
        r = await self.http.post(
            f"{self.services['recall']}/v1/recall",
            headers=self.who.headers,
            json={"query": query, **body},
        )
        assert r.status_code == 200, r.text
        return dict(r.json())

    async def get(self, path: str) -> httpx.Response:
        return await self.http.get(f"{self.services['recall']}{path}", headers=self.who.headers)

    async def settled(self, query: str, n: int, omitted: int = 0, **body: Any) -> dict[str, Any]:
        """Recall until ``n`` items (and ``omitted`` more) come back: projection is
        asynchronous."""

        async def probe() -> dict[str, Any] | None:
            packet = await self.recall(query, **body)
            done = len(packet["items"]) == n and packet["omitted"] == omitted
            return packet if done else None

        return await eventually(probe, what=f"{n} items for {query!r}")


@pytest.fixture
async def client(services: dict[str, str]) -> Any:
    async with httpx.AsyncClient(timeout=30) as http:
        yield Client(http, services, caller())


async def test_pinned_first_headers_and_the_6000_character_cut(client: Client) -> None:
    pinned = await client.remember(
        content="Always answer in English.", pinned=True, kind="procedure"
    )
    long = [await client.remember(content=f"Rocket note {n}: " + "fuel " * 380) for n in range(4)]
    packet = await client.settled("rocket fuel", 3, omitted=2)  # pinned + two whole notes
    ids = [i["id"] for i in packet["items"]]
    assert ids[0] == pinned["item_id"] and packet["items"][0]["why"][0] == "pinned"
    assert len(packet["packet"]) <= 6000 and packet["omitted"] == 2
    assert packet["packet"].startswith(
        f"{PREAMBLE}\n\n[memory:{pinned['item_id']}@1; member:ana; procedure]"
    )
    for entry in packet["items"][1:]:  # every entry that is in the packet is there whole
        body = next(m for m in long if m["item_id"] == entry["id"])
        assert f"[memory:{body['item_id']}@1; member:ana; note]" in packet["packet"]
    assert packet["packet"].count("fuel") == 2 * 380


async def test_no_padding_and_memory_off(client: Client) -> None:
    await client.remember(content="The cat is called Miso.")
    await client.settled("cat", 1)
    empty = await client.recall("quantum chromodynamics")
    assert empty["items"] == [] and empty["packet"] == "" and empty["context_id"]
    off = await client.recall("cat", use_memory=False)
    assert off["items"] == [] and off["packet"] == "" and off["context_id"] is None


async def test_newest_first_up_to_8000_characters(client: Client) -> None:
    for n in range(3):
        await client.remember(content=f"Session fact {n}. " + "z" * 3500)
    packet = await client.settled("anything", 2, omitted=1, policy="newest_first")
    assert [i["why"] for i in packet["items"]] == [["newest#1"], ["newest#2"]]
    assert "Session fact 2." in packet["packet"] and "Session fact 0." not in packet["packet"]


async def test_preferences_always_then_keyword_matches(client: Client) -> None:
    pref = await client.remember(content="Ana likes short answers.", kind="preference")
    fact = await client.remember(content="The deploy window is Tuesday.")
    packet = await client.settled("deploy window", 2, policy="preferences_first")
    assert [i["id"] for i in packet["items"]] == [pref["item_id"], fact["item_id"]]


async def test_contexts_show_changed_and_forgotten(client: Client) -> None:
    a = await client.remember(content="The wifi password hint is blue.", title="Wifi hint")
    b = await client.remember(content="The wifi router is in the hall.", title="Router")
    packet = await client.settled("wifi", 2, run_id="run-1")
    generation = packet["generation"]
    await client.act(
        a["item_id"], "correct", base_revision=1, content="The wifi password hint is green."
    )
    r = await client.http.delete(
        f"{client.services['command']}/v1/memories/{b['item_id']}", headers=client.who.headers
    )
    assert r.status_code == 200

    async def context_moved() -> dict[str, tuple[str, str | None]] | None:
        body = (await client.get(f"/v1/contexts/{packet['context_id']}")).json()
        states = {e["id"]: (e["state"], e["title"]) for e in body["entries"]}
        return states if {s for s, _ in states.values()} == {"changed", "forgotten"} else None

    states = await eventually(context_moved, what="context states")
    # The forgotten memory's title leaves the run's record with it (seed 001's option).
    assert states == {a["item_id"]: ("changed", "Wifi hint"), b["item_id"]: ("forgotten", None)}
    assert (await client.get("/v1/generation")).json()["generation"] != generation
    other = caller()  # contexts follow visibility like everything else
    r = await client.http.get(
        f"{client.services['recall']}/v1/contexts/{packet['context_id']}", headers=other.headers
    )
    assert r.status_code == 404


async def test_generation_moves_with_every_change_to_active_memory(client: Client) -> None:
    first = (await client.get("/v1/generation")).json()
    item = await client.remember(content="Lunch is at noon.")

    async def moved(before: str) -> str | None:
        now = (await client.get("/v1/generation")).json()["generation"]
        return now if now != before else None

    after_save = await eventually(lambda: moved(first["generation"]))
    assert after_save == "0:1:0"
    await client.act(item["item_id"], "pin")
    assert await eventually(lambda: moved(after_save)) == "0:2:0"


async def test_search_returns_excerpts_and_omitted(client: Client) -> None:
    filler = "This paragraph says nothing useful about anything. " * 30
    runbook = await client.remember(
        content=filler + "Escalation: page the on-call rotation first, then the lead. " + filler
    )
    short = [
        await client.remember(content=f"Escalation contact {n} is listed in the wiki.")
        for n in range(3)
    ]
    await client.settled("escalation", 4)
    r = await client.http.post(
        f"{client.services['recall']}/v1/search",
        headers=client.who.headers,
        json={"query": "escalation page rotation", "limit": 10},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    hit = next(h for h in body["memories"] if h["id"] == runbook["item_id"])
    assert hit["truncated"] and hit["full_length"] > 1200 and len(hit["memory"]) <= 1200
    assert "page the on-call rotation" in hit["memory"]
    assert all(not h["truncated"] for h in body["memories"] if h["id"] != runbook["item_id"])
    assert {h["id"] for h in body["memories"]} | set() >= {s["item_id"] for s in short[:1]}
    assert body["omitted"] == 0


async def test_list_is_newest_first_and_paged(client: Client) -> None:
    ids = [(await client.remember(content=f"Paged fact {n}"))["item_id"] for n in range(5)]
    await client.settled("paged", 5)
    first = (await client.get("/v1/memories?limit=3")).json()
    assert [m["item_id"] for m in first["memories"]] == ids[::-1][:3]
    second = (await client.get(f"/v1/memories?limit=3&cursor={first['next']}")).json()
    assert [m["item_id"] for m in second["memories"]] == ids[::-1][3:]
    assert (await client.get("/v1/memories?cursor=nonsense")).status_code == 422


async def test_a_page_is_bounded_as_a_whole_and_goes_on_where_it_ended(client: Client) -> None:
    """Seed 004: a whole result is bounded, not just each memory in it (a seed audit: a
    page of 100 carried 47,910 characters). A page ends early; its next goes on from its
    last memory, so none is left out."""
    ids = [
        (await client.remember(content=f"Bounded fact {n}. " + "x" * 1_080))["item_id"]
        for n in range(20)
    ]

    async def pages() -> list[dict[str, Any]] | None:
        found, cursor = [], ""
        while True:
            found.append((await client.get(f"/v1/memories?limit=100{cursor}")).json())
            if not found[-1]["next"]:
                break
            cursor = f"&cursor={found[-1]['next']}"
        listed = sum(len(page["memories"]) for page in found)
        return found if listed == 20 else None

    first, second = await eventually(pages, what="20 memories projected, on two pages")
    assert 0 < len(first["memories"]) < 20, len(first["memories"])  # it ended early
    assert sum(len(m["content"]) for m in first["memories"]) <= 16_000
    assert [m["item_id"] for m in first["memories"] + second["memories"]] == ids[::-1]


async def test_an_org_chooses_its_default_policy(services: dict[str, str]) -> None:
    admin = caller(roles=("admin",))
    member = caller(admin.org, member="bo")
    async with httpx.AsyncClient(timeout=30) as http:
        url = f"{services['recall']}/v1/policy"
        assert (await http.get(url, headers=member.headers)).json()["policy"] == "hybrid"
        denied = await http.put(url, headers=member.headers, json={"policy": "newest_first"})
        assert denied.status_code == 403
        r = await http.put(
            url, headers=admin.headers, json={"policy": "newest_first", "max_chars": 4000}
        )
        assert r.status_code == 200 and r.json()["policy"] == "newest_first"
        client = Client(http, services, member)
        await client.remember(content="Older fact about llamas.")
        await client.remember(content="Newer fact about alpacas.")
        packet = await client.settled("unrelated question", 2)
        assert packet["policy"] == "newest_first"
        assert packet["items"][0]["why"] == ["newest#1"]


async def test_a_sessions_and_an_agents_memory_move_the_own_generation(
    services: dict[str, str],
) -> None:
    """'own' is every scope of the token's own, not only its member's (QA: a session's
    and an agent's saves, expiries and disables left the generation where it was)."""
    who = caller(agent="helper", session="s-1")
    async with httpx.AsyncClient(timeout=10) as http:

        async def generation() -> str:
            r = await http.get(f"{services['recall']}/v1/generation", headers=who.headers)
            return str(r.json()["generation"])

        async def moved_from(before: str) -> str | None:
            now = await generation()
            return now if now != before else None

        start = await generation()
        for scope in ("session", "agent"):
            saved = await http.post(
                f"{services['command']}/v1/memories",
                headers=who.headers,
                json={
                    "content": f"A {scope} fact.",
                    "scope": scope,
                    "user_message": f"Remember this: A {scope} fact.",
                },
            )
            assert saved.status_code == 201, saved.text
            start = await eventually(partial(moved_from, start), what=f"{scope} counted")
        assert start.split(":")[1] == "2"


async def test_a_quoted_phrase_is_matched_as_written(client: Client) -> None:
    """Seed 004's exact matching: a phrase in double quotes must appear as written (case
    aside), in the search and in a packet; its words in another order do not match."""
    exact = await client.remember(content="The release train leaves every second Tuesday.")
    await client.remember(content="The train for the release was late on Tuesday.")
    await client.remember(content="Tuesday's standup covers the release.")
    await client.settled("release train Tuesday", 3)
    r = await client.http.post(
        f"{client.services['recall']}/v1/search",
        headers=client.who.headers,
        json={"query": 'when does the "Release Train" leave?'},
    )
    assert r.status_code == 200, r.text
    assert [h["id"] for h in r.json()["memories"]] == [exact["item_id"]]
    assert "exact#1" in r.json()["memories"][0]["why"]
    packet = await client.recall('"release train"')
    assert [i["id"] for i in packet["items"]] == [exact["item_id"]]
    none = await client.recall('"train release"')
    assert none["items"] == []
    # At word boundaries, however its words are spaced (QA: "ERR-1042" found "ERR-10423").
    err = await client.remember(content="The payment service threw ERR-1042  twice.")
    await client.remember(content="The gateway threw ERR-10423 once.")
    await client.settled("threw", 2)
    r = await client.http.post(
        f"{client.services['recall']}/v1/search",
        headers=client.who.headers,
        json={"query": "\u201cerr-1042 twice\u201d"},
    )
    assert [h["id"] for h in r.json()["memories"]] == [err["item_id"]]
    r = await client.http.post(
        f"{client.services['recall']}/v1/search",
        headers=client.who.headers,
        json={"query": " ".join(f'"p{n}"' for n in range(6))},
    )
    assert (r.status_code, r.json()["code"]) == (422, "invalid")  # more is refused, not dropped
