"""Promotion and fork (seed 002) through the services: a subagent's session memory, its
lasting entries promoted into its agent's memory; a fork of the session takes a copy of
its memory and keeps its switches."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from engram.devstack import stack
from tests.conftest import Caller, caller
from tests.e2e.api import ServicesApi
from tests.support import eventually

pytestmark = pytest.mark.e2e


class Api(ServicesApi):
    async def save(self, who: Caller, text: str, kind: str, **kw: Any) -> str:
        """A confirmed session memory (the user asked for it)."""
        saved = await self.remember(
            who, text, kind=kind, scope="session", user_message=f"Remember this: {text}", **kw
        )
        assert saved["status"] == "active", saved
        return str(saved["item_id"])

    async def memories(self, who: Caller, scope: str) -> dict[str, dict[str, Any]]:
        r = await self.http.get(
            f"{self.recall}/v1/memories", headers=who.headers, params={"limit": 100}
        )
        return {m["content"]: m for m in r.json()["memories"] if m["scope"] == scope}

    async def until(self, who: Caller, scope: str, count: int) -> dict[str, dict[str, Any]]:
        async def probe() -> dict[str, dict[str, Any]] | None:
            found = await self.memories(who, scope)
            return found if len(found) == count else None

        return await eventually(probe, what=f"{count} memories in {scope}")

    async def made_by(self, who: Caller, scope: str) -> list[tuple[str, str]]:
        r = await self.http.get(
            f"{self.recall}/v1/changes", headers=who.headers, params={"scope": scope}
        )
        return [(c["type"], c["made_by"]) for c in r.json()["changes"]]


async def test_a_sessions_lasting_memories_are_promoted_and_a_fork_copies_it_all(
    services: dict[str, str],
) -> None:
    sub = caller(agent="helper", session="sub-1")
    async with httpx.AsyncClient(timeout=10) as http:
        api = Api(http, services)
        source = await api.save(
            sub, "Run the tests before you report.", "procedure", key="tests-first"
        )
        await api.save(sub, "The build for ticket 42 is red.", "fact")
        await api.until(sub, "session:sub-1", 2)

        promoted = await http.post(f"{api.command}/v1/session/promote", headers=sub.headers)
        assert promoted.status_code == 200, promoted.text
        [copied] = promoted.json()["copied"]
        assert copied["key"] == "tests-first"
        agent_memory = await api.until(sub, "agent:helper", 1)
        entry = agent_memory["Run the tests before you report."]
        assert (entry["kind"], entry["key"]) == ("procedure", "tests-first")
        again = await http.post(f"{api.command}/v1/session/promote", headers=sub.headers)
        assert again.json()["copied"] == []  # held already: nothing twice
        # The agent's change log says what made the entry (seed 002: "promotion").
        assert await api.made_by(sub, "agent") == [("MemoryRemembered", "promotion")]

        # A retracted fact of the parent (seed 002's Forget of a session fact).
        await api.save(sub, "The trip budget is 900 EUR.", "fact", key="budget")
        r = await http.post(
            f"{api.command}/v1/memories/retract",
            headers=sub.headers,
            json={"key": "budget", "scope": "session"},
        )
        assert r.status_code == 200, r.text
        await api.until(sub, "session:sub-1", 2)  # the retraction is projected

        # The parent session turned learning off; a fork of it keeps that, and its memory.
        r = await http.put(
            f"{api.recall}/v1/session", headers=sub.headers, json={"generate": False}
        )
        assert r.status_code == 200
        fork = caller(
            org=sub.org, member=sub.member, agent="helper", session="sub-2", fork_of="sub-1"
        )
        forked = await http.post(f"{api.command}/v1/session/fork", headers=fork.headers)
        assert forked.status_code == 200, forked.text
        # It takes a copy of the session's history: the retracted fact, retracted.
        assert len(forked.json()["copied"]) == 3
        assert "budget" in [c["key"] for c in forked.json()["copied"]]
        copies = await api.until(fork, "session:sub-2", 2)
        r = await http.get(
            f"{api.recall}/v1/memories", headers=fork.headers, params={"status": "disabled"}
        )
        assert [(m["content"], m["key"]) for m in r.json()["memories"]] == [
            ("The trip budget is 900 EUR.", "budget")
        ]
        assert await api.made_by(fork, "session") == [("MemoryRemembered", "fork")] * 3 + [
            ("MemoryStatusChanged", "fork")
        ]
        assert await api.made_by(sub, "session") == [("MemoryRemembered", "agent")] * 3 + [
            ("MemoryStatusChanged", "agent")
        ]
        copy_id = copies["Run the tests before you report."]["item_id"]
        got = await http.get(f"{api.recall}/v1/memories/{copy_id}", headers=fork.headers)
        assert got.json()["sources"][0] == source  # each copy names what it copies
        view = await http.get(f"{api.recall}/v1/session", headers=fork.headers)
        assert view.json()["settings"] == {"use": True, "generate": False}
        assert view.json()["overrides"]["generate"] is False
        # The fork keeps them as they were: its source turning learning on changes nothing.
        r = await http.put(f"{api.recall}/v1/session", headers=sub.headers, json={"generate": None})
        assert r.json()["settings"]["generate"] is True
        view = await http.get(f"{api.recall}/v1/session", headers=fork.headers)
        assert view.json()["settings"] == {"use": True, "generate": False}

        twice = await http.post(f"{api.command}/v1/session/fork", headers=fork.headers)
        assert (twice.status_code, twice.json()["code"]) == (403, "forbidden")
        plain = caller(org=sub.org, session="sub-3")
        refused = await http.post(f"{api.command}/v1/session/fork", headers=plain.headers)
        assert (refused.status_code, refused.json()["code"]) == (422, "invalid")
        no_agent = await http.post(f"{api.command}/v1/session/promote", headers=plain.headers)
        assert (no_agent.status_code, no_agent.json()["code"]) == (403, "forbidden")


async def test_a_fork_copies_its_sources_newest_memories_or_nothing(
    services: dict[str, str],
) -> None:
    """The source is read from the read model: the fork waits for the projector to hold
    what the log held, and while the projector is down it is refused, copying nothing,
    so that a retry copies it all."""
    source = caller(agent="helper", session="src")
    fork = caller(
        org=source.org, member=source.member, agent="helper", session="dst", fork_of="src"
    )
    async with httpx.AsyncClient(timeout=30) as http:
        api = Api(http, services)
        await asyncio.to_thread(stack.stop_services, None, ["projector"])
        try:
            await api.save(source, "The staging database is read-only on Mondays.", "fact")
            await api.save(source, "Deploys need two approvals.", "decision")
            refused = await http.post(f"{api.command}/v1/session/fork", headers=fork.headers)
            assert (refused.status_code, refused.json()["code"]) == (503, "not_readable_yet")
        finally:
            await asyncio.to_thread(stack.start_services, None, ["projector"], ensure_infra=False)
        # At once, without waiting to see the source's memories: the fork waits for them.
        forked = await http.post(f"{api.command}/v1/session/fork", headers=fork.headers)
        assert forked.status_code == 200, forked.text
        assert len(forked.json()["copied"]) == 2
        await api.save(source, "Run the linters before you push.", "procedure")
        promoted = await http.post(f"{api.command}/v1/session/promote", headers=source.headers)
        assert [c["key"] for c in promoted.json()["copied"]] == [None, None]  # both lasting


async def test_a_fork_keeps_every_retracted_fact_retracted(services: dict[str, str]) -> None:
    """QA: a fork left out a retracted fact whose key a newer fact held, and one archived
    after it was retracted; an agent in the fork then saved either as a fact again, where
    in the source it waits for a person. Now both come across retracted."""
    src = caller(session="a")  # a person: an agent does not bring a retracted key back
    fork = caller(org=src.org, member=src.member, agent="helper", session="b", fork_of="a")
    async with httpx.AsyncClient(timeout=10) as http:
        api = Api(http, services)

        async def retract(key: str) -> None:
            r = await http.post(
                f"{api.command}/v1/memories/retract",
                headers=src.headers,
                json={"key": key, "scope": "session"},
            )
            assert r.status_code == 200, r.text

        await api.save(src, "The flight is LH123.", "fact", key="flight")
        await retract("flight")
        await api.save(src, "The flight is AF456.", "fact", key="flight")
        seat = await api.save(src, "Ana sits by the aisle.", "preference", key="seat")
        await retract("seat")
        r = await http.post(
            f"{api.command}/v1/memories/{seat}/archive",
            headers=src.headers,
            json={"scope": "session"},
        )
        assert r.status_code == 200, r.text
        await api.until(src, "session:a", 1)  # all of it projected: one active memory

        forked = await http.post(f"{api.command}/v1/session/fork", headers=fork.headers)
        assert forked.status_code == 200, forked.text
        assert len(forked.json()["copied"]) == 3
        await api.until(fork, "session:b", 1)
        for status, text in (
            ("disabled", "The flight is LH123."),
            ("archived", "Ana sits by the aisle."),
        ):
            r = await http.get(
                f"{api.recall}/v1/memories", headers=fork.headers, params={"status": status}
            )
            assert [m["content"] for m in r.json()["memories"]] == [text], status
        # The agent's saves of them wait for a person, as they would in the source.
        for text, key in (("The flight is LH123.", "flight"), ("Ana sits by the aisle.", "seat")):
            saved = await api.remember(
                fork, text, scope="session", key=key, user_message=f"Please remember this: {text}"
            )
            assert saved["status"] == "candidate", (text, saved)
