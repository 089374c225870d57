"""The writer's reader of the orgs' limits (recall's org policies): the defaults for an
org that set none, the columns as an admin set them, read again once stale."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from contracts.commands import MAX_CANDIDATES_PER_RUN
from services.command.adapters.policies import OrgLimits, OrgPolicies

pytestmark = pytest.mark.integration


async def test_an_orgs_limits_as_set_else_the_defaults(pool: asyncpg.Pool) -> None:
    strict, silent = f"org-{uuid.uuid4().hex[:8]}", f"org-{uuid.uuid4().hex[:8]}"
    await pool.execute(
        "INSERT INTO recall.org_policies (org, policy, keep_revisions, max_candidates_per_run,"
        " max_memories_per_scope, updated_by) VALUES ($1, 'hybrid', 2, NULL, 40, 'root')",
        strict,
    )
    cached = OrgPolicies(pool, ttl=3600)
    limits = await cached.limits({strict, silent})
    assert limits[strict] == OrgLimits(
        keep_revisions=2, max_candidates_per_run=None, max_memories_per_scope=40
    )
    assert limits[silent] == OrgLimits(None, MAX_CANDIDATES_PER_RUN)

    await pool.execute(
        "UPDATE recall.org_policies SET max_candidates_per_run = 5 WHERE org = $1", strict
    )
    assert (await cached.limits({strict}))[strict].max_candidates_per_run is None  # fresh
    stale_at_once = OrgPolicies(pool, ttl=0)
    assert (await stale_at_once.limits({strict}))[strict].max_candidates_per_run == 5
