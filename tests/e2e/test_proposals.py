"""Proposals on a teammate's shared memory (seed 004), through the five services: a
teammate proposes, the author reviews and merges or rejects, a stale proposal merges as
outdated, and a forget takes the proposed text along."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import httpx
import pytest

from tests.conftest import Caller, caller
from tests.e2e.api import ServicesApi
from tests.support import eventually

pytestmark = pytest.mark.e2e


class Api(ServicesApi):
    async def save_shared(self, who: Caller, content: str) -> str:
        return str((await self.remember(who, content, scope="shared"))["item_id"])

    async def proposals(self, who: Caller, **params: str) -> list[dict[str, Any]]:
        r = await self.http.get(f"{self.recall}/v1/proposals", headers=who.headers, params=params)
        assert r.status_code == 200, r.text
        return list(r.json()["proposals"])

    async def until(self, who: Caller, pid: str, status: str, **params: str) -> dict[str, Any]:
        async def probe() -> dict[str, Any] | None:
            found = [p for p in await self.proposals(who, **params) if p["proposal_id"] == pid]
            return found[0] if found and found[0]["status"] == status else None

        return await eventually(probe, what=f"proposal {pid} {status}")


@asynccontextmanager
async def anas_shared_memory(
    services: dict[str, str], text: str
) -> AsyncIterator[tuple[Api, Caller, Caller, str]]:
    """The API, ana, her teammate bob, and a memory ana saved in the shared scope."""
    ana = caller()
    bob = caller(org=ana.org, member="bob")
    async with httpx.AsyncClient(timeout=10) as http:
        api = Api(http, services)
        yield api, ana, bob, await api.save_shared(ana, text)


async def test_a_teammate_proposes_and_the_author_merges(services: dict[str, str]) -> None:
    saved = anas_shared_memory(services, "Standup is at 9:30.")
    async with saved as (api, ana, bob, item):
        direct = await api.post(
            bob,
            f"/v1/memories/{item}/correct",
            scope="shared",
            base_revision=1,
            content="Standup is at 10:00.",
        )
        assert (direct.status_code, direct.json()["code"]) == (403, "proposal_required")
        assert direct.json()["author"] == "ana"

        proposed = await api.post(
            bob,
            f"/v1/memories/{item}/propose",
            change="correct",
            base_revision=1,
            content="Standup is at 10:00.",
            reason="moved last week",
        )
        assert proposed.status_code == 200, proposed.text
        pid = proposed.json()["proposal_id"]
        assert proposed.json()["proposal_status"] == "pending"

        review = await api.until(ana, pid, "pending", view="review")
        assert (review["proposer"], review["author"], review["content"]) == (
            "bob",
            "ana",
            "Standup is at 10:00.",
        )
        assert await api.proposals(bob, view="review") == []  # bob's own: under mine
        assert [p["proposal_id"] for p in await api.proposals(bob, view="mine")] == [pid]

        refused = await api.post(bob, f"/v1/proposals/{pid}/merge")
        assert (refused.status_code, refused.json()["code"]) == (403, "forbidden")
        merged = await api.post(ana, f"/v1/proposals/{pid}/merge")
        assert merged.status_code == 200, merged.text
        assert (merged.json()["revision"], merged.json()["proposal_status"]) == (2, "merged")
        await api.until(ana, pid, "merged")

        async def corrected() -> bool:
            return (await api.memory(bob, item)).get("content") == "Standup is at 10:00."

        await eventually(corrected, what="the merged text in recall")
        log = await api.http.get(
            f"{api.recall}/v1/changes", headers=ana.headers, params={"scope": "shared"}
        )
        assert [(c["type"], c["member"], c["made_by"]) for c in log.json()["changes"]] == [
            ("MemoryRemembered", "ana", "person"),
            ("ChangeProposed", "bob", "person"),
            ("MemoryRevised", "ana", "proposal"),
            ("ProposalResolved", "ana", "proposal"),
        ]
        again = await api.post(ana, f"/v1/proposals/{pid}/reject")
        assert (again.status_code, again.json()["code"]) == (409, "conflict")


async def test_stale_withdrawn_rejected_and_forgotten_proposals(
    services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    saved = anas_shared_memory(services, "Invoices go out on the 1st.")
    async with saved as (api, ana, bob, item):
        agent = caller(org=ana.org, member="ana", agent="helper")

        async def propose(**body: Any) -> str:
            r = await api.post(bob, f"/v1/memories/{item}/propose", reason="Priya says", **body)
            assert r.status_code == 200, r.text
            return str(r.json()["proposal_id"])

        stale = await propose(change="archive", base_revision=1)
        await api.post(
            ana,
            f"/v1/memories/{item}/correct",
            scope="shared",
            base_revision=1,
            content="Invoices go out on the 2nd.",
        )
        outdated = await api.post(ana, f"/v1/proposals/{stale}/merge")
        assert outdated.json()["proposal_status"] == "outdated"
        assert outdated.json()["revision"] == 2  # nothing applied

        withdrawn = await propose(change="archive", base_revision=2)
        assert (await api.post(bob, f"/v1/proposals/{withdrawn}/withdraw")).status_code == 200
        rejected = await propose(change="archive", base_revision=2)
        by_agent = await api.post(agent, f"/v1/proposals/{rejected}/merge")
        assert (by_agent.status_code, by_agent.json()["code"]) == (403, "forbidden")
        no = await api.post(ana, f"/v1/proposals/{rejected}/reject", reason="Priya was wrong")
        assert no.json()["proposal_status"] == "rejected"
        await api.until(bob, rejected, "rejected", view="mine")
        await api.until(bob, withdrawn, "withdrawn", view="mine")

        secret = "Invoices are signed by Priya Raman-Oduya."
        pending = await propose(change="correct", base_revision=2, content=secret)
        await api.until(ana, pending, "pending", view="review")
        forgotten = await api.http.delete(
            f"{api.command}/v1/memories/{item}", params={"scope": "shared"}, headers=ana.headers
        )
        assert forgotten.status_code == 200, forgotten.text
        voided = await api.until(bob, pending, "outdated", view="mine")
        assert voided["content"] is None and voided["resolved_at"] is not None
        # The proposers' and the reviewer's words about it go with it (a QA pass found
        # them kept): every proposal on it, whatever its status.
        for proposal in await api.proposals(bob, view="mine"):
            assert (proposal["reason"], proposal["resolution_reason"]) == (None, None)
    conn = await asyncpg.connect(stack_settings["DATABASE_URL"])
    try:  # the proposed text, and the words about it, are nowhere in the read models
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM memory.proposals WHERE content LIKE '%Priya%' "
                "OR reason LIKE '%Priya%' OR resolution_reason LIKE '%Priya%'"
            )
            == 0
        )
    finally:
        await conn.close()


async def test_only_the_author_or_an_admin_forgets_a_teammates_memory(
    services: dict[str, str],
) -> None:
    saved = anas_shared_memory(services, "The VPN rotates on Fridays.")
    async with saved as (api, ana, bob, item):
        refused = await api.post(bob, f"/v1/memories/{item}/forget", scope="shared")
        assert (refused.status_code, refused.json()["code"]) == (403, "forbidden")
        assert refused.json()["author"] == "ana"

        async def readable() -> bool:
            return (await api.memory(bob, item)).get("status") == "active"

        await eventually(readable, what="ana's memory still there for bob")
        forgotten = await api.post(ana, f"/v1/memories/{item}/forget", scope="shared")
        assert forgotten.status_code == 200, forgotten.text


async def test_a_teammate_proposes_a_pin_and_a_disable(services: dict[str, str]) -> None:
    saved = anas_shared_memory(services, "Release notes go out on Mondays.")
    async with saved as (api, ana, bob, item):
        for action in ("pin", "disable"):
            direct = await api.post(bob, f"/v1/memories/{item}/{action}", scope="shared")
            assert (direct.status_code, direct.json()["code"]) == (403, "proposal_required")

        pin = await api.post(
            bob,
            f"/v1/memories/{item}/propose",
            change="pin",
            base_revision=1,
            reason="everyone needs it",
        )
        assert pin.status_code == 200, pin.text
        review = await api.until(ana, pin.json()["proposal_id"], "pending", view="review")
        assert (review["change"], review["content"]) == ("pin", None)
        merged = await api.post(ana, f"/v1/proposals/{pin.json()['proposal_id']}/merge")
        assert (merged.json()["revision"], merged.json()["proposal_status"]) == (2, "merged")

        async def pinned() -> bool:
            seen = await api.memory(bob, item)
            return bool(seen.get("pinned")) and seen.get("revision") == 2

        await eventually(pinned, what="the merged pin in recall")
        disable = await api.post(
            bob,
            f"/v1/memories/{item}/propose",
            change="disable",
            base_revision=2,
            reason="out of date",
        )
        assert disable.status_code == 200, disable.text
        merged = await api.post(ana, f"/v1/proposals/{disable.json()['proposal_id']}/merge")
        assert merged.json()["status"] == "disabled"


async def test_a_teammate_proposes_another_kind_and_tags(services: dict[str, str]) -> None:
    """Seed 004: an update that changes only a teammate's memory's category or tags is a
    proposal too; the reviewer reads the proposed kind and tags, and a forget takes the
    tags along, as it takes a correction's text."""
    saved = anas_shared_memory(services, "Deploys need two approvals.")
    async with saved as (api, ana, bob, item):
        direct = await api.post(
            bob, f"/v1/memories/{item}/relabel", scope="shared", base_revision=1, kind="decision"
        )
        assert (direct.status_code, direct.json()["code"]) == (403, "proposal_required")
        relabel = await api.post(
            bob,
            f"/v1/memories/{item}/propose",
            change="relabel",
            base_revision=1,
            kind="decision",
            tags=["release", "ops"],
            reason="it is a team decision",
        )
        assert relabel.status_code == 200, relabel.text
        pid = relabel.json()["proposal_id"]
        review = await api.until(ana, pid, "pending", view="review")
        assert (review["change"], review["kind"], review["tags"], review["content"]) == (
            "relabel",
            "decision",
            ["release", "ops"],
            None,
        )
        merged = await api.post(ana, f"/v1/proposals/{pid}/merge")
        assert (merged.json()["revision"], merged.json()["proposal_status"]) == (2, "merged")

        async def relabeled() -> dict[str, Any] | None:
            seen = await api.memory(bob, item)
            return seen if seen.get("revision") == 2 else None

        seen = await eventually(relabeled, what="the merged relabel in recall")
        assert (seen["kind"], seen["tags"], seen["content"]) == (
            "decision",
            ["release", "ops"],
            "Deploys need two approvals.",
        )

        again = await api.post(
            bob,
            f"/v1/memories/{item}/propose",
            change="relabel",
            base_revision=2,
            tags=["secret-codename"],
            reason="rename",
        )
        assert again.status_code == 200, again.text
        await api.until(ana, again.json()["proposal_id"], "pending", view="review")
        r = await api.http.delete(
            f"{api.command}/v1/memories/{item}", headers=ana.headers, params={"scope": "shared"}
        )
        assert r.status_code == 200, r.text
        gone = await api.until(ana, again.json()["proposal_id"], "outdated", view="review")
        assert gone["tags"] is None and gone["reason"] is None


async def test_an_expired_proposal_leaves_thirty_days_after_it_expired(
    services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    """Seed 004: pending proposals expire after 30 days, and resolved ones leave after
    another 30 (a seed audit: one that expired unanswered was listed for good)."""
    saved = anas_shared_memory(services, "The wiki lives on Confluence.")
    async with saved as (api, ana, bob, item):
        proposed = await api.post(
            bob,
            f"/v1/memories/{item}/propose",
            change="pin",
            base_revision=1,
            reason="everyone needs it",
        )
        pid = proposed.json()["proposal_id"]
        await api.until(ana, pid, "pending", view="review")
        conn = await asyncpg.connect(stack_settings["DATABASE_URL"])
        try:
            for days, listed in ((31, ["expired"]), (61, [])):
                await conn.execute(
                    "UPDATE memory.proposals SET proposed_at = now() - make_interval(days => $2)"
                    " WHERE proposal_id = $1",
                    pid,
                    days,
                )
                found = [
                    p["status"]
                    for p in await api.proposals(ana, view="review")
                    if p["proposal_id"] == pid
                ]
                assert found == listed, (days, found)
        finally:
            await conn.close()
