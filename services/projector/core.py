"""Pure projection: one event (with its opened text) -> the row writes it implies.

No I/O: the adapter decrypts sealed fields first and executes the writes in
one transaction with the offset. Writes are idempotent by key, so a batch
replayed after a crash converges to the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contracts.envelope import EventHeader
from contracts.events import (
    NEUTRAL,
    ChangeProposed,
    Event,
    Labels,
    MemoryForgotten,
    MemoryLinked,
    MemoryPinned,
    MemoryRelabeled,
    MemoryRemembered,
    MemoryRevised,
    MemoryStatusChanged,
    MemoryUnlinked,
    ProposalResolved,
    RevisionsPruned,
)


@dataclass(frozen=True)
class Write:
    query: str
    args: tuple[Any, ...]


@dataclass(frozen=True)
class Opened:
    """The plaintext of an event's sealed fields; None where the key is gone."""

    content: str | None
    title: str | None
    reason: str | None = None  # a proposal's or a rejection's, sealed
    labels: Labels | None = None  # a new memory's key, tags and sources
    tags: tuple[str, ...] | None = None  # a relabel proposal's


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
    org, scope = org_scope(env.stream_id)
    actor = env.actor.model_dump_json()
    at = env.occurred_at
    if isinstance(event, MemoryRemembered):
        labels = opened.labels or Labels()
        return [
            Write(
                "insert_item",
                (
                    event.item_id,
                    org,
                    scope,
                    env.stream_id,
                    event.kind,
                    event.status,
                    labels.key,
                    opened.title,
                    opened.content,
                    event.content_length,
                    event.pinned,
                    list(labels.tags),
                    list(labels.sources),
                    event.revision,
                    event.replaces,
                    event.expires_at,
                    actor,
                    at,
                ),
            ),
            _revision_row(
                event.item_id,
                event.revision,
                org,
                scope,
                "remembered",
                opened,
                event.content_hash,
                actor,
                env,
            ),
        ]
    if isinstance(event, MemoryRevised):
        return [
            Write(
                "revise_item",
                (
                    event.item_id,
                    event.revision,
                    opened.title,
                    opened.content,
                    event.content_length,
                    at,
                ),
            ),
            _revision_row(
                event.item_id,
                event.revision,
                org,
                scope,
                event.reason,
                opened,
                event.content_hash,
                actor,
                env,
            ),
            *(
                [Write("relabel_item", (event.item_id, list(now.tags), list(now.sources)))]
                if (now := opened.labels) is not None
                else []
            ),
        ]
    if isinstance(event, MemoryPinned):
        return [
            Write("pin_item", (event.item_id, event.revision, event.pinned, at)),
            Write(
                "copy_revision",
                (
                    event.item_id,
                    event.revision,
                    "pinned" if event.pinned else "unpinned",
                    actor,
                    env.command_id,
                    at,
                ),
            ),
        ]
    if isinstance(event, MemoryRelabeled):
        writes = [
            Write("kind_item", (event.item_id, event.revision, event.kind, at)),
            Write(
                "copy_revision",
                (event.item_id, event.revision, "relabeled", actor, env.command_id, at),
            ),
        ]
        # Its tags from now on: none when it has no labels; left as they are when its
        # labels cannot be opened (shredded by a forget that follows in the log).
        if event.labels is None:
            writes.append(Write("relabel_item", (event.item_id, [], None)))
        elif opened.labels is not None:
            writes.append(Write("relabel_item", (event.item_id, list(opened.labels.tags), None)))
        return writes
    if isinstance(event, MemoryStatusChanged):
        writes = [
            Write(
                "status_item",
                (
                    event.item_id,
                    event.revision,
                    event.status,
                    event.superseded_by,
                    at,
                    event.previous,
                ),
            ),
            Write(
                "copy_revision",
                (event.item_id, event.revision, event.status, actor, env.command_id, at),
            ),
        ]
        # Archiving names what replaces the memory: that one "supersedes" it, until the
        # archived memory comes back.
        if event.status == "archived" and event.superseded_by:
            writes.append(_link(event.superseded_by, event.item_id, "supersedes", env, None))
        elif event.previous == "archived":
            writes.append(_link(None, event.item_id, "supersedes", env, None, present=False))
        return writes
    if isinstance(event, MemoryLinked):
        return [_link(event.item_id, event.target_id, event.kind, env, event.weight)]
    if isinstance(event, MemoryUnlinked):
        return [_link(event.item_id, event.target_id, event.kind, env, None, present=False)]
    if isinstance(event, ChangeProposed):
        return [
            Write(
                "propose",
                (
                    event.proposal_id,
                    event.item_id,
                    org,
                    scope,
                    event.change,
                    event.base_revision,
                    opened.title,
                    opened.content,
                    event.superseded_by,
                    opened.reason if event.reason_sealed else event.reason,
                    event.proposer,
                    event.proposed_at,
                    env.actor.agent if env.made_by == "agent" else None,
                    event.kind,
                    None if opened.tags is None else list(opened.tags),
                ),
            )
        ]
    if isinstance(event, RevisionsPruned):
        return [Write("prune_revisions", (event.item_id, event.before))]
    if isinstance(event, ProposalResolved):
        return [
            Write(
                "resolve_proposal",
                (
                    event.proposal_id,
                    event.status,
                    at,
                    actor,
                    opened.reason if event.reason_sealed else event.reason,
                ),
            )
        ]
    if isinstance(event, MemoryForgotten):
        return [
            Write("forget_links", (event.item_id, org, scope)),
            Write("forget_proposals", (event.item_id, at)),
            Write("forget_item", (event.item_id, at)),
            Write("forget_revisions", (event.item_id,)),
            Write(
                "tombstone",
                (
                    event.item_id,
                    org,
                    scope,
                    list(event.content_hashes),
                    event.revisions,
                    event.reason,
                    actor,
                    env.command_id,
                    at,
                ),
            ),
        ]
    raise TypeError(f"no projection for {type(event).__name__}")


def _link(
    source_id: str | None,
    target_id: str,
    kind: str,
    env: EventHeader,
    weight: float | None,
    present: bool = True,
) -> Write:
    """A link made (or re-weighted), or removed when not ``present``."""
    org, scope = org_scope(env.stream_id)
    return Write("link", (source_id, target_id, kind, org, scope, weight, env.occurred_at, present))


def _revision_row(
    item_id: str,
    revision: int,
    org: str,
    scope: str,
    reason: str,
    opened: Opened,
    content_hash: str,
    actor: str,
    env: EventHeader,
) -> Write:
    return Write(
        "insert_revision",
        (
            item_id,
            revision,
            org,
            scope,
            reason,
            opened.title,
            opened.content,
            content_hash,
            actor,
            env.command_id,
            env.occurred_at,
        ),
    )
