"""Row-level security for one principal: the transaction every recall read runs in.

The recall role sees only the rows the settings below allow (``recall.org()``,
``recall.visible_scopes()`` in the migrations), whatever SQL it sends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar

import asyncpg

from engram.auth import Principal

SCOPED = (
    "SELECT set_config('engram.org', $1, true), set_config('engram.scopes', $2, true), "
    "set_config('engram.member', $3, true)"
)


def scopes_literal(scopes: list[str]) -> str:
    """A Postgres text[] literal; every element quoted, so no scope can break out."""
    quoted = ('"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"' for s in scopes)
    return "{" + ",".join(quoted) + "}"


# The transaction a packet runs in: every read of one request shares it, instead of
# paying BEGIN / set_config / COMMIT for each of them.
_SESSION: ContextVar[tuple[Principal, asyncpg.Connection] | None] = ContextVar(
    "recall_session", default=None
)


@asynccontextmanager
async def as_principal(pool: asyncpg.Pool, p: Principal) -> AsyncIterator[asyncpg.Connection]:
    """A transaction in which row-level security shows only what ``p`` may see (the
    request's open one, when it already has one for the same principal)."""
    current = _SESSION.get()
    if current is not None and current[0] == p:
        yield current[1]
        return
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(SCOPED, p.org, scopes_literal(p.visible_scopes()), p.member)
        token = _SESSION.set((p, conn))
        try:
            yield conn
        finally:
            _SESSION.reset(token)


@asynccontextmanager
async def apart(pool: asyncpg.Pool, p: Principal) -> AsyncIterator[asyncpg.Connection]:
    """A second transaction for the same principal, for a read that runs at the same time
    as the request's own (a connection answers one statement at a time). Use it in its
    own task: the reads inside it go to this transaction."""
    token = _SESSION.set(None)
    try:
        async with as_principal(pool, p) as conn:
            yield conn
    finally:
        _SESSION.reset(token)
