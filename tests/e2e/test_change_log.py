"""A scope's version and change log (seed 002's agent memory: ``expected`` is the current
version, and the log lists each change with its version, time, who made it and the key)."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import caller
from tests.support import eventually

pytestmark = pytest.mark.e2e


async def test_agent_memory_has_a_versioned_change_log(services: dict[str, str]) -> None:
    agent = caller(agent="helper")
    command, recall = services["command"], services["recall"]
    async with httpx.AsyncClient(timeout=10) as http:
        first = await http.post(
            f"{command}/v1/memories",
            headers=agent.headers,
            json={
                "content": "Run the tests before you report that work is done.",
                "kind": "procedure",
                "key": "tests-first",
                "scope": "agent",
                "user_message": "remember: run the tests before you report that work is done.",
                "expected_version": 0,
            },
        )
        assert first.status_code == 201, first.text
        assert first.json()["seq"] == 1
        stale = await http.post(
            f"{command}/v1/memories",
            headers=agent.headers,
            json={"content": "Keep answers short.", "scope": "agent", "expected_version": 0},
        )
        assert (stale.status_code, stale.json()["code"]) == (409, "conflict")
        assert stale.json()["current_version"] == 1
        item = first.json()["item_id"]
        fixed = await http.post(
            f"{command}/v1/memories/{item}/correct",
            headers=agent.headers,
            json={
                "scope": "agent",
                "base_revision": 1,
                "expected_version": 1,
                "content": "Run the whole test suite before reporting.",
                "user_message": "Please correct that: run the whole test suite before reporting.",
            },
        )
        assert fixed.status_code == 200, fixed.text

        async def log() -> list[dict[str, object]] | None:
            r = await http.get(
                f"{recall}/v1/changes", headers=agent.headers, params={"scope": "agent"}
            )
            changes = r.json()["changes"]
            return changes if len(changes) == 2 else None

        changes = await eventually(log, what="two changes in the agent's log")
        assert [(c["version"], c["type"], c["key"], c["agent"], c["made_by"]) for c in changes] == [
            (1, "MemoryRemembered", "tests-first", "helper", "agent"),
            (2, "MemoryRevised", "tests-first", "helper", "agent"),
        ]
        later = await http.get(
            f"{recall}/v1/changes", headers=agent.headers, params={"scope": "agent", "after": 1}
        )
        assert [c["version"] for c in later.json()["changes"]] == [2]
        assert later.json()["version"] == 2
        # The agent's memory is one for every member who uses it (seed 002), and the same
        # agent id in another org is another agent; a scope the token lacks is refused.
        bob = caller(org=agent.org, member="bob", agent="helper")
        shared = await http.get(
            f"{recall}/v1/changes", headers=bob.headers, params={"scope": "agent"}
        )
        assert [c["version"] for c in shared.json()["changes"]] == [1, 2]
        elsewhere = caller(agent="helper")
        theirs = await http.get(
            f"{recall}/v1/changes", headers=elsewhere.headers, params={"scope": "agent"}
        )
        assert theirs.json()["changes"] == []
        no_session = await http.get(
            f"{recall}/v1/changes", headers=agent.headers, params={"scope": "session"}
        )
        assert (no_session.status_code, no_session.json()["code"]) == (403, "forbidden")
