"""Session switches (seed 002): `use` gives a session's runs its own memories, `generate`
lets the extractor learn from its turns; the org sets the defaults, a session overrides
each or follows the org again (null). The org's `agent_memory` off teaches agents
nothing from their turns."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx
import pytest

from contracts.commands import ScopeChoice
from contracts.conversations import ConversationTurn
from tests.conftest import Caller, caller
from tests.support import eventually, publish_turns

pytestmark = pytest.mark.e2e


async def test_use_decides_whether_runs_get_the_sessions_memories(services: dict[str, str]) -> None:
    ana = caller(session="trip")
    command, recall = services["command"], services["recall"]
    async with httpx.AsyncClient(timeout=10) as http:

        async def switches(**body: Any) -> dict[str, Any]:
            r = (
                await http.put(f"{recall}/v1/session", headers=ana.headers, json=body)
                if body
                else await http.get(f"{recall}/v1/session", headers=ana.headers)
            )
            assert r.status_code == 200, r.text
            return dict(r.json())

        assert await switches() == {
            "session": "trip",
            "settings": {"use": True, "generate": True},
            "overrides": {"use": None, "generate": None},
            "processed": [],
        }
        saved = await http.post(
            f"{command}/v1/memories",
            headers=ana.headers,
            json={"content": "The trip budget is 1500 EUR.", "scope": "session"},
        )
        item = saved.json()["item_id"]

        async def recalled() -> list[str]:
            r = await http.post(
                f"{recall}/v1/recall",
                headers=ana.headers,
                json={"query": "what is the trip budget?"},
            )
            return [i["id"] for i in r.json()["items"]]

        async def given() -> bool:
            return item in await recalled()

        async def generations() -> tuple[str, str]:
            packet = await http.post(
                f"{recall}/v1/recall",
                headers=ana.headers,
                json={"query": "budget", "preview": True},
            )
            now = await http.get(f"{recall}/v1/generation", headers=ana.headers)
            return packet.json()["generation"], now.json()["generation"]

        await eventually(given, what="the session's memory in a packet")
        on = await generations()
        off = await switches(use=False)
        assert (off["settings"], off["overrides"]) == (
            {"use": False, "generate": True},
            {"use": False, "generate": None},
        )
        assert item not in await recalled()
        # QA: a run checks the generation its packet gave against /v1/generation; with
        # `use` off the two differed, so every run looked stale.
        packet_gen, now_gen = await generations()
        assert packet_gen == now_gen != on[1] and on[0] == on[1]
        again = await switches(use=None)  # follows the org again: on
        assert again["settings"]["use"] is True and again["overrides"]["use"] is None
        assert item in await recalled()

        # The org's default applies to a session that sets nothing.
        admin = caller(org=ana.org, member="root", roles=("admin",))
        r = await http.put(
            f"{recall}/v1/policy", headers=admin.headers, json={"session_use": False}
        )
        assert r.status_code == 200 and r.json()["session_use"] is False
        assert (await switches())["settings"]["use"] is False
        assert item not in await recalled()

        nobody = caller()
        r = await http.get(f"{recall}/v1/session", headers=nobody.headers)
        assert (r.status_code, r.json()["code"]) == (403, "forbidden")
        bad = await http.put(f"{recall}/v1/session", headers=ana.headers, json={"use": "no"})
        assert bad.status_code == 422


async def test_generate_off_lets_the_extractor_learn_nothing_from_the_session(
    services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    quiet = caller(session="quiet")
    chatty = caller(org=quiet.org, member=quiet.member, session="chatty")
    async with httpx.AsyncClient(timeout=10) as http:
        r = await http.put(
            f"{services['recall']}/v1/session", headers=quiet.headers, json={"generate": False}
        )
        assert r.json()["settings"]["generate"] is False
        # One run, so one partition and this order: once the second turn is learned
        # from, the first has been read too.
        await publish_turns(
            stack_settings["KAFKA_BOOTSTRAP_SERVERS"],
            turn(quiet, "t-quiet", "Remember that I prefer aisle seats."),
            turn(chatty, "t-chatty", "Remember that I prefer window seats."),
        )

        async def candidates(who: Caller) -> list[str]:
            r = await http.get(
                f"{services['recall']}/v1/memories",
                headers=who.headers,
                params={"status": "candidate"},
            )
            return [m["content"] for m in r.json()["memories"] if m["scope"].startswith("session")]

        async def learned() -> list[str] | None:
            return await candidates(chatty) or None

        assert await eventually(learned, what="a candidate from the chatty session") == [
            "I prefer window seats."
        ]
        assert await candidates(quiet) == []
        # Seed 002's `processed`: the session's turns the extractor has read.
        r = await http.get(f"{services['recall']}/v1/session", headers=chatty.headers)
        assert r.json()["processed"] == ["t-chatty"]
        stranger = caller(session="chatty")  # another org's session of the same name
        r = await http.get(f"{services['recall']}/v1/session", headers=stranger.headers)
        assert r.json()["processed"] == []
        # The session's change log says the extractor made it (seed 002's consolidation).
        r = await http.get(
            f"{services['recall']}/v1/changes", headers=chatty.headers, params={"scope": "session"}
        )
        assert [(c["type"], c["made_by"]) for c in r.json()["changes"]] == [
            ("MemoryRemembered", "extraction")
        ]


def turn(who: Caller, turn_id: str, message: str, scope: ScopeChoice = "session") -> bytes:
    return (
        ConversationTurn(
            turn_id=turn_id,
            run_id="run-1",
            token=who.token,
            user_message=message,
            completed_at=datetime.now(UTC),
            scope=scope,
        )
        .model_dump_json()
        .encode()
    )


async def test_agent_memory_off_lets_agents_learn_nothing_from_their_turns(
    services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    helper, learning = caller(agent="helper"), caller(agent="helper")  # two orgs
    admin = caller(org=helper.org, member="root", roles=("admin",))
    recall = services["recall"]
    async with httpx.AsyncClient(timeout=10) as http:
        r = await http.put(
            f"{recall}/v1/policy", headers=admin.headers, json={"agent_memory": False}
        )
        assert r.status_code == 200 and r.json()["agent_memory"] is False
        # One run, so one partition and this order: once the second turn is learned from,
        # the first has been read too.
        aisle = "Remember that I prefer aisle seats."
        await publish_turns(
            stack_settings["KAFKA_BOOTSTRAP_SERVERS"],
            turn(helper, "t-agent", aisle, "agent"),
            turn(learning, "t-agent", aisle, "agent"),
            turn(helper, "t-own", "Remember that I prefer window seats.", "private"),
        )

        async def candidates(who: Caller, scope: str) -> list[str]:
            r = await http.get(
                f"{recall}/v1/memories", headers=who.headers, params={"status": "candidate"}
            )
            return [m["content"] for m in r.json()["memories"] if m["scope"].startswith(scope)]

        async def learned(who: Caller, scope: str) -> list[str] | None:
            return await candidates(who, scope) or None

        # The org that keeps agent memory on (the default) teaches its agent.
        assert await eventually(
            lambda: learned(learning, "agent"), what="a candidate in the other org's agent memory"
        ) == ["I prefer aisle seats."]
        assert await eventually(
            lambda: learned(helper, "member"), what="a candidate in the member's own memory"
        ) == ["I prefer window seats."]
        # The extractor read the agent turn first (one run: one partition, in order) and
        # skipped it: it records the turns it learned from, and that one is not among them.
        conn = await asyncpg.connect(stack_settings["DATABASE_URL"])
        try:
            handled = await conn.fetch(
                "SELECT turn_id FROM extractor.turns WHERE org = $1", helper.org
            )
        finally:
            await conn.close()
        assert [r["turn_id"] for r in handled] == ["t-own"]
        assert await candidates(helper, "agent") == []


async def test_an_orgs_memory_off_hides_it_from_agents_and_keeps_it_for_people(
    services: dict[str, str],
) -> None:
    """Seed 004: disabling the memory capability hides its tools but keeps the data; one
    org's switch touches no other org (a seed coverage audit found no switch)."""
    ana = caller()
    agent = caller(org=ana.org, agent="helper")
    other = caller(agent="helper")  # another org, memory on
    admin = caller(org=ana.org, member="root", roles=("admin",))
    command, recall = services["command"], services["recall"]
    async with httpx.AsyncClient(timeout=10) as http:
        # Set before the org's first command, so the writer reads it fresh.
        r = await http.put(f"{recall}/v1/policy", headers=admin.headers, json={"memory": False})
        assert r.status_code == 200 and r.json()["memory"] is False
        save = await http.post(
            f"{command}/v1/memories",
            headers=agent.headers,
            json={"content": "x", "user_message": "remember x"},
        )
        assert (save.status_code, save.json()["code"]) == (403, "memory_off")
        saved = await http.post(
            f"{command}/v1/memories", headers=ana.headers, json={"content": "Standups are at 9:30."}
        )
        assert saved.status_code == 201, saved.text  # its people still save

        async def listed() -> bool:
            r = await http.get(f"{recall}/v1/memories", headers=ana.headers)
            return r.status_code == 200 and len(r.json()["memories"]) == 1

        await eventually(listed, what="the memory in its person's list")
        packet = await http.post(
            f"{recall}/v1/recall", headers=agent.headers, json={"query": "standups"}
        )
        assert (packet.status_code, packet.json()["items"], packet.json()["packet"]) == (
            200,
            [],
            "",
        )
        hidden = await http.get(f"{recall}/v1/memories", headers=agent.headers)
        assert (hidden.status_code, hidden.json()["code"]) == (403, "memory_off")
        forgot = await http.post(
            f"{command}/v1/memories/{saved.json()['item_id']}/forget", headers=ana.headers, json={}
        )
        assert forgot.status_code == 200, forgot.text
        elsewhere = await http.post(
            f"{command}/v1/memories",
            headers=other.headers,
            json={"content": "Lunch at noon.", "user_message": "Remember: lunch at noon."},
        )
        assert elsewhere.status_code == 201, elsewhere.text
        ingest = await http.post(
            f"{command}/v1/memories/ingest",
            headers=agent.headers,
            json={"messages": [{"content": "x"}]},
        )
        assert (ingest.status_code, ingest.json()["code"]) == (403, "memory_off")  # QA: 200
        cleared = await http.post(
            f"{command}/v1/memories/clear",
            headers=agent.headers,
            json={"confirm": True, "scope": "agent"},
        )
        assert cleared.status_code == 200, cleared.text  # erasing is never refused (QA)
        agent_admin = caller(org=ana.org, agent="helper", roles=("admin",))
        on_again = await http.put(
            f"{recall}/v1/policy", headers=agent_admin.headers, json={"memory": True}
        )
        assert on_again.status_code == 403, on_again.text  # QA: an agent switched it on


