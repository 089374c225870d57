"""An agent's memory has a person who answers for it (seeds 002 and 004): the member in
person, in the agent's scope (a token naming the agent with the ``person`` claim), lists
and confirms its candidates and brings back what was retracted, which the agent itself
may not (a seed audit: nobody could, so what the extractor learned there was never used)."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import caller
from tests.support import eventually

pytestmark = pytest.mark.e2e


async def test_the_member_in_person_confirms_and_brings_back_an_agents_memories(
    services: dict[str, str],
) -> None:
    agent = caller(agent="helper")
    owner = caller(org=agent.org, agent="helper", person=True)
    command, recall = services["command"], services["recall"]
    async with httpx.AsyncClient(timeout=10) as http:

        async def post(who: object, path: str, **body: object) -> httpx.Response:
            return await http.post(
                f"{command}{path}",
                headers=who.headers,  # type: ignore[attr-defined]
                json={"scope": "agent", **body},
            )

        guess = await post(
            agent, "/v1/memories", content="Ana likes short answers.", kind="preference"
        )
        assert guess.status_code == 201 and guess.json()["status"] == "candidate", guess.text
        refused = await post(agent, f"/v1/memories/{guess.json()['item_id']}/confirm")
        assert refused.status_code == 403, refused.text  # an agent proposes, never confirms

        async def listed() -> list[str] | None:
            r = await http.get(
                f"{recall}/v1/memories", headers=owner.headers, params={"status": "candidate"}
            )
            ids = [m["item_id"] for m in r.json()["memories"]] if r.status_code == 200 else []
            return ids or None

        assert await eventually(listed, what="the candidate in its person's list") == [
            guess.json()["item_id"]
        ]
        confirmed = await post(owner, f"/v1/memories/{guess.json()['item_id']}/confirm")
        assert confirmed.status_code == 200 and confirmed.json()["status"] == "active", (
            confirmed.text
        )

        rule = await post(
            agent,
            "/v1/memories",
            content="Run the tests before you report.",
            kind="procedure",
            key="tests-first",
            user_message="Remember: run the tests before you report.",
        )
        assert rule.json()["status"] == "active", rule.text
        item = rule.json()["item_id"]
        assert (await post(agent, f"/v1/memories/{item}/disable")).status_code == 200
        back = await post(agent, f"/v1/memories/{item}/enable")
        assert back.status_code == 403, back.text  # retracted stays retracted for it
        again = await post(
            agent,
            "/v1/memories",
            content="Run the tests before you report.",
            kind="procedure",
            key="tests-first",
            user_message="Remember: run the tests before you report.",
        )
        assert again.json()["status"] == "candidate", again.text  # nor by a new save
        enabled = await post(owner, f"/v1/memories/{item}/enable")
        assert enabled.status_code == 200 and enabled.json()["status"] == "active", enabled.text
        own = await post(owner, "/v1/memories", content="Answer in English.", kind="preference")
        assert own.json()["status"] == "active", own.text  # a person's save is a fact

        no_agent = caller(org=agent.org, person=True)
        r = await http.get(f"{recall}/v1/memories", headers=no_agent.headers)
        assert r.status_code == 401 and "person claim" in r.json()["detail"], r.text


async def test_an_agent_changes_a_shared_fact_by_a_proposal_its_member_merges(
    services: dict[str, str],
) -> None:
    """Seed 000: shared memory is changed by an agent only when the user's message says it
    is for everyone (a seed audit: its member's agent archived a shared fact, with no
    message, out of every teammate's packets)."""
    ana = caller()
    agent = caller(org=ana.org, agent="helper")
    command = services["command"]
    async with httpx.AsyncClient(timeout=10) as http:
        saved = await http.post(
            f"{command}/v1/memories",
            headers=ana.headers,
            json={"content": "Releases go out on Tuesdays.", "scope": "shared"},
        )
        item = saved.json()["item_id"]
        archive = await http.post(
            f"{command}/v1/memories/{item}/archive", headers=agent.headers, json={"scope": "shared"}
        )
        assert archive.json()["code"] == "proposal_required", archive.text
        proposed = await http.post(
            f"{command}/v1/memories/{item}/propose",
            headers=agent.headers,
            json={
                "change": "archive",
                "base_revision": 1,
                "reason": "releases moved",
                "scope": "shared",
            },
        )
        assert proposed.status_code == 200, proposed.text
        pid = proposed.json()["proposal_id"]

        async def in_review() -> list[dict[str, object]] | None:  # QA: under "mine" only
            r = await http.get(
                f"{services['recall']}/v1/proposals", headers=ana.headers, params={"view": "review"}
            )
            found = [p for p in r.json()["proposals"] if p["proposal_id"] == pid]
            return found or None

        [listed] = await eventually(in_review, what="the agent's proposal in ana's review")
        assert (listed["proposer"], listed["proposer_agent"]) == ("ana", "helper")
        r = await http.get(
            f"{services['recall']}/v1/proposals", headers=agent.headers, params={"view": "review"}
        )
        assert [p for p in r.json()["proposals"] if p["proposal_id"] == pid] == []
        merged = await http.post(
            f"{command}/v1/proposals/{proposed.json()['proposal_id']}/merge",
            headers=ana.headers,
            json={"scope": "shared"},
        )
        assert merged.status_code == 200 and merged.json()["status"] == "archived", merged.text
        own = await http.post(
            f"{command}/v1/memories/{item}/propose",
            headers=ana.headers,
            json={"change": "unarchive", "base_revision": 2, "reason": "mine", "scope": "shared"},
        )
        assert (own.status_code, own.json()["code"]) == (422, "invalid"), own.text  # QA
