"""The recall store's reads besides the search, and their writes: the org's data (its
policy, account and entity aliases), a session's switches, and a memory with what is
kept about it (contexts, revisions, links, changes, proposals, the list)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import asyncpg

from contracts.commands import PROPOSAL_DAYS
from contracts.orgs import OrgPolicy
from engram.auth import Principal
from engram.billing import Account
from engram.billing_store import account_of
from engram.db import load_queries
from engram.orgcache import OrgCache
from services.recall.adapters.scoped import as_principal
from services.recall.entities import Entity, entity_of, folded

Q = load_queries(Path(__file__).parent.parent / "sql" / "queries.sql")

ALIASES_TTL = 5.0  # seconds an org's entity aliases are kept before they are read again
HOLDS_TTL = 5.0  # seconds an org's holds are kept before they are read again


class RecallReads:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._entities: OrgCache[list[Entity]] = OrgCache(ALIASES_TTL)
        self._accounts: OrgCache[Account | None] = OrgCache(HOLDS_TTL)

    async def account(self, p: Principal, fresh: bool = False) -> Account | None:
        """The caller's org's account (seed 004's holds; None: not metered), read at most
        every ``HOLDS_TTL`` seconds (``fresh``: now)."""
        if not fresh and not self._accounts.stale([p.org]):
            return self._accounts.get(p.org)
        async with as_principal(self._pool, p) as conn:
            row = await conn.fetchrow(Q["org_holds"])
        account = account_of(row) if row is not None else None
        self._accounts.keep(p.org, account)
        return account

    async def entities(self, p: Principal) -> list[Entity]:
        """The org's entities as their names are matched, read at most every
        ``ALIASES_TTL`` seconds (and again at once after a change through this store)."""
        if not self._entities.stale([p.org]):
            return self._entities.get(p.org)
        found = [entity_of([r["entity"], *r["aliases"]]) for r in await self.entity_aliases(p)]
        self._entities.keep(p.org, found)
        return found

    async def entity_aliases(self, p: Principal) -> list[asyncpg.Record]:
        async with as_principal(self._pool, p) as conn:
            rows: list[asyncpg.Record] = await conn.fetch(Q["entity_aliases"], p.org)
        return rows

    async def set_entity_aliases(
        self, p: Principal, entity: str, aliases: list[str], names: list[str], most: int
    ) -> tuple[asyncpg.Record | None, str | None]:
        """Set an entity's other names: its row, or None and the entity that holds one of
        ``names`` already (None too when the org holds ``most`` entities already)."""
        async with as_principal(self._pool, p) as conn:
            # One change of an org's aliases at a time: two could take one name otherwise.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('aliases/' || $1))", p.org)
            taken = await conn.fetchval(Q["alias_taken"], p.org, entity, names, names[0])
            if taken is not None:
                return None, taken
            await conn.execute(Q["rename_entity"], p.org, entity, names[0])
            row = await conn.fetchrow(
                Q["set_entity_aliases"], p.org, entity, aliases, names, p.member, most
            )
        self._entities.forget(p.org)
        return row, None

    async def delete_entity_aliases(self, p: Principal, entity: str) -> bool:
        """Remove the entity of this name, its case aside."""
        async with as_principal(self._pool, p) as conn:
            gone = await conn.fetchval(Q["delete_entity_aliases"], p.org, folded(entity), entity)
        self._entities.forget(p.org)
        return gone is not None

    async def org_policy(self, p: Principal) -> OrgPolicy:
        async with as_principal(self._pool, p) as conn:
            row = await conn.fetchrow(Q["org_policy"], p.org)
        return OrgPolicy(**dict(row)) if row else OrgPolicy()

    async def set_org_policy(self, p: Principal, changes: dict[str, Any]) -> OrgPolicy:
        """Set the fields in ``changes``; the others keep their value (or, for an org
        without a policy yet, take the defaults)."""
        policy = OrgPolicy(**changes)
        async with as_principal(self._pool, p) as conn:
            row = await conn.fetchrow(
                Q["set_org_policy"],
                p.org,
                policy.policy,
                policy.max_items,
                policy.max_chars,
                policy.keep_revisions,
                policy.session_use,
                policy.session_generate,
                p.member,
                policy.max_candidates_per_run,
                policy.agent_memory,
                list(changes),
                policy.max_memories_per_scope,
                policy.memory,
                policy.learning,
            )
        return OrgPolicy(**dict(row))

    async def context(self, p: Principal, context_id: str) -> asyncpg.Record | None:
        try:
            key = uuid.UUID(context_id)
        except ValueError:
            return None
        async with as_principal(self._pool, p) as conn:
            return await conn.fetchrow(Q["context"], key, p.org, p.member)

    async def current_of(self, p: Principal, item_ids: list[str]) -> dict[str, asyncpg.Record]:
        # Every status: a context shows that an item was forgotten or moved out of sight.
        async with as_principal(self._pool, p) as conn:
            rows = await conn.fetch(Q["current_of"], item_ids, p.org)
        return {r["item_id"]: r for r in rows}

    async def get_item(self, p: Principal, item_id: str) -> asyncpg.Record | None:
        async with as_principal(self._pool, p) as conn:
            return await conn.fetchrow(Q["get_item"], item_id, p.org, p.visible_scopes())

    async def session_switches(self, p: Principal, session: str) -> asyncpg.Record:
        """(use, generate, use_set, generate_set) of the session, as they apply."""
        async with as_principal(self._pool, p) as conn:
            row = await conn.fetchrow(Q["session_switches"], p.org, session, p.fork_of)
        assert row is not None  # the function always answers one row
        return row

    async def processed(self, p: Principal, session: str, limit: int) -> list[str]:
        """The session's turns the extractor has read for memory, its last ``limit``, oldest
        first (seed 002's ``processed``); none while the extractor's migrations have not
        run."""
        try:
            async with as_principal(self._pool, p) as conn:
                rows = await conn.fetch(Q["processed"], session, limit)
        except asyncpg.UndefinedFunctionError:
            return []
        return [r["turn_id"] for r in reversed(rows)]

    async def configure_session(
        self, p: Principal, session: str, changes: dict[str, bool | None]
    ) -> None:
        async with as_principal(self._pool, p) as conn:
            await conn.execute(
                Q["configure_session"],
                p.org,
                session,
                "use" in changes,
                changes.get("use"),
                "generate" in changes,
                changes.get("generate"),
                p.member,
            )

    async def contexts_of(
        self, p: Principal, item_id: str, limit: int
    ) -> list[asyncpg.Record] | None:
        """The caller's contexts that gave the memory; None when it cannot see it."""
        return await self._of_visible(p, item_id, "contexts_of", p.org, p.member, item_id, limit)

    async def changes(
        self, p: Principal, stream_id: str, after: int, limit: int
    ) -> tuple[list[asyncpg.Record], int]:
        """The scope's changes after version ``after``, and its version to answer: the
        last one listed, or, when none is, the scope's current version (0: no change)."""
        async with as_principal(self._pool, p) as conn:
            rows = list(await conn.fetch(Q["changes"], stream_id, after, limit))
            if rows:
                return rows, int(rows[-1]["version"])
            return rows, int(await conn.fetchval(Q["scope_version"], stream_id))

    async def revisions(self, p: Principal, item_id: str) -> list[asyncpg.Record] | None:
        """The memory's kept revisions; None when the caller cannot see the memory."""
        return await self._of_visible(p, item_id, "revisions", item_id, p.org)

    async def links(
        self, p: Principal, item_id: str, direction: str, limit: int
    ) -> list[asyncpg.Record] | None:
        """The memory's links the caller may see; None when it cannot see the memory."""
        return await self._of_visible(p, item_id, "links", item_id, direction, limit, p.org)

    async def _of_visible(
        self, p: Principal, item_id: str, query: str, *args: Any
    ) -> list[asyncpg.Record] | None:
        """Rows about a memory (``query``), or None when the caller cannot see it."""
        async with as_principal(self._pool, p) as conn:
            if await conn.fetchrow(Q["get_item"], item_id, p.org, p.visible_scopes()) is None:
                return None
            return list(await conn.fetch(Q[query], *args))

    async def proposals(
        self, p: Principal, view: str, status: str | None, limit: int
    ) -> list[asyncpg.Record]:
        async with as_principal(self._pool, p) as conn:
            return list(
                await conn.fetch(
                    Q["proposals"],
                    p.org,
                    p.member,
                    view,
                    status,
                    PROPOSAL_DAYS,
                    "admin" in p.roles,
                    limit,
                    p.is_agent,
                )
            )

    async def list_items(
        self, p: Principal, statuses: list[str], before: Any, before_id: str, limit: int
    ) -> list[asyncpg.Record]:
        async with as_principal(self._pool, p) as conn:
            return list(
                await conn.fetch(
                    Q["list_items"], p.org, p.visible_scopes(), statuses, before, before_id, limit
                )
            )
