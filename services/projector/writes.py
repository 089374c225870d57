"""The row writes of each event type: one small function a type, chosen by the event's
class (``writes_of``). Pure, as ``core`` is: ``core.project`` reads the envelope once and
calls it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import singledispatch
from typing import Any

from contracts.envelope import EventHeader
from contracts.events import (
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


@dataclass(frozen=True)
class Context:
    """What an event's writes take beside the event: its envelope and opened text, and
    its stream's org and scope and its actor's JSON, read once."""

    env: EventHeader
    opened: Opened
    org: str
    scope: str
    actor: str

    @property
    def at(self) -> datetime:
        return self.env.occurred_at


@singledispatch
def writes_of(event: Event, ctx: Context) -> list[Write]:
    raise TypeError(f"no projection for {type(event).__name__}")


@writes_of.register
def _remembered(event: MemoryRemembered, ctx: Context) -> list[Write]:
    labels = ctx.opened.labels or Labels()
    return [
        Write(
            "insert_item",
            (
                event.item_id,
                ctx.org,
                ctx.scope,
                ctx.env.stream_id,
                event.kind,
                event.status,
                labels.key,
                ctx.opened.title,
                ctx.opened.content,
                event.content_length,
                event.pinned,
                list(labels.tags),
                list(labels.sources),
                event.revision,
                event.replaces,
                event.expires_at,
                ctx.actor,
                ctx.at,
            ),
        ),
        _revision_row(event.item_id, event.revision, "remembered", event.content_hash, ctx),
    ]


@writes_of.register
def _revised(event: MemoryRevised, ctx: Context) -> list[Write]:
    opened = ctx.opened
    writes = [
        Write(
            "revise_item",
            (
                event.item_id,
                event.revision,
                opened.title,
                opened.content,
                event.content_length,
                ctx.at,
            ),
        ),
        _revision_row(event.item_id, event.revision, event.reason, event.content_hash, ctx),
    ]
    if (now := opened.labels) is not None:
        writes.append(Write("relabel_item", (event.item_id, list(now.tags), list(now.sources))))
    return writes


@writes_of.register
def _pinned(event: MemoryPinned, ctx: Context) -> list[Write]:
    reason = "pinned" if event.pinned else "unpinned"
    return [
        Write("pin_item", (event.item_id, event.revision, event.pinned, ctx.at)),
        _copy_revision(event.item_id, event.revision, reason, ctx),
    ]


@writes_of.register
def _relabeled(event: MemoryRelabeled, ctx: Context) -> list[Write]:
    writes = [
        Write("kind_item", (event.item_id, event.revision, event.kind, ctx.at)),
        _copy_revision(event.item_id, event.revision, "relabeled", ctx),
    ]
    # Its tags from now on: none when it has no labels; left as they are when its
    # labels cannot be opened (shredded by a forget that follows in the log).
    if event.labels is None:
        writes.append(Write("relabel_item", (event.item_id, [], None)))
    elif ctx.opened.labels is not None:
        writes.append(Write("relabel_item", (event.item_id, list(ctx.opened.labels.tags), None)))
    return writes


@writes_of.register
def _status_changed(event: MemoryStatusChanged, ctx: Context) -> list[Write]:
    writes = [
        Write(
            "status_item",
            (
                event.item_id,
                event.revision,
                event.status,
                event.superseded_by,
                ctx.at,
                event.previous,
            ),
        ),
        _copy_revision(event.item_id, event.revision, event.status, ctx),
    ]
    # Archiving names what replaces the memory: that one "supersedes" it, until the
    # archived memory comes back.
    if event.status == "archived" and event.superseded_by:
        writes.append(_link(event.superseded_by, event.item_id, "supersedes", None, ctx))
    elif event.previous == "archived":
        writes.append(_link(None, event.item_id, "supersedes", None, ctx, present=False))
    return writes


@writes_of.register
def _linked(event: MemoryLinked, ctx: Context) -> list[Write]:
    return [_link(event.item_id, event.target_id, event.kind, event.weight, ctx)]


@writes_of.register
def _unlinked(event: MemoryUnlinked, ctx: Context) -> list[Write]:
    return [_link(event.item_id, event.target_id, event.kind, None, ctx, present=False)]


@writes_of.register
def _proposed(event: ChangeProposed, ctx: Context) -> list[Write]:
    opened = ctx.opened
    return [
        Write(
            "propose",
            (
                event.proposal_id,
                event.item_id,
                ctx.org,
                ctx.scope,
                event.change,
                event.base_revision,
                opened.title,
                opened.content,
                event.superseded_by,
                _reason(event, opened),
                event.proposer,
                event.proposed_at,
                ctx.env.actor.agent if ctx.env.made_by == "agent" else None,
                event.kind,
                None if opened.tags is None else list(opened.tags),
            ),
        )
    ]


@writes_of.register
def _pruned(event: RevisionsPruned, ctx: Context) -> list[Write]:
    return [Write("prune_revisions", (event.item_id, event.before))]


@writes_of.register
def _resolved(event: ProposalResolved, ctx: Context) -> list[Write]:
    reason = _reason(event, ctx.opened)
    return [Write("resolve_proposal", (event.proposal_id, event.status, ctx.at, ctx.actor, reason))]


@writes_of.register
def _forgotten(event: MemoryForgotten, ctx: Context) -> list[Write]:
    item_id = event.item_id
    return [
        Write("forget_links", (item_id, ctx.org, ctx.scope)),
        Write("forget_proposals", (item_id, ctx.at)),
        Write("forget_item", (item_id, ctx.at)),
        Write("forget_revisions", (item_id,)),
        Write(
            "tombstone",
            (
                item_id,
                ctx.org,
                ctx.scope,
                list(event.content_hashes),
                event.revisions,
                event.reason,
                ctx.actor,
                ctx.env.command_id,
                ctx.at,
            ),
        ),
    ]


def _reason(event: ChangeProposed | ProposalResolved, opened: Opened) -> str | None:
    """The opened reason where the event seals it (None once shredded), else its plain one."""
    return opened.reason if event.reason_sealed else event.reason


def _link(
    source_id: str | None,
    target_id: str,
    kind: str,
    weight: float | None,
    ctx: Context,
    present: bool = True,
) -> Write:
    """A link made (or re-weighted), or removed when not ``present``."""
    return Write("link", (source_id, target_id, kind, ctx.org, ctx.scope, weight, ctx.at, present))


def _copy_revision(item_id: str, revision: int, reason: str, ctx: Context) -> Write:
    return Write(
        "copy_revision", (item_id, revision, reason, ctx.actor, ctx.env.command_id, ctx.at)
    )


def _revision_row(
    item_id: str, revision: int, reason: str, content_hash: str, ctx: Context
) -> Write:
    return Write(
        "insert_revision",
        (
            item_id,
            revision,
            ctx.org,
            ctx.scope,
            reason,
            ctx.opened.title,
            ctx.opened.content,
            content_hash,
            ctx.actor,
            ctx.env.command_id,
            ctx.at,
        ),
    )
