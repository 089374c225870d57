"""What events mark beside their rows, in the projector's full path (its one-statement
path takes no batch that holds one), in the batch's transaction:

- seed 004's charges (``charged`` on a save's or a correction's event): each recorded once
  per event in ``billing.charges``, with its month's usage per caller;
- seed 002's inferences (``inferred``): ``memory.items.inferred`` as the writer folds it,
  so a promotion or a fork, which reads the read model, copies an inference as one.

A batch of new memories alone, none charged nor inferred, costs nothing here but a pass
over its events; one that revises or makes a memory active again costs one UPDATE that
finds nothing to write unless an inference is confirmed."""

from __future__ import annotations

from typing import Any

import asyncpg

from contracts.envelope import EventHeader
from contracts.events import Event, MemoryRemembered, MemoryRevised, MemoryStatusChanged
from engram.billing import caller_of
from services.projector.core import org_scope

Batch = list[tuple[Any, EventHeader, Event]]
RECORD = "SELECT billing.record($1, $2, $3, $4, $5, $6, $7)"
MARK = """
UPDATE memory.items i SET inferred = u.inferred
FROM unnest($1::text[], $2::boolean[]) AS u(item_id, inferred)
WHERE i.item_id = u.item_id AND i.inferred IS DISTINCT FROM u.inferred"""


def marked(event: Event) -> bool:
    """Whether an event marks something the one-statement path does not write."""
    return isinstance(event, MemoryRemembered) and (event.charged > 0 or event.inferred)


async def record_charges(conn: asyncpg.Connection, batch: Batch) -> None:
    rows = [
        (
            env.stream_id,
            env.seq,
            org_scope(env.stream_id)[0],
            event.charged_to or caller_of(env.actor.member, env.actor.agent),
            event.item_id,
            event.charged,
            env.occurred_at,
        )
        for _, env, event in batch
        if isinstance(event, MemoryRemembered | MemoryRevised) and event.charged
    ]
    if rows:
        await conn.execute(RECORD, *(list(column) for column in zip(*rows, strict=True)))


async def record_inferences(
    conn: asyncpg.Connection, batch: Batch, status: dict[str, str | None]
) -> None:
    """``memory.items.inferred`` as the batch leaves it (``inference_marks``). A batch
    that confirms anything (a revision, a change back to active) costs one UPDATE, which
    writes only the rows whose mark changes."""
    marks = inference_marks([event for _, _, event in batch], status)
    if any(marks.values()) or any(
        not isinstance(e, MemoryRemembered) and e.item_id in marks for _, _, e in batch
    ):
        await conn.execute(MARK, list(marks), list(marks.values()))


def inference_marks(events: list[Event], status: dict[str, str | None]) -> dict[str, bool]:
    """Fold the events' inferences as the writer does (``services.command.fold``): a new
    memory is one when its event says so; an active one stops being one when a revision
    or a change back to active that is not an inference's comes. ``status``: each item's
    before the events. Pure: the items whose mark the events set, and to what."""
    now = dict(status)
    marks: dict[str, bool] = {}
    for event in events:
        if isinstance(event, MemoryRemembered):
            now[event.item_id] = event.status
            marks[event.item_id] = event.inferred  # a new row is not one: False is no write
        elif isinstance(event, MemoryRevised):
            if now.get(event.item_id) == "active" and not event.inferred:
                marks[event.item_id] = False
        elif isinstance(event, MemoryStatusChanged):
            now[event.item_id] = event.status
            if event.status == "active" and not event.inferred:
                marks[event.item_id] = False
    return marks
