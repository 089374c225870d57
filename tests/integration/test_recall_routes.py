"""Recall's routes in process over the real database, as the restricted recall role: the
version a scope's change log answers, a partial ``PUT /v1/policy``, and what the record
of a run's memory context keeps."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from engram.auth import TokenVerifier, mint_token
from engram.db import create_pool, with_user
from engram.http import install_problem_handlers
from engram.settings import CommonSettings
from services.recall.adapters.store import RecallStore
from services.recall.handlers import router
from services.recall.settings import RecallSettings
from tests.support import insert_item

pytestmark = pytest.mark.integration
SECRET = "a-development-secret-of-at-least-32-bytes"


class Recall:
    """The recall routes, called as one member of one org."""

    def __init__(self, http: httpx.AsyncClient, org: str) -> None:
        self.http, self.org = http, org

    def headers(self, member: str = "ana", *roles: str) -> dict[str, str]:
        token = mint_token(SECRET, org=self.org, member=member, roles=roles)
        return {"Authorization": f"Bearer {token}"}

    async def changes(self, member: str = "ana", **params: Any) -> dict[str, Any]:
        r = await self.http.get("/v1/changes", params=params, headers=self.headers(member))
        assert r.status_code == 200, r.text
        return dict(r.json())

    async def put_policy(self, body: dict[str, Any], *roles: str) -> httpx.Response:
        return await self.http.put("/v1/policy", json=body, headers=self.headers("ana", *roles))


@pytest.fixture
async def recall(stack_settings: dict[str, str]) -> AsyncIterator[Recall]:
    pool = await create_pool(with_user(stack_settings["DATABASE_URL"], "engram_recall"), max_size=4)
    app = FastAPI()
    install_problem_handlers(app)
    app.include_router(router)
    app.state.store, app.state.embedder, app.state.settings = (
        RecallStore(pool),
        None,
        RecallSettings(),
    )
    app.state.verifier = TokenVerifier(CommonSettings.model_validate({"ENGRAM_JWT_SECRET": SECRET}))
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://recall") as http:
            yield Recall(http, f"routes-{uuid.uuid4().hex[:8]}")
    finally:
        await pool.close()


@pytest.fixture
async def owner(stack_settings: dict[str, str]) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(stack_settings["DATABASE_URL"])
    yield conn
    await conn.close()


async def record_changes(owner: asyncpg.Connection, org: str, scope: str, versions: int) -> None:
    """A scope's first ``versions`` changes, as the projector records them."""
    for seq in range(1, versions + 1):
        await owner.execute(
            "INSERT INTO memory.audit (stream_id, seq, event_id, type, item_id, org, scope, "
            "revision, actor, command_id, occurred_at) "
            "VALUES ($1, $2, $3, 'MemoryRemembered', $4, $5, $6, 1, $7, $4, now())",
            f"{org}/{scope}",
            seq,
            uuid.uuid4().hex,
            f"item-{seq}",
            org,
            scope,
            json.dumps({"org": org, "member": "ana"}),
        )


async def test_a_change_log_answers_a_version_the_scope_has(
    recall: Recall, owner: asyncpg.Connection
) -> None:
    await record_changes(owner, recall.org, "member:ana", 3)
    await record_changes(owner, recall.org, "shared", 2)

    past = await recall.changes(after=99999)
    assert (past["version"], past["changes"]) == (3, [])  # the scope's current version
    assert (await recall.changes(after=3))["version"] == 3
    page = await recall.changes(after=1, limit=1)
    assert ([c["version"] for c in page["changes"]], page["version"]) == ([2], 2)
    rest = await recall.changes(after=page["version"])
    assert ([c["version"] for c in rest["changes"]], rest["version"]) == ([3], 3)
    # Another member sees the shared scope's version, an empty scope of their own is at 0.
    assert (await recall.changes("bob", scope="shared", after=50))["version"] == 2
    assert (await recall.changes("bob", after=50))["version"] == 0


