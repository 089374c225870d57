"""A run's cap on candidates (seed 001: a task makes at most three proposals) through the
services: three by default, the org's policy sets another cap or none."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import Caller, caller

pytestmark = pytest.mark.e2e


async def propose(
    http: httpx.AsyncClient, command: str, who: Caller, run_id: str, text: str
) -> httpx.Response:
    """An agent's save the user did not ask for: a candidate of the run."""
    return await http.post(
        f"{command}/v1/memories", headers=who.headers, json={"content": text, "run_id": run_id}
    )


async def set_policy(http: httpx.AsyncClient, recall: str, org: str, **policy: Any) -> None:
    admin = caller(org=org, member="root", roles=("admin",))
    r = await http.put(f"{recall}/v1/policy", headers=admin.headers, json=policy)
    assert r.status_code == 200, r.text
    assert r.json()["max_candidates_per_run"] == policy["max_candidates_per_run"]


async def test_a_run_proposes_three_candidates_then_is_refused(services: dict[str, str]) -> None:
    helper = caller(agent="helper")
    command = services["command"]
    async with httpx.AsyncClient(timeout=10) as http:
        for n in range(3):
            r = await propose(http, command, helper, "run-1", f"Maybe the office moves {n}.")
            assert (r.status_code, r.json()["status"]) == (201, "candidate"), r.text
        refused = await propose(http, command, helper, "run-1", "Maybe the office moves 4.")
        assert refused.status_code == 429, refused.text
        assert refused.headers["content-type"] == "application/problem+json"
        problem = refused.json()
        assert (problem["code"], problem["run_id"], problem["max_candidates_per_run"]) == (
            "candidate_limit_reached",
            "run-1",
            3,
        )
        other = await propose(http, command, helper, "run-2", "Maybe the office moves 4.")
        assert other.status_code == 201, other.text


async def test_the_orgs_policy_sets_the_cap_or_none(services: dict[str, str]) -> None:
    command, recall = services["command"], services["recall"]
    one, unlimited = caller(agent="helper"), caller(agent="helper")
    async with httpx.AsyncClient(timeout=10) as http:
        # Set before each org's first command, so the writer reads them fresh.
        await set_policy(http, recall, one.org, max_candidates_per_run=1)
        await set_policy(http, recall, unlimited.org, max_candidates_per_run=None)
        assert (await propose(http, command, one, "r", "Perhaps A.")).status_code == 201
        assert (await propose(http, command, one, "r", "Perhaps B.")).status_code == 429
        for n in range(5):
            r = await propose(http, command, unlimited, "r", f"Perhaps {n}.")
            assert r.status_code == 201, r.text
        bad = await http.put(
            f"{recall}/v1/policy",
            headers=caller(org=one.org, roles=("admin",)).headers,
            json={"max_candidates_per_run": 0},
        )
        assert bad.status_code == 422


async def test_the_orgs_quota_of_memories_per_scope(services: dict[str, str]) -> None:
    """Seed 004: storage quotas protect the service (a seed coverage audit found none)."""
    command, recall = services["command"], services["recall"]
    ana = caller()
    async with httpx.AsyncClient(timeout=10) as http:
        # Set before the org's first command, so the writer reads it fresh.
        await set_policy(http, recall, ana.org, max_memories_per_scope=2, max_candidates_per_run=3)
        saved = []
        for n in range(2):
            r = await http.post(
                f"{command}/v1/memories", headers=ana.headers, json={"content": f"Fact {n}."}
            )
            assert r.status_code == 201, r.text
            saved.append(r.json()["item_id"])
        full = await http.post(
            f"{command}/v1/memories", headers=ana.headers, json={"content": "Fact 2."}
        )
        assert full.status_code == 429, full.text
        assert (full.json()["code"], full.json()["max_memories_per_scope"]) == (
            "memory_quota_reached",
            2,
        )
        other_scope = await http.post(
            f"{command}/v1/memories",
            headers=ana.headers,
            json={"content": "Fact 2.", "scope": "shared"},
        )
        assert other_scope.status_code == 201, other_scope.text  # per scope
        forgot = await http.post(
            f"{command}/v1/memories/{saved[0]}/forget", headers=ana.headers, json={}
        )
        assert forgot.status_code == 200, forgot.text
        fits = await http.post(
            f"{command}/v1/memories", headers=ana.headers, json={"content": "Fact 2."}
        )
        assert fits.status_code == 201, fits.text
