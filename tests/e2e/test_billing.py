"""Seed 004's pricing and holds through the services: an operator meters an org with
`engram billing`, each saved memory costs a credit, and a held org (out of credit,
suspended) or caller (at its monthly cap) is refused its calls, reads included, while
erasing stays open."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from engram.cli import app
from tests.conftest import Caller, caller
from tests.support import eventually

pytestmark = pytest.mark.e2e


async def billing(*args: str) -> str:
    """Run `engram billing ...` (in a thread: the CLI runs its own event loop)."""
    result = await asyncio.to_thread(CliRunner().invoke, app, ["billing", *args])
    assert result.exit_code == 0, result.output
    return str(result.output)


async def test_credits_are_spent_by_saves_and_a_spent_org_is_held_but_may_forget(
    services: dict[str, str],
) -> None:
    ana = caller()
    bob = caller(org=ana.org, member="bob", roles=("admin",))
    command, recall = services["command"], services["recall"]
    assert "not metered" in await billing("show", ana.org)
    async with httpx.AsyncClient(timeout=10) as http:

        async def save(who: Caller, text: str) -> httpx.Response:
            return await http.post(
                f"{command}/v1/memories", headers=who.headers, json={"content": text}
            )

        said = await billing("set", ana.org, "--add-credits", "2")
        assert '"balance": 2' in said
        # The org's first command: the writer reads its account now.
        first = await save(ana, "The office opens at nine.")
        assert first.status_code == 201, first.text
        second = await save(bob, "The office closes at six.")
        assert second.status_code == 201, second.text
        third = await save(ana, "The office is shut on Sundays.")
        assert (third.status_code, third.json()["code"]) == (402, "payment_required")
        assert "0 credits left" in third.json()["detail"]

        async def read_status() -> int | None:
            r = await http.get(f"{recall}/v1/memories", headers=ana.headers)
            return r.status_code if r.status_code == 402 else None

        assert await eventually(read_status, what="reads held", deadline=20) == 402
        view = (await http.get(f"{recall}/v1/billing", headers=bob.headers)).json()
        assert (view["metered"], view["balance"], view["spent"]) == (
            True,
            0,
            {"member:" + ana.member: 1, "member:bob": 1},
        )
        own = (await http.get(f"{recall}/v1/billing", headers=ana.headers)).json()
        assert own["spent"] == {"member:" + ana.member: 1}  # a member sees its own

        # Erasing stays open, and costs nothing.
        gone = await http.request(
            "DELETE", f"{command}/v1/memories/{first.json()['item_id']}", headers=ana.headers
        )
        assert gone.status_code == 200, gone.text

        await billing("set", ana.org, "--add-credits", "5")

        async def changes() -> list[dict[str, Any]] | None:
            r = await http.get(f"{recall}/v1/changes", headers=ana.headers)
            return r.json()["changes"] if r.status_code == 200 else None

        log = await eventually(changes, what="reads served again", deadline=20)
        assert [(c["type"], c["charged"]) for c in log] == [
            ("MemoryRemembered", 1),
            ("MemoryForgotten", 0),
        ]
        await billing("off", ana.org)
        assert "not metered" in await billing("show", ana.org)


async def test_a_suspended_org_is_refused_everything_but_erasing_and_its_account(
    services: dict[str, str],
) -> None:
    ana = caller()
    command, recall = services["command"], services["recall"]
    async with httpx.AsyncClient(timeout=10) as http:
        saved = await http.post(
            f"{command}/v1/memories",
            headers=ana.headers,
            json={"content": "Suspended orgs keep their memories."},
        )
        item = saved.json()["item_id"]
        await billing("set", ana.org, "--add-credits", "100", "--suspend")

        async def held() -> httpx.Response | None:
            r = await http.post(f"{command}/v1/memories/{item}/pin", headers=ana.headers)
            return r if r.status_code == 403 else None

        refused = await eventually(held, what="the suspension in the writer", deadline=20)
        assert refused.json()["code"] == "org_suspended"

        async def read() -> httpx.Response | None:
            r = await http.post(
                f"{recall}/v1/recall", headers=ana.headers, json={"query": "memories"}
            )
            return r if r.status_code == 403 else None

        assert (await eventually(read, what="reads held", deadline=20)).json()["code"] == (
            "org_suspended"
        )
        view = await http.get(f"{recall}/v1/billing", headers=ana.headers)
        assert view.status_code == 200 and view.json()["suspended"] is True
        gone = await http.request("DELETE", f"{command}/v1/memories/{item}", headers=ana.headers)
        assert gone.status_code == 200, gone.text
        await billing("set", ana.org, "--resume")

        async def served() -> bool:
            r = await http.post(
                f"{command}/v1/memories", headers=ana.headers, json={"content": "Back in business."}
            )
            return r.status_code == 201

        await eventually(served, what="the org served again", deadline=20)


async def test_a_caller_at_its_monthly_cap_is_held_while_others_go_on(
    services: dict[str, str],
) -> None:
    ana = caller()
    bot = caller(org=ana.org, member=ana.member, agent="bot")
    command = services["command"]
    await billing("set", ana.org, "--add-credits", "100", "--cap", "1")
    async with httpx.AsyncClient(timeout=10) as http:

        async def spent_once() -> bool:
            r = await http.post(
                f"{command}/v1/memories",
                headers=bot.headers,
                json={
                    "content": "Bot fact one.",
                    "scope": "agent",
                    "user_message": "Remember: Bot fact one.",
                },
            )
            return r.status_code == 201

        await eventually(spent_once, what="the agent's first metered save", deadline=20)
        capped = await http.post(
            f"{command}/v1/memories",
            headers=bot.headers,
            json={
                "content": "Bot fact two.",
                "scope": "agent",
                "user_message": "Remember: Bot fact two.",
            },
        )
        assert (capped.status_code, capped.json()["code"]) == (402, "key_spend_limit_exceeded")
        mine = await http.post(
            f"{command}/v1/memories", headers=ana.headers, json={"content": "Ana's own fact."}
        )
        assert mine.status_code == 201, mine.text  # another caller, its own cap
        said = await billing("set", ana.org, "--no-cap")
        assert '"monthly_cap": null' in said
