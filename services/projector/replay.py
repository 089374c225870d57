"""Replay engram.events from offset 0 into a shadow database, compare it with the live
read models, and (``swap``) put it in their place atomically. Keys come from the live key
store, so a forgotten item replays as its tombstone: its key is gone, its text cannot
come back.

A whole replay records where it stopped in the shadow's ``projector.offsets``, under the
live projector's group id, so a swap knows what the shadow holds."""

from __future__ import annotations

import contextlib
import hashlib
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from contracts import topics
from engram.crypto import MasterKey
from engram.db import create_pool, migrate, migrate_shared
from engram.kafka import partition_count
from engram.keystore import KeyStore
from services.projector.handlers import EventProjector
from services.projector.ranges import Progress, apply_range
from services.projector.settings import ProjectorSettings

SQL_DIR = Path(__file__).parent / "sql"
GROUP_ID = ProjectorSettings.model_fields["group_id"].default

# Rows that must match between a replay and the live read models (no wall-clock columns).
CHECKSUM_QUERIES = {
    # Every column but the full-text vector (derived from the content and title); a
    # damaged expiry or sources went unseen (QA).
    "items": "SELECT item_id, org, scope, stream_id, kind, status, key, title, content, "
    "content_length, pinned, tags, "
    "sources, revision, superseded_by, replaces, expires_at, created_by, created_at, "
    "updated_at, archived_from, inferred FROM memory.items "
    "WHERE org LIKE $1 ORDER BY item_id",
    "revisions": "SELECT item_id, revision, reason, title, content, content_hash "
    "FROM memory.revisions WHERE org LIKE $1 ORDER BY item_id, revision",
    "tombstones": "SELECT item_id, content_hashes, revisions FROM memory.tombstones "
    "WHERE org LIKE $1 ORDER BY item_id",
    "generations": "SELECT org, scope, generation FROM memory.generations "
    "WHERE org LIKE $1 ORDER BY org, scope",
    "links": "SELECT source_id, target_id, kind, weight, created_at, updated_at "
    "FROM memory.links WHERE org LIKE $1 ORDER BY source_id, target_id, kind",
    "proposals": "SELECT proposal_id, item_id, change, base_revision, title, content, status, "
    "proposer_agent, kind, tags, "
    "proposed_at, resolved_at FROM memory.proposals WHERE org LIKE $1 ORDER BY proposal_id",
}


@dataclass(frozen=True)
class ReplayReport:
    events: int  # applied to the shadow
    seconds: float
    shadow_checksum: str
    live_checksum: str
    # Records skipped, each with why: undecodable, or data Postgres refuses (the live
    # projector dead-lettered them too).
    poison: tuple[str, ...] = ()

    @property
    def matches(self) -> bool:
        return self.shadow_checksum == self.live_checksum


async def checksum(conn: asyncpg.Connection, org_pattern: str = "%") -> str:
    digest = hashlib.sha256()
    for name, query in CHECKSUM_QUERIES.items():
        digest.update(name.encode())
        for row in await conn.fetch(query, org_pattern):
            digest.update(repr(tuple(row.values())).encode())
    return digest.hexdigest()


SHADOW_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
SHADOW_MARK = "engram replay shadow"  # the database's comment: only such a one is dropped


class ShadowError(Exception):
    """A shadow database name that cannot be (or may not be dropped to make) a shadow."""


async def recreate_database(live_dsn: str, name: str) -> str:
    """Make the shadow database ``name`` on the live server, anew; return its DSN. Only a
    database an earlier replay made (its comment says so) is dropped first: any other of
    that name, the live one above all, is refused."""
    if not SHADOW_NAME.match(name):
        raise ShadowError(
            f"{name!r}: a shadow's name is 1 to 63 lowercase letters, digits and '_', "
            "not starting with a digit"
        )
    conn = await asyncpg.connect(live_dsn)
    try:
        live = await conn.fetchval("SELECT current_database()")
        mark = await conn.fetchrow(
            "SELECT shobj_description(oid, 'pg_database') AS mark FROM pg_database "
            "WHERE datname = $1",
            name,
        )
        if name == live or (mark is not None and mark["mark"] != SHADOW_MARK):
            raise ShadowError(
                f"a database {name!r} exists and no replay made it: choose another name "
                "(a replay drops only its own shadows)"
            )
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{name}"')
        await conn.execute(f"COMMENT ON DATABASE \"{name}\" IS '{SHADOW_MARK}'")
    finally:
        await conn.close()
    base, _, _ = live_dsn.rpartition("/")
    return f"{base}/{name}"


async def replay(
    live_dsn: str,
    shadow_dsn: str,
    bootstrap: str,
    master: MasterKey,
    *,
    org_pattern: str = "%",
    progress: Progress | None = None,
    group_id: str = GROUP_ID,
) -> ReplayReport:
    started = time.monotonic()
    await migrate_shared(shadow_dsn)
    await migrate(shadow_dsn, "projector", SQL_DIR)
    async with live_and_shadow(live_dsn, shadow_dsn) as (live, shadow):
        poison = _Poison()
        projector = EventProjector(KeyStore(live, master), poison.skip)
        prefix = _key_prefix(org_pattern)
        count = await _apply_all(shadow, projector, bootstrap, progress, prefix, group_id)
        return await _report(live, shadow, org_pattern, count, started, poison)


@contextlib.asynccontextmanager
async def live_and_shadow(
    live_dsn: str, shadow_dsn: str
) -> AsyncIterator[tuple[asyncpg.Pool, asyncpg.Pool]]:
    """A small pool on each database, both closed on the way out."""
    live = await create_pool(live_dsn, max_size=2)
    shadow = await create_pool(shadow_dsn, max_size=2)
    try:
        yield live, shadow
    finally:
        await live.close()
        await shadow.close()


class _Poison:
    """The records a replay skipped, each with why, once each."""

    def __init__(self) -> None:
        self.why: dict[tuple[int, int], str] = {}  # (partition, offset): why

    async def skip(self, record: Any, error: str) -> None:
        self.why[(record.partition, record.offset)] = error  # dead-lettered live already


def _key_prefix(org_pattern: str) -> bytes | None:
    """What the keys of the compared orgs' streams start with (None: every org's)."""
    if org_pattern == "%":
        return None
    return org_pattern.rstrip("%").encode() + (b"" if org_pattern.endswith("%") else b"/")


async def _report(
    live: asyncpg.Pool,
    shadow: asyncpg.Pool,
    org_pattern: str,
    count: int,
    started: float,
    poison: _Poison,
) -> ReplayReport:
    async with shadow.acquire() as s, live.acquire() as lv:
        return ReplayReport(
            count - len(poison.why),
            round(time.monotonic() - started, 2),
            await checksum(s, org_pattern),
            await checksum(lv, org_pattern),
            tuple(poison.why.values()),
        )


async def _apply_all(
    shadow: asyncpg.Pool,
    projector: EventProjector,
    bootstrap: str,
    progress: Progress | None,
    prefix: bytes | None,
    group_id: str,
) -> int:
    """Every event up to the partitions' ends as of now; a whole replay (no ``prefix``)
    records where each partition stopped, as the projector's offsets in the shadow."""
    parts = range(await partition_count(bootstrap, topics.EVENTS))
    return await apply_range(
        shadow,
        projector,
        bootstrap,
        {p: 0 for p in parts},
        None,
        progress,
        prefix,
        group_id if prefix is None else None,
    )