async def test_a_policy_put_sets_what_it_names_and_keeps_the_rest(recall: Recall) -> None:
    first = await recall.put_policy({"max_items": 5, "keep_revisions": 3}, "admin")
    assert first.status_code == 200, first.text
    defaults = {
        "policy": "hybrid",
        "max_chars": None,
        "session_use": True,
        "session_generate": True,
        "max_candidates_per_run": 3,
        "agent_memory": True,
        "max_memories_per_scope": None,
        "memory": True,
        "learning": "suggest",
    }
    assert first.json() == {**defaults, "max_items": 5, "keep_revisions": 3}
    learning = await recall.put_policy({"learning": "apply"}, "admin")
    assert learning.json() == {**first.json(), "learning": "apply"}
    first = await recall.put_policy({"learning": "suggest"}, "admin")
    assert first.json()["learning"] == "suggest"
    quota = await recall.put_policy({"max_memories_per_scope": 500}, "admin")
    assert quota.json() == {**first.json(), "max_memories_per_scope": 500}
    first = await recall.put_policy({"max_memories_per_scope": None}, "admin")
    assert first.json()["max_memories_per_scope"] is None

    uncapped = await recall.put_policy({"max_candidates_per_run": None}, "admin")
    assert uncapped.json() == {**first.json(), "max_candidates_per_run": None}
    unchanged = await recall.put_policy({}, "admin")
    assert unchanged.json() == uncapped.json()
    cleared = await recall.put_policy({"max_items": None, "policy": "newest_first"}, "admin")
    expected = {**uncapped.json(), "max_items": None, "policy": "newest_first"}
    assert cleared.json() == expected
    read = await recall.http.get("/v1/policy", headers=recall.headers("bob"))
    assert read.json() == expected

    # Null clears only what may be empty; members still cannot set it.
    for body in (
        {"policy": None},
        {"session_use": None},
        {"agent_memory": None},
        {"learning": None},
    ):
        refused = await recall.put_policy(body, "admin")
        assert refused.status_code == 422, body
    denied = await recall.put_policy({"max_items": 1})
    assert (denied.status_code, denied.json()["code"]) == (403, "forbidden")
    # Two admins setting different fields at once both keep theirs.
    await asyncio.gather(
        recall.put_policy({"max_chars": 900}, "admin"),
        recall.put_policy({"agent_memory": False}, "admin"),
    )
    read = await recall.http.get("/v1/policy", headers=recall.headers())
    assert read.json() == {**expected, "max_chars": 900, "agent_memory": False}


async def test_a_context_keeps_the_query_ids_revisions_and_why_never_text(
    recall: Recall, owner: asyncpg.Connection
) -> None:
    item = await insert_item(
        owner, recall.org, "member:ana", "The locker code is 4711.", prefix="ctx"
    )
    await owner.execute(
        "UPDATE memory.items SET pinned = true, title = 'Locker code' WHERE item_id = $1", item
    )
    r = await recall.http.post(
        "/v1/recall",
        headers=recall.headers(),
        json={"query": "what opens the locker?", "run_id": "run-7"},
    )
    assert r.status_code == 200, r.text
    context_id = r.json()["context_id"]

    row = await owner.fetchrow(
        "SELECT * FROM recall.memory_contexts WHERE context_id = $1", uuid.UUID(context_id)
    )
    assert row is not None and (row["query"], row["run_id"]) == ("what opens the locker?", "run-7")
    assert json.loads(row["entries"]) == [
        {"item_id": item, "revision": 1, "why": ["pinned", "full_text#1"]}
    ]
    kept = " ".join(str(v) for v in dict(row).values())
    assert "4711" not in kept and "Locker code" not in kept

    await owner.execute(
        "UPDATE memory.items SET status = 'forgotten', content = NULL, "
        "title = NULL WHERE item_id = $1",
        item,
    )
    seen = (await recall.http.get(f"/v1/contexts/{context_id}", headers=recall.headers())).json()
    assert seen["query"] == "what opens the locker?"
    assert [(e["id"], e["state"], e["title"]) for e in seen["entries"]] == [
        (item, "forgotten", None)
    ]


async def test_a_context_read_without_the_memory_s_scope_shows_it_unavailable(
    recall: Recall, owner: asyncpg.Connection
) -> None:
    """QA: the member's context of an agent's run, read with the member's own token, said
    the agent's memory was forgotten; it is only out of that token's sight."""
    item = await insert_item(
        owner, recall.org, "agent:bot", "The bot restarts at dawn.", prefix="ctx-agent"
    )
    await owner.execute("UPDATE memory.items SET title = 'Restart' WHERE item_id = $1", item)
    agent = {
        "Authorization": "Bearer " + mint_token(SECRET, org=recall.org, member="ana", agent="bot")
    }
    r = await recall.http.post(
        "/v1/recall", headers=agent, json={"query": "when does the bot restart?"}
    )
    assert r.status_code == 200, r.text
    path = f"/v1/contexts/{r.json()['context_id']}"

    as_agent = (await recall.http.get(path, headers=agent)).json()
    as_member = (await recall.http.get(path, headers=recall.headers())).json()
    assert [(e["state"], e["title"]) for e in as_agent["entries"]] == [("unchanged", "Restart")]
    assert [
        (e["id"], e["state"], e["current_revision"], e["title"]) for e in as_member["entries"]
    ] == [(item, "unavailable", None, None)]
