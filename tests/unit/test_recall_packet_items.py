"""How many items a packet holds, under every policy: the request's ``max_items``, else
the org's, else 12; pinned items count toward it. Through recall's own ``recall``, over a
store that answers as the SQL does (pinned items with the opening, none under
newest_first) and records nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from contracts.orgs import OrgPolicy
from contracts.recall import RecallRequest
from engram.auth import Principal
from services.recall.adapters.store import Opening
from services.recall.core import Candidate
from services.recall.packets import recall
from services.recall.settings import RecallSettings

ANA = Principal(org="acme", member="ana")
SETTINGS = RecallSettings(feedback_items=0)
POLICIES = ["hybrid", "preferences_first", "newest_first"]


def memory(n: int, *, pinned: bool = False, kind: str = "fact") -> Candidate:
    return Candidate(
        f"m{n:02}", 1, "member:ana", kind, None, f"note {n} about x", pinned, updated_at=float(n)
    )


class Memories:
    """``count`` short memories, the newest last saved; the first three are pinned, the
    next two preferences. Every one matches the query's words."""

    def __init__(self, count: int, org: OrgPolicy | None = None) -> None:
        self.org = org or OrgPolicy()
        kinds = {3: "preference", 4: "preference"}
        items = [memory(n, pinned=n < 3, kind=kinds.get(n, "fact")) for n in range(count)]
        self.newest = sorted(items, key=lambda c: -c.updated_at)

    @asynccontextmanager
    async def session(self, p: Principal) -> AsyncIterator[None]:
        yield None

    async def entities(self, p: Principal) -> list[object]:
        return []  # the org names no entity

    async def opening(
        self, p: Principal, items: int | None, policy: str | None, default: int
    ) -> Opening:
        pinned = [c for c in self.newest if c.pinned]
        limit = (
            0
            if (policy or self.org.policy) == "newest_first"
            else (items or self.org.max_items or default)
        )
        return Opening({"shared": 0, "own": 1, "expired": 0}, self.org, pinned[:limit])

    async def listing(self, query: str, p: Principal, limit: int) -> list[Candidate]:
        kept = (
            self.newest if query == "newest" else [c for c in self.newest if c.kind == "preference"]
        )
        return kept[:limit]

    async def full_text(
        self, p: Principal, query: str, limit: int, *_: Any, words: bool = False
    ) -> list[Candidate]:
        return self.newest[:limit]

    async def save_context(self, *_: Any) -> str:
        return "context"


async def packet_ids(store: Memories, **body: Any) -> list[str]:
    request = RecallRequest.model_validate({"query": "x", **body})
    answer = await recall(store, None, ANA, request, SETTINGS)  # type: ignore[arg-type]
    return [i.id for i in answer.items]


@pytest.mark.parametrize("policy", POLICIES)
async def test_a_packet_holds_the_requests_max_items_else_the_orgs_else_12(
    policy: str,
) -> None:
    store = Memories(30)
    assert len(await packet_ids(store, policy=policy, max_items=3)) == 3
    assert len(await packet_ids(store, policy=policy)) == 12
    assert len(await packet_ids(store, policy=policy, max_items=50)) == 30  # all there are
    org = Memories(60, OrgPolicy(policy=policy, max_items=5))
    assert len(await packet_ids(org)) == 5
    assert len(await packet_ids(org, max_items=50)) == 50
    assert len(await packet_ids(org, max_items=2)) == 2


async def test_newest_first_gives_the_newest_ones_pinned_or_not() -> None:
    store = Memories(30)
    assert await packet_ids(store, policy="newest_first", max_items=3) == ["m29", "m28", "m27"]
    # Pinned memories are not put first under newest_first: they count like any other.
    oldest = await packet_ids(store, policy="newest_first", max_items=50)
    assert oldest[-3:] == ["m02", "m01", "m00"] and len(oldest) == 30


@pytest.mark.parametrize("policy", ["hybrid", "preferences_first"])
async def test_pinned_items_count_toward_the_cap(policy: str) -> None:
    ids = await packet_ids(Memories(30), policy=policy, max_items=4)
    assert len(ids) == 4 and ids[:3] == ["m02", "m01", "m00"]  # the pinned ones, first
