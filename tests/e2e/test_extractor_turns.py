"""The extractor on the running stack: a turn id is its caller's, and a fact is not cut
at an abbreviation. Turns go in on engram.conversations; candidates come out in recall."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

from contracts.commands import ScopeChoice
from contracts.conversations import ConversationTurn
from tests.conftest import Caller, caller
from tests.support import eventually, publish_turns

pytestmark = pytest.mark.e2e
DEADLINE = 60.0


def turn(who: Caller, turn_id: str, message: str, scope: ScopeChoice = "private") -> bytes:
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


async def test_two_members_turns_with_one_turn_id_both_teach(
    services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    ana = caller()
    bob = caller(org=ana.org, member="bob")
    await publish_turns(
        stack_settings["KAFKA_BOOTSTRAP_SERVERS"],
        turn(ana, "turn-1", "Remember that my dentist is Dr. Molar on Elm street."),
        turn(bob, "turn-1", "I prefer coffee."),
        turn(ana, "turn-2", "We decided to ship on Tuesdays.", "shared"),
        turn(bob, "turn-2", "We decided to review on Fridays.", "shared"),
    )
    async with httpx.AsyncClient(timeout=10) as http:

        async def candidates(who: Caller, count: int) -> list[tuple[str, str]] | None:
            r = await http.get(
                f"{services['recall']}/v1/memories",
                headers=who.headers,
                params={"status": "candidate"},
            )
            assert r.status_code == 200, r.text
            found = sorted((m["scope"], m["content"]) for m in r.json()["memories"])
            return found if len(found) >= count else None

        # Each sees their own candidate and both shared ones: Bob's turns were not
        # taken for Ana's, and the writer took his shared proposal as his own.
        assert await eventually(lambda: candidates(ana, 3), deadline=DEADLINE) == [
            ("member:ana", "My dentist is Dr. Molar on Elm street."),
            ("shared", "We decided to review on Fridays."),
            ("shared", "We decided to ship on Tuesdays."),
        ]
        assert await eventually(lambda: candidates(bob, 3), deadline=DEADLINE) == [
            ("member:bob", "I prefer coffee."),
            ("shared", "We decided to review on Fridays."),
            ("shared", "We decided to ship on Tuesdays."),
        ]
