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
from dataclasses import dataclass
from typing import Any

from contracts import topics
from engram.crypto import MasterKey
from engram.kafka import partition_count
from engram.keystore import KeyStore
from services.projector.adapters.shadow import (
    Connection,
    Pool,
    checksummed_rows,
    connection,
    current_database,
    database_comment,
    live_and_shadow,
    live_server,
    make_database,
    migrate_shadow,
)
from services.projector.handlers import EventProjector
from services.projector.ranges import Progress, apply_range
from services.projector.settings import ProjectorSettings

GROUP_ID = ProjectorSettings.model_fields["group_id"].default


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


async def checksum(conn: Connection, org_pattern: str = "%") -> str:
    """The rows a replay and the live read models must agree on, as one digest."""
    digest = hashlib.sha256()
    async for name, rows in checksummed_rows(conn, org_pattern):
        digest.update(name.encode())
        for values in rows:
            digest.update(repr(values).encode())
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
    async with live_server(live_dsn) as server:
        live = await current_database(server)
        exists, mark = await database_comment(server, name)
        if name == live or (exists and mark != SHADOW_MARK):
            raise ShadowError(
                f"a database {name!r} exists and no replay made it: choose another name "
                "(a replay drops only its own shadows)"
            )
        await make_database(server, name, SHADOW_MARK)
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
    await migrate_shadow(shadow_dsn)
    async with live_and_shadow(live_dsn, shadow_dsn) as (live, shadow):
        poison = _Poison()
        projector = EventProjector(KeyStore(live, master), poison.skip)
        prefix = _key_prefix(org_pattern)
        count = await _apply_all(shadow, projector, bootstrap, progress, prefix, group_id)
        return await _report(live, shadow, org_pattern, count, started, poison)


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
    live: Pool,
    shadow: Pool,
    org_pattern: str,
    count: int,
    started: float,
    poison: _Poison,
) -> ReplayReport:
    async with connection(shadow) as s, connection(live) as lv:
        return ReplayReport(
            count - len(poison.why),
            round(time.monotonic() - started, 2),
            await checksum(s, org_pattern),
            await checksum(lv, org_pattern),
            tuple(poison.why.values()),
        )


async def _apply_all(
    shadow: Pool,
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
