"""The orgs' policies that the writer decides with: revision retention, the cap on a
run's candidates, the quota of memories per scope, the memory switch, what learning
does, and the org's account when it is metered (seed 004's pricing and holds).

An admin sets them with the org's policy (recall's ``PUT /v1/policy``, table
``recall.org_policies``). The writer reads them for the orgs of a batch, at most once per
``ttl`` seconds per org, so a policy change applies within that time; what a retention
change prunes is then in the log (``RevisionsPruned``), and a replay prunes the same.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection
from dataclasses import dataclass, fields, replace
from typing import Any

import asyncpg

from contracts.commands import MAX_CANDIDATES_PER_RUN
from engram.billing import Account
from engram.billing_store import read_accounts
from engram.logging import get_logger
from engram.orgcache import OrgCache

log = get_logger(__name__)


@dataclass(frozen=True)
class OrgLimits:
    # Prior revisions each memory keeps (None: every revision, seed 000).
    keep_revisions: int | None = None
    # Candidates one run may propose in a scope (None: no cap).
    max_candidates_per_run: int | None = MAX_CANDIDATES_PER_RUN
    # Memories one scope may hold, all but the forgotten (None: no quota).
    max_memories_per_scope: int | None = None
    # The org's memory capability (seed 004): off, agents change nothing.
    memory: bool = True
    # Seed 002's learned memory: the extractor's facts in a session's or an agent's memory
    # are used at once ("apply"), not left as candidates ("suggest", seed 000).
    learning: str = "suggest"
    # Seed 004's pricing and holds: the org's account when it is metered (None: it is
    # not), shared by every writer of this process, which spends from it as it decides.
    account: Account | None = None


class OrgPolicies:
    def __init__(self, pool: asyncpg.Pool, ttl: float = 10.0) -> None:
        self._pool = pool
        self._known: OrgCache[OrgLimits] = OrgCache(ttl)
        # One read at a time: the partitions' writers then share one account per org, and
        # spend from it together (QA: two reads at once gave each its own, and both spent).
        self._reading = asyncio.Lock()

    async def limits(self, orgs: Collection[str]) -> dict[str, OrgLimits]:
        """Each org's limits (an org without a policy has the defaults), read again once
        they are stale."""
        if self._known.stale(orgs):
            async with self._reading:
                if stale := self._known.stale(orgs):  # another writer may have read them
                    found = await self._read(stale)
                    for org in stale:
                        self._known.keep(org, found.get(org, OrgLimits()))
        return {org: self._known.get(org) for org in orgs}

    async def _read(self, orgs: list[str]) -> dict[str, OrgLimits]:
        accounts = await read_accounts(self._pool, orgs)
        limits = await self._policies(orgs)
        return {
            org: replace(limits.get(org, OrgLimits()), account=accounts.get(org))
            for org in set(limits) | set(accounts)
        }

    async def _policies(self, orgs: list[str]) -> dict[str, OrgLimits]:
        """Each org's policy row, column by column: a column recall's migrations have not
        added yet keeps its default (a review: one missing column dropped every org's
        limits, its memory switch and quota too)."""
        try:
            rows = await self._pool.fetch(
                "SELECT org, to_jsonb(o) AS policy FROM recall.org_policies o WHERE org = ANY($1)",
                orgs,
            )
        except asyncpg.UndefinedTableError:
            # recall's migrations have not run yet: no policies, the defaults hold
            log.warning("org_policies_missing", detail="the default limits hold")
            return {}
        return {r["org"]: _limits(r["policy"]) for r in rows}


def _limits(policy: str | dict[str, Any]) -> OrgLimits:
    row = json.loads(policy) if isinstance(policy, str) else policy
    known = {f.name for f in fields(OrgLimits)} & row.keys()
    return OrgLimits(**{name: row[name] for name in known})
