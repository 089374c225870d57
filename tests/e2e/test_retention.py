"""The org's revision retention (DESIGN §4, seed 004) through the services: an admin sets
``keep_revisions`` with the org's policy; a memory's history (GET …/revisions) then holds
its current revision and that many before it, and an older one cannot be restored."""

from __future__ import annotations

from typing import Any

import asyncpg
import httpx
import pytest

from tests.conftest import caller
from tests.support import eventually

pytestmark = pytest.mark.e2e


async def test_an_orgs_retention_keeps_the_last_revisions_only(
    services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    ana = caller()
    admin = caller(org=ana.org, member="root", roles=("admin",))
    command, recall = services["command"], services["recall"]
    async with httpx.AsyncClient(timeout=10) as http:
        refused = await http.put(
            f"{recall}/v1/policy", headers=ana.headers, json={"keep_revisions": 2}
        )
        assert refused.status_code == 403
        policy = await http.put(
            f"{recall}/v1/policy", headers=admin.headers, json={"keep_revisions": 2}
        )
        assert policy.status_code == 200 and policy.json()["keep_revisions"] == 2
        bad = await http.put(
            f"{recall}/v1/policy", headers=admin.headers, json={"keep_revisions": 0}
        )
        assert bad.status_code == 422

        saved = await http.post(
            f"{command}/v1/memories",
            headers=ana.headers,
            json={"content": "Quarterly goal: 10 new customers."},
        )
        item = saved.json()["item_id"]
        for n, goal in enumerate(("12", "15", "20"), start=1):
            r = await http.post(
                f"{command}/v1/memories/{item}/correct",
                headers=ana.headers,
                json={"base_revision": n, "content": f"Quarterly goal: {goal} new customers."},
            )
            assert r.status_code == 200, r.text

        async def history() -> list[Any] | None:
            r = await http.get(f"{recall}/v1/memories/{item}/revisions", headers=ana.headers)
            revisions = r.json()["revisions"]
            return revisions if [x["revision"] for x in revisions] == [4, 3, 2] else None

        kept = await eventually(history, what="revisions 4, 3 and 2 only")
        assert kept[0]["content"] == "Quarterly goal: 20 new customers."
        assert (kept[-1]["reason"], kept[-1]["member"]) == ("corrected", "ana")

        old = await http.post(
            f"{command}/v1/memories/{item}/restore-revision",
            headers=ana.headers,
            json={"base_revision": 4, "revision": 1},
        )
        assert (old.status_code, old.json()["code"]) == (409, "conflict")
        assert old.json()["oldest_kept"] == 2
        other = caller()
        hidden = await http.get(f"{recall}/v1/memories/{item}/revisions", headers=other.headers)
        assert hidden.status_code == 404
    conn = await asyncpg.connect(stack_settings["DATABASE_URL"])
    try:  # the first revision's text left the read models
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM memory.revisions WHERE content LIKE '%10 new customers%'"
            )
            == 0
        )
    finally:
        await conn.close()