async def test_learning_apply_uses_what_the_extractor_learns_at_once(
    services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    """The org's `learning: apply` (seed 002's learned memory): the session's learned fact
    is active, and in the session's next packet, with no person's confirm; the org's
    private scopes still get candidates (seed 000)."""
    ana = caller(session="trip")
    admin = caller(org=ana.org, member="root", roles=("admin",))
    recall = services["recall"]
    async with httpx.AsyncClient(timeout=10) as http:
        bad = await http.put(
            f"{recall}/v1/policy", headers=admin.headers, json={"learning": "always"}
        )
        assert bad.status_code == 422
        r = await http.put(f"{recall}/v1/policy", headers=admin.headers, json={"learning": "apply"})
        assert r.status_code == 200 and r.json()["learning"] == "apply"
        await publish_turns(
            stack_settings["KAFKA_BOOTSTRAP_SERVERS"],
            turn(ana, "t-1", "Remember that I prefer window seats."),
            turn(ana, "t-2", "Remember that I prefer tea over coffee.", scope="private"),
        )

        async def listed(status: str, scope: str) -> list[dict[str, Any]] | None:
            r = await http.get(
                f"{recall}/v1/memories", headers=ana.headers, params={"status": status}
            )
            return [m for m in r.json()["memories"] if m["scope"].startswith(scope)] or None

        [fact] = await eventually(
            lambda: listed("active", "session"), what="the learned fact, active"
        )
        assert fact["content"] == "I prefer window seats." and fact["inferred"] is True
        [waits] = await eventually(
            lambda: listed("candidate", "member"), what="the private scope's candidate"
        )
        assert waits["content"] == "I prefer tea over coffee."
        assert await listed("candidate", "session") is None
        packet = await http.post(
            f"{recall}/v1/recall", headers=ana.headers, json={"query": "which seat do I like?"}
        )
        assert fact["item_id"] in [i["id"] for i in packet.json()["items"]]
        r = await http.get(f"{recall}/v1/changes", headers=ana.headers, params={"scope": "session"})
        assert [(c["type"], c["made_by"]) for c in r.json()["changes"]] == [
            ("MemoryRemembered", "extraction")
        ]
        # A person's correction makes it a confirmed fact, which a read says.
        r = await http.post(
            f"{services['command']}/v1/memories/{fact['item_id']}/correct",
            headers=ana.headers,
            json={"content": "I prefer aisle seats.", "base_revision": 1, "scope": "session"},
        )
        assert r.status_code == 200, r.text

        async def confirmed() -> bool:
            r = await http.get(f"{recall}/v1/memories/{fact['item_id']}", headers=ana.headers)
            return r.json()["revision"] == 2 and r.json()["inferred"] is False

        await eventually(confirmed, what="the corrected fact, confirmed")


async def test_processed_lists_the_sessions_turns_in_the_order_read(
    services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    """QA: turns read in one batch came out by id, and a member's private turn sent from
    the session was listed to the session's every member; a review: a client sending its
    turns as private (the default) saw none. A member sees the session's own turns and
    its own; another member of the session, only the session's."""
    ana = caller(session="order")
    bob = caller(org=ana.org, member="bob", session="order")
    async with httpx.AsyncClient(timeout=10) as http:
        await publish_turns(
            stack_settings["KAFKA_BOOTSTRAP_SERVERS"],
            turn(ana, "t-c", "Remember that I prefer aisle seats."),
            turn(ana, "t-a", "Remember that I prefer window seats."),
            turn(ana, "t-mine", "Remember that I like tea.", scope="private"),
            turn(ana, "t-b", "Remember that I prefer tea."),
        )

        async def processed(who: Caller, count: int) -> list[str] | None:
            r = await http.get(f"{services['recall']}/v1/session", headers=who.headers)
            got = list(r.json()["processed"])
            return got if len(got) == count else None

        assert await eventually(lambda: processed(ana, 4), what="four turns read") == [
            "t-c",
            "t-a",
            "t-mine",
            "t-b",
        ]
        assert await processed(bob, 3) == ["t-c", "t-a", "t-b"]
