"""Replay engram.events from offset 0 into a shadow database, compare it with the live
read models, and (``swap``) put it in their place atomically. Keys come from the live key
store, so a forgotten item replays as its tombstone: its key is gone, its text cannot
come back.

A whole replay records where it stopped in the shadow's ``projector.offsets``, under the
live projector's group id, so a swap knows what the shadow holds."""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
from aiokafka import TopicPartition

from contracts import topics
from engram.crypto import MasterKey
from engram.db import create_pool, migrate, migrate_shared
from engram.faults import UNSTORABLE
from engram.kafka import consumer, partition_count
from engram.keystore import KeyStore
from engram.tracking import OFFSETS_UPSERT
from services.projector.handlers import EventProjector
from services.projector.settings import ProjectorSettings

SQL_DIR = Path(__file__).parent / "sql"
Progress = Callable[[str], None]
GROUP_ID = ProjectorSettings.model_fields["group_id"].default
STORE_OFFSET = OFFSETS_UPSERT.format(table="projector.offsets")

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
    live = await create_pool(live_dsn, max_size=2)
    shadow = await create_pool(shadow_dsn, max_size=2)
    try:
        poison: dict[tuple[int, int], str] = {}  # (partition, offset): why, once each

        async def skip_poison(record: Any, error: str) -> None:
            poison[(record.partition, record.offset)] = error  # dead-lettered live already

        projector = EventProjector(KeyStore(live, master), skip_poison)
        prefix = (
            None
            if org_pattern == "%"
            else org_pattern.rstrip("%").encode() + (b"" if org_pattern.endswith("%") else b"/")
        )
        count = await _apply_all(shadow, projector, bootstrap, progress, prefix, group_id)
        async with shadow.acquire() as s, live.acquire() as lv:
            return ReplayReport(
                count - len(poison),
                round(time.monotonic() - started, 2),
                await checksum(s, org_pattern),
                await checksum(lv, org_pattern),
                tuple(poison.values()),
            )
    finally:
        await live.close()
        await shadow.close()


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


async def _apply(
    shadow: asyncpg.Pool,
    projector: EventProjector,
    records: list[Any],
    group_id: str | None,
    tp: TopicPartition,
    reached: int,
) -> None:
    async with shadow.acquire() as conn, conn.transaction():
        await projector.handle_batch(conn, records)
        if group_id is not None:
            await conn.execute(STORE_OFFSET, group_id, tp.topic, tp.partition, reached)


async def apply_range(
    shadow: asyncpg.Pool,
    projector: EventProjector,
    bootstrap: str,
    starts: dict[int, int],
    stops: dict[int, int] | None,
    progress: Progress | None,
    prefix: bytes | None,
    group_id: str | None,
) -> int:
    """Apply each partition's events from ``starts`` to ``stops`` (default: its end as of
    now) into the shadow; with ``group_id``, store the offsets reached with the rows."""
    events = consumer(bootstrap)
    await events.start()
    count = 0
    try:
        tps = [TopicPartition(topics.EVENTS, p) for p in starts]
        events.assign(tps)
        ends = await events.end_offsets(tps)
        for tp in tps:
            stop = ends[tp] if stops is None else stops[tp.partition]
            events.seek(tp, starts[tp.partition])
            while (position := await events.position(tp)) < stop:
                fetched = await events.getmany(tp, timeout_ms=500, max_records=2000)
                records = [r for r in fetched.get(tp, []) if r.offset < stop]
                if not records:
                    continue
                reached = records[-1].offset + 1
                if prefix is not None:  # only the streams of the org being compared
                    records = [r for r in records if (r.key or b"").startswith(prefix)]
                try:
                    await _apply(shadow, projector, records, group_id, tp, reached)
                except UNSTORABLE:  # a record Postgres refuses: find it and let it go, as live
                    for one in records:
                        try:
                            await _apply(shadow, projector, [one], group_id, tp, one.offset + 1)
                        except UNSTORABLE as exc:
                            await projector.dead_letter(one, f"not storable: {exc!r}")
                    if group_id is not None:
                        async with shadow.acquire() as conn:
                            await conn.execute(
                                STORE_OFFSET, group_id, tp.topic, tp.partition, reached
                            )
                count += len(records)
                if progress:
                    progress(f"partition {tp.partition}: {position}/{stop} ({count} events)")
            if group_id is not None:  # an empty partition, or one read to its end already
                async with shadow.acquire() as conn:
                    await conn.execute(STORE_OFFSET, group_id, tp.topic, tp.partition, stop)
        return count
    finally:
        await events.stop()
