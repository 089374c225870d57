"""Pure projection: one event (with its opened text) -> the row writes it implies.

No I/O: the adapter decrypts sealed fields first and executes the writes in
one transaction with the offset. Writes are idempotent by key, so a batch
replayed after a crash converges to the same rows.
"""

from __future__ import annotations

from typing import Any

from contracts.envelope import EventHeader
from contracts.events import (
    NEUTRAL,
    Event,
    MemoryForgotten,
    MemoryRemembered,
    MemoryStatusChanged,
)
from services.projector.writes import Context, Opened, Write, writes_of

Decoded = tuple[Any, EventHeader, Event]  # a fetched record, its envelope and its event


def org_scope(stream_id: str) -> tuple[str, str]:
    org, _, scope = stream_id.partition("/")
    return org, scope


def touches_active(event: Event, status_before: str | None) -> bool:
    """Generations move on every change to active memory, as the writer counts them."""
    if isinstance(event, NEUTRAL):
        return False
    if isinstance(event, MemoryRemembered):
        return event.status == "active"
    if isinstance(event, MemoryStatusChanged):
        return "active" in (event.status, event.previous)
    return status_before == "active"


# Writes run grouped by query, in this order: each group only depends on earlier
# groups (a copied revision on the one before it; the forget after everything).
WRITE_ORDER = (
    "insert_item",
    "insert_revision",
    "revise_item",
    "relabel_item",
    "copy_revision",
    "pin_item",
    "kind_item",
    "status_item",
    "prune_revisions",
    "link",
    "propose",
    "resolve_proposal",
    "forget_links",
    "forget_proposals",
    "forget_item",
    "forget_revisions",
    "tombstone",
)


def status_after(event: Event, before: str | None) -> str | None:
    if isinstance(event, MemoryRemembered | MemoryStatusChanged):
        return event.status
    if isinstance(event, MemoryForgotten):
        return "forgotten"
    return before


def project(env: EventHeader, event: Event, opened: Opened) -> list[Write]:
    """The row writes ``event`` implies, in its type's order (``writes.writes_of``)."""
    org, scope = org_scope(env.stream_id)
    return writes_of(event, Context(env, opened, org, scope, env.actor.model_dump_json()))


def audit_row(env: EventHeader, event: Event) -> tuple[Any, ...]:
    org, scope = org_scope(env.stream_id)
    return (
        env.stream_id,
        env.seq,
        env.event_id,
        env.type,
        event.item_id,
        org,
        scope,
        getattr(event, "revision", None),
        env.actor.model_dump_json(),
        env.command_id,
        env.occurred_at,
        env.made_by,
    )
