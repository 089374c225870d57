"""Row-level security: hand-written SQL through the recall role sees only the rows of
the principal named in its transaction: no other org's, no other member's."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from engram.auth import Principal
from engram.db import with_user
from services.recall.adapters.scoped import SCOPED, scopes_literal
from tests.support import insert_item

pytestmark = pytest.mark.integration


async def seed(conn: asyncpg.Connection, org: str, scope: str, text: str) -> str:
    item_id = await insert_item(conn, org, scope, text, prefix="rls")
    await conn.execute(
        "INSERT INTO memory.generations (org, scope, generation) "
        "VALUES ($1, $2, 1) ON CONFLICT DO NOTHING",
        org,
        scope,
    )
    # Its revision, audit row and a proposal on it: each read model the recall role reads.
    await conn.execute(
        "INSERT INTO memory.revisions (item_id, revision, org, scope, reason, content, "
        "content_hash, actor, command_id, occurred_at) "
        "VALUES ($1, 1, $2, $3, 'remembered', $4, 'h', '{}', 'c', now())",
        item_id,
        org,
        scope,
        text,
    )
    await conn.execute(
        "INSERT INTO memory.audit (stream_id, seq, event_id, type, item_id, org, scope, "
        "revision, actor, command_id, occurred_at) "
        "VALUES ($1, 1, $2, 'MemoryRemembered', $3, $4, $5, 1, '{}', 'c', now())",
        f"{org}/{scope}/{item_id}",
        f"e-{item_id}",
        item_id,
        org,
        scope,
    )
    await conn.execute(
        "INSERT INTO memory.proposals (proposal_id, item_id, org, scope, change, base_revision, "
        "reason, proposer, status, proposed_at) "
        "VALUES ($1, $2, $3, $4, 'archive', 1, 'r', 'x', 'pending', now())",
        f"p-{item_id}",
        item_id,
        org,
        scope,
    )
    return item_id


async def test_the_recall_role_sees_only_its_principals_rows(
    stack_settings: dict[str, str],
) -> None:
    owner = await asyncpg.connect(stack_settings["DATABASE_URL"])
    org, other_org = f"rls-{uuid.uuid4().hex[:8]}", f"rls-{uuid.uuid4().hex[:8]}"
    try:
        mine = {
            await seed(owner, org, "shared", "shared fact"),
            await seed(owner, org, "member:ana", "ana's fact"),
            await seed(owner, org, "project:apollo", "apollo fact"),
        }
        hidden = {
            await seed(owner, org, "member:bob", "bob's fact"),
            await seed(owner, org, "project:zeus", "zeus fact"),
            await seed(owner, other_org, "shared", "other org's fact"),
            await seed(owner, other_org, "member:ana", "other org's ana"),
        }
    finally:
        await owner.close()

    ana = Principal(org=org, member="ana", project="apollo")
    recall = await asyncpg.connect(with_user(stack_settings["DATABASE_URL"], "engram_recall"))
    try:
        async with recall.transaction():
            # Nothing is visible before the transaction names a principal.
            assert await recall.fetchval("SELECT count(*) FROM memory.items") == 0
            assert await recall.fetchval("SELECT count(*) FROM recall.full_text('fact', 1000)") == 0
            assert await recall.fetchval("SELECT count(*) FROM recall.bm25('fact', 1000)") == 0
        async with recall.transaction():
            await recall.execute(SCOPED, ana.org, scopes_literal(ana.visible_scopes()), ana.member)
            seen = {r["item_id"] for r in await recall.fetch("SELECT item_id FROM memory.items")}
            assert mine <= seen and not seen & hidden
            assert (
                await recall.fetchval(
                    "SELECT count(*) FROM memory.items WHERE org <> $1 OR scope = 'member:bob'", org
                )
                == 0
            )
            # The search functions apply the same rule from the same principal.
            found = {
                r["item_id"]
                for r in await recall.fetch("SELECT item_id FROM recall.full_text('fact', 1000)")
            }
            assert mine <= found and not found & hidden
            ranked = {
                r["item_id"]
                for r in await recall.fetch("SELECT item_id FROM recall.bm25('fact', 1000)")
            }
            assert mine <= ranked and not ranked & hidden
            gens = await recall.fetch("SELECT org, scope FROM memory.generations")
            assert {(r["org"], r["scope"]) for r in gens} <= {
                (org, s) for s in ana.visible_scopes()
            }
            # Revisions, the change log and proposals: the same rows, no others.
            for table in ("memory.revisions", "memory.audit", "memory.proposals"):
                rows = {r["item_id"] for r in await recall.fetch(f"SELECT item_id FROM {table}")}
                assert mine <= rows and not rows & hidden, table
        for sql in (
            "UPDATE memory.items SET content = 'x'",
            "DELETE FROM memory.items",
            "DELETE FROM memory.revisions",
            "UPDATE memory.audit SET type = 'x'",
            "DELETE FROM memory.proposals",
            "DELETE FROM memory.links",
            "SELECT * FROM memory.terms",
            "SELECT * FROM memory.term_counts",
            "SELECT * FROM keystore.data_keys",
            "SET ROLE postgres",
        ):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                async with recall.transaction():
                    await recall.execute(sql)
    finally:
        await recall.close()


def test_scope_literals_cannot_break_out() -> None:
    assert scopes_literal(["shared", 'member:a","b', "x\\"]) == (
        '{"shared","member:a\\",\\"b","x\\\\"}'
    )
