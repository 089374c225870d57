"""Links between memories (seed 004): a directed, kinded, optionally weighted edge from a
memory of the caller's stream to any memory the caller can see."""

from __future__ import annotations

from collections.abc import Iterable

from contracts import commands as c
from contracts.events import (
    Event,
    MemoryLinked,
    MemoryUnlinked,
)
from services.command.context import Context
from services.command.errors import (
    Gone,
    InvalidCommand,
    LinkCapacityExceeded,
    NotFound,
)
from services.command.rules import check_not_teammates, find_item
from services.command.state import Item, StreamState


def link(state: StreamState, cmd: c.LinkMemory, ctx: Context) -> list[Event]:
    item = find_item(state, cmd.item_id)
    _check_own(item, ctx)
    return _links(state, item.item_id, item.links, [(cmd.target_id, cmd.kind, cmd.weight)], ctx)


def unlink(state: StreamState, cmd: c.UnlinkMemory, ctx: Context) -> list[Event]:
    item = find_item(state, cmd.item_id)
    _check_own(item, ctx)
    if (cmd.target_id, cmd.kind) not in (item.links or {}):
        raise NotFound(
            f"memory {item.item_id} has no {cmd.kind!r} link to {cmd.target_id}",
            item_id=item.item_id,
            target_id=cmd.target_id,
            kind=cmd.kind,
        )
    return [MemoryUnlinked(item_id=item.item_id, target_id=cmd.target_id, kind=cmd.kind)]


def related(
    state: StreamState,
    source_id: str,
    links: dict[tuple[str, str], float | None] | None,
    related_ids: Iterable[str],
    ctx: Context,
) -> list[Event]:
    """The ``related`` links a save or a correction asks for (``related_ids``)."""
    return _links(state, source_id, links, [(t, "related", None) for t in related_ids], ctx)


def _links(
    state: StreamState,
    source_id: str,
    links: dict[tuple[str, str], float | None] | None,
    wanted: list[tuple[str, str, float | None]],
    ctx: Context,
) -> list[Event]:
    """A MemoryLinked for each wanted link that is new or has a new weight; the same
    link again (a weight of None keeps the one it has) changes nothing."""
    held = dict(links or {})
    events: list[Event] = []
    for target_id, kind, weight in wanted:
        _check_target(state, source_id, target_id, ctx)
        if (target_id, kind) in held:
            if weight is None or held[target_id, kind] == weight:
                continue
        elif len(held) >= c.MAX_LINKS:
            raise LinkCapacityExceeded(
                f"memory {source_id} holds {c.MAX_LINKS} links already; unlink one first",
                item_id=source_id,
                limit=c.MAX_LINKS,
            )
        elif sum(1 for t, _ in held if t == target_id) >= c.MAX_LINK_KINDS:
            raise LinkCapacityExceeded(
                f"memory {source_id} has {c.MAX_LINK_KINDS} kinds of link to {target_id} "
                "already; unlink one first",
                item_id=source_id,
                target_id=target_id,
                limit=c.MAX_LINK_KINDS,
            )
        held[target_id, kind] = weight
        events.append(
            MemoryLinked(item_id=source_id, target_id=target_id, kind=kind, weight=weight)
        )
    return events


def _check_own(item: Item, ctx: Context) -> None:
    """A link goes from a memory of the caller's own (seed 004): from a teammate's shared
    memory its author or an org admin links and unlinks."""
    check_not_teammates(
        item, ctx, "links from it are its author's or an org admin's to make or remove"
    )


def _check_target(state: StreamState, source_id: str, target_id: str, ctx: Context) -> None:
    """A link goes to a memory the caller can see: one of this stream, not forgotten, or
    one of another stream that the writer found visible (``ctx.targets``)."""
    if target_id == source_id:
        raise InvalidCommand(f"memory {source_id} cannot link to itself")
    target = state.items.get(target_id)
    forgotten = target.status == "forgotten" if target else target_id in ctx.forgotten_targets
    if forgotten:
        raise Gone(f"memory {target_id} was forgotten; nothing links to it", item_id=target_id)
    if target is None and target_id not in ctx.targets:
        raise NotFound(f"no memory {target_id} you can see", item_id=target_id)
