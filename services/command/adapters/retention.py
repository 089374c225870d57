"""The orgs' revision-retention policies, as the writer decides with them.

An admin sets ``keep_revisions`` with the org's policy (recall's ``PUT /v1/policy``, table
``recall.org_policies``). The writer reads it for the orgs of a batch, at most once per
``ttl`` seconds per org, so a policy change applies within that time; what a change
prunes is then in the log (``RevisionsPruned``), and a replay prunes the same.
"""

from __future__ import annotations

import time
from collections.abc import Collection

import asyncpg

from engram.logging import get_logger

log = get_logger(__name__)


class Retention:
    def __init__(self, pool: asyncpg.Pool, ttl: float = 10.0) -> None:
        self._pool, self._ttl = pool, ttl
        self._known: dict[str, tuple[int | None, float]] = {}  # org -> (keep, read at)

    async def keep_revisions(self, orgs: Collection[str]) -> dict[str, int | None]:
        """Each org's policy (None: keep every revision), read again once it is stale."""
        now = time.monotonic()
        stale = [o for o in orgs if now - self._known.get(o, (None, -self._ttl))[1] >= self._ttl]
        if stale:
            found = await self._read(stale)
            for org in stale:
                self._known[org] = (found.get(org), now)
        return {org: self._known[org][0] for org in orgs}

    async def _read(self, orgs: list[str]) -> dict[str, int | None]:
        try:
            rows = await self._pool.fetch(
                "SELECT org, keep_revisions FROM recall.org_policies WHERE org = ANY($1)", orgs
            )
        except asyncpg.UndefinedTableError:  # recall's migrations have not run: no policies
            log.warning("org_policies_missing", detail="keeping every revision")
            return {}
        return {r["org"]: r["keep_revisions"] for r in rows}
