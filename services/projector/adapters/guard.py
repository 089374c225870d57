"""The full path's guard (``guard``): one statement that records a batch's events in the
audit table and reads its streams' heads and its items' statuses; then the events it
applies, each once, and what it reports instead (``projector.anomalies``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import asyncpg

from contracts.envelope import EventHeader
from engram.db import load_queries
from engram.logging import get_logger
from services.projector.core import Decoded, audit_row

log = get_logger(__name__)
Q = load_queries(Path(__file__).parent.parent / "sql" / "queries.sql")


async def guard(
    conn: asyncpg.Connection, batch: list[Decoded]
) -> tuple[list[Decoded], dict[str, int], dict[str, str | None]]:
    """Apply each (stream_id, seq) once; report gaps and conflicting duplicates.
    Returns the new events, the streams' heads with them, and the items' statuses."""
    row = await conn.fetchrow(
        Q["guard"],
        [audit_row(env, event) for _, env, event in batch],
        list({env.stream_id for _, env, _ in batch}),
        list({ev.item_id for _, _, ev in batch}),
    )
    new = set(row["new"])
    heads: dict[str, int] = json.loads(row["heads"])
    known: dict[str, list[str]] = json.loads(row["statuses"])  # item -> [status, stream]
    status: dict[str, str | None] = {item: s for item, (s, _) in known.items()}
    await _report_conflicts(conn, [(r, env) for r, env, _ in batch if env.event_id not in new])
    fresh = _first_copies(batch, new)
    foreign = _foreign(fresh, known)
    for record, env, _ in foreign:
        await _anomaly(conn, "foreign_item", record, env, None)
    await _report_gaps(conn, fresh, heads)
    return ([d for d in fresh if d not in foreign] if foreign else fresh), heads, status


async def _report_conflicts(conn: asyncpg.Connection, seen: list[tuple[Any, EventHeader]]) -> None:
    """Events already applied (a replayed batch): each a conflict where another event holds
    its seq."""
    if not seen:
        return
    rows = await conn.fetch(Q["audit_at"], [e.stream_id for _, e in seen], [e.seq for _, e in seen])
    held = {(r["stream_id"], r["seq"]): r["event_id"] for r in rows}
    for record, env in seen:
        if held.get((env.stream_id, env.seq)) != env.event_id:
            await _anomaly(conn, "conflicting_duplicate", record, env, None)


def _first_copies(batch: list[Decoded], new: set[str]) -> list[Decoded]:
    # Each new event once: the same event twice in one batch is inserted once, and its
    # second copy is no new event (QA: it was applied twice and reported as a gap, so
    # a replay that read both copies in one fetch counted otherwise than the live one).
    fresh: list[Decoded] = []
    taken: set[str] = set()
    for d in batch:
        if d[1].event_id in new and d[1].event_id not in taken:
            taken.add(d[1].event_id)
            fresh.append(d)
    return fresh


def _foreign(fresh: list[Decoded], known: dict[str, list[str]]) -> list[Decoded]:
    # An item is its stream's: an event of another stream naming it (ids that came
    # from a caller's key alone, before they were of their stream) changes nothing.
    return [d for d in fresh if known.get(d[2].item_id, ("", d[1].stream_id))[1] != d[1].stream_id]


async def _report_gaps(
    conn: asyncpg.Connection, fresh: list[Decoded], heads: dict[str, int]
) -> None:
    """Each event that does not follow its stream's head is a gap; ``heads`` moves on."""
    for record, env, _ in fresh:
        expected = heads.get(env.stream_id, 0) + 1
        if env.seq != expected:
            await _anomaly(conn, "gap", record, env, expected)
        heads[env.stream_id] = max(env.seq, heads.get(env.stream_id, 0))


async def _anomaly(
    conn: asyncpg.Connection,
    kind: str,
    record: Any,
    env: EventHeader,
    expected: int | None,
) -> None:
    log.error(
        "stream_anomaly",
        kind=kind,
        stream_id=env.stream_id,
        seq=env.seq,
        expected=expected,
        event_id=env.event_id,
        topic=record.topic,
        partition=record.partition,
        offset=record.offset,
    )
    await conn.execute(
        Q["anomaly"],
        kind,
        env.stream_id,
        expected,
        env.seq,
        env.event_id,
        record.topic,
        record.partition,
        record.offset,
    )
