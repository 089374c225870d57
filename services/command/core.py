"""The pure decision core: ``decide(state, command, ctx) -> events``.

No I/O. Time, ids and sealing are passed in through ``Context`` so tests are
deterministic and the writer decides the same way on every replica.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from contracts import commands as c
from contracts.events import (
    ChangeProposed,
    Event,
    MemoryForgotten,
    MemoryLinked,
    MemoryPinned,
    MemoryRemembered,
    MemoryRevised,
    MemoryStatusChanged,
    MemoryUnlinked,
    ProposalResolved,
    Sealed,
)
from services.command.confirm import user_asked_to_save
from services.command.errors import (
    Conflict,
    Forbidden,
    Gone,
    InvalidCommand,
    LinkCapacityExceeded,
    NotFound,
    ProposalRequired,
)
from services.command.state import Item, Proposal, StreamState

ITEM_NAMESPACE = uuid.UUID("6f1d2b0e-8a51-4c3e-9a56-2b1f0c7d9e11")


@functools.lru_cache(maxsize=65_536)  # asked several times per command on the hot path
def new_item_id(command_id: str) -> str:
    """Deterministic: a command retried after a crash names the same item (and key)."""
    return str(uuid.uuid5(ITEM_NAMESPACE, command_id))


@dataclass(frozen=True)
class Context:
    scope: str  # resolved from the token, e.g. "member:ana"
    is_agent: bool
    now: datetime
    new_item_id: Callable[[], str]
    seal: Callable[[str, str], Sealed]  # (item_id, text) -> sealed text
    content_hash: Callable[[str], str]
    is_admin: bool = False  # the token has the org's admin role
    # Memories of other streams the caller can see, among those the command links to
    # (the writer looks them up; a link within the stream needs no lookup).
    targets: frozenset[str] = frozenset()
    member: str | None = None  # the token's member (an agent acts for one)


def decide(state: StreamState, cmd: c.Command, ctx: Context) -> list[Event]:
    handler = _HANDLERS[type(cmd)]
    return handler(state, cmd, ctx)


def _remember(state: StreamState, cmd: c.RememberMemory, ctx: Context) -> list[Event]:
    digest = ctx.content_hash(cmd.content)
    if digest in state.forgotten_hashes and not cmd.resave_forgotten:
        raise Conflict(
            "this text was forgotten before; send resave_forgotten=true if you mean "
            "to save it again",
            content=cmd.content,
        )
    confirmed = not cmd.candidate and (
        not ctx.is_agent
        or user_asked_to_save(cmd.user_message, cmd.content, shared=ctx.scope == "shared")
    )
    existing = state.active_by_key(cmd.key) if cmd.key else None
    if existing and confirmed:  # one key holds one fact: a confirmed save replaces it
        _own(existing, ctx)
        revised = _revision(existing, cmd.content, cmd.title, ctx, "corrected")
        return [revised, *_related(state, existing.item_id, existing.links, cmd.related_ids, ctx)]
    item_id = ctx.new_item_id()
    related = _related(state, item_id, None, cmd.related_ids, ctx)
    return [
        MemoryRemembered(
            item_id=item_id,
            scope=ctx.scope,
            kind=cmd.kind,
            status="active" if confirmed else "candidate",
            content=ctx.seal(item_id, cmd.content),
            title=ctx.seal(item_id, cmd.title) if cmd.title else None,
            key=cmd.key,
            pinned=cmd.pinned,
            tags=cmd.tags,
            sources=cmd.sources,
            content_hash=digest,
            content_length=len(cmd.content),
            expires_at=cmd.expires_at,
            replaces=existing.item_id if existing else None,
            author=ctx.member,
        ),
        *related,
    ]


def _revision(
    item: Item,
    text: str,
    title: str | None,
    ctx: Context,
    reason: str,
    restored_from: int | None = None,
) -> MemoryRevised:
    return MemoryRevised(
        item_id=item.item_id,
        revision=item.revision + 1,
        base_revision=item.revision,
        reason=reason,
        content=ctx.seal(item.item_id, text),
        title=ctx.seal(item.item_id, title) if title else item.current.title,
        content_hash=ctx.content_hash(text),
        content_length=len(text),
        restored_from=restored_from,
    )


def _item(state: StreamState, item_id: str) -> Item:
    item = state.items.get(item_id)
    if item is None:
        raise NotFound(f"no memory {item_id} in {state.stream_id}", item_id=item_id)
    if item.status == "forgotten":
        raise Gone(
            f"memory {item_id} was forgotten; it cannot be changed or restored", item_id=item_id
        )
    return item


def _check_base(item: Item, base: int, text: str | None = None) -> None:
    if base != item.revision:
        extra = {"item_id": item.item_id, "current_revision": item.revision, "base_revision": base}
        if text is not None:
            extra["content"] = text  # the caller's text comes back so nothing is lost
        raise Conflict(f"memory {item.item_id} is at revision {item.revision}, not {base}", **extra)


def _own(item: Item, ctx: Context) -> None:
    """In the shared scope a memory's text and status are changed by its author or an
    admin; a teammate proposes the change instead (seed 004)."""
    if (
        ctx.scope == "shared"
        and item.author is not None
        and item.author != ctx.member
        and not ctx.is_admin
    ):
        raise ProposalRequired(
            f"memory {item.item_id} is {item.author}'s: propose the change "
            f"(POST /v1/memories/{item.item_id}/propose); its author or an admin merges it",
            item_id=item.item_id,
            author=item.author,
        )


def _correct(state: StreamState, cmd: c.CorrectMemory, ctx: Context) -> list[Event]:
    item = _item(state, cmd.item_id)
    _check_base(item, cmd.base_revision, cmd.content)
    confirmed = not ctx.is_agent or user_asked_to_save(
        cmd.user_message, cmd.content, shared=ctx.scope == "shared"
    )
    if item.confirmed and not confirmed:
        # An inference never replaces a confirmed fact: it waits as a candidate.
        new_id = ctx.new_item_id()
        return [
            MemoryRemembered(
                item_id=new_id,
                scope=ctx.scope,
                kind=item.kind,
                status="candidate",
                content=ctx.seal(new_id, cmd.content),
                title=ctx.seal(new_id, cmd.title) if cmd.title else None,
                key=item.key,
                content_hash=ctx.content_hash(cmd.content),
                content_length=len(cmd.content),
                replaces=item.item_id,
                author=ctx.member,
            ),
            *_related(state, new_id, None, cmd.related_ids, ctx),
        ]
    _own(item, ctx)
    revised = _revision(item, cmd.content, cmd.title, ctx, "corrected")
    return [revised, *_related(state, item.item_id, item.links, cmd.related_ids, ctx)]


def _restore_revision(state: StreamState, cmd: c.RestoreRevision, ctx: Context) -> list[Event]:
    item = _item(state, cmd.item_id)
    _check_base(item, cmd.base_revision)
    _own(item, ctx)
    old = item.revisions.get(cmd.revision)
    if old is None or cmd.revision >= item.revision:
        raise InvalidCommand(f"memory {item.item_id} has no earlier revision {cmd.revision}")
    return [_copy_revision(item, cmd.revision, "restored")]


def _copy_revision(item: Item, revision: int, reason: str) -> MemoryRevised:
    old = item.revisions[revision]
    return MemoryRevised(
        item_id=item.item_id,
        revision=item.revision + 1,
        base_revision=item.revision,
        reason=reason,
        content=old.content,
        title=old.title,
        content_hash=old.content_hash,
        content_length=old.content_length,
        restored_from=revision,
    )


def _undo(state: StreamState, cmd: c.UndoChange, ctx: Context) -> list[Event]:
    item = _item(state, cmd.item_id)
    _check_base(item, cmd.base_revision)
    _own(item, ctx)
    if item.last_change is None:
        raise Conflict(f"memory {item.item_id} has no change to undo", item_id=item.item_id)
    what, before = item.last_change
    if what == "revision":
        return [_copy_revision(item, before, "undone")]
    if what == "pinned":
        return [MemoryPinned(item_id=item.item_id, revision=item.revision + 1, pinned=before)]
    if item.status == "candidate":  # only a person's confirm makes a candidate a memory
        raise Conflict(
            f"memory {item.item_id} is a candidate: confirm or dismiss it",
            item_id=item.item_id,
            memory_status=item.status,
        )
    return [_status_change(item, before)]


def _status_change(item: Item, status: str, superseded_by: str | None = None) -> Event:
    return MemoryStatusChanged(
        item_id=item.item_id,
        revision=item.revision + 1,
        status=status,
        previous=item.status,
        superseded_by=superseded_by,
    )


def _pin(state: StreamState, cmd: c.PinMemory, ctx: Context) -> list[Event]:
    item = _item(state, cmd.item_id)
    if item.pinned == cmd.pinned:
        return []
    return [MemoryPinned(item_id=item.item_id, revision=item.revision + 1, pinned=cmd.pinned)]


def _transition(
    state: StreamState, item_id: str, allowed: dict[str, str], superseded_by: str | None = None
) -> list[Event]:
    item = _item(state, item_id)
    target = allowed.get(item.status)
    if target is None:
        raise Conflict(
            f"memory {item_id} is {item.status}; that change does not apply",
            item_id=item_id,
            memory_status=item.status,
        )
    if target == item.status:
        return []
    return [_status_change(item, target, superseded_by)]


def _disable(state: StreamState, cmd: c.DisableMemory, ctx: Context) -> list[Event]:
    allowed = (
        {"active": "disabled", "disabled": "disabled"}
        if cmd.disabled
        else {"disabled": "active", "active": "active"}
    )
    return _transition(state, cmd.item_id, allowed)


def _archive(state: StreamState, cmd: c.ArchiveMemory, ctx: Context) -> list[Event]:
    _check_superseded_by(state, cmd.superseded_by)
    _own(_item(state, cmd.item_id), ctx)
    return _transition(
        state, cmd.item_id, {"active": "archived", "disabled": "archived"}, cmd.superseded_by
    )


def _check_superseded_by(state: StreamState, superseded_by: str | None) -> None:
    if superseded_by is not None and superseded_by not in state.items:
        raise InvalidCommand(f"superseded_by {superseded_by} is not a memory of this scope")


def _unarchive(state: StreamState, cmd: c.UnarchiveMemory, ctx: Context) -> list[Event]:
    _own(_item(state, cmd.item_id), ctx)
    return _transition(state, cmd.item_id, {"archived": "active"})


def _confirm(state: StreamState, cmd: c.ConfirmCandidate, ctx: Context) -> list[Event]:
    if ctx.is_agent:
        raise InvalidCommand("only a person can confirm a candidate")
    return _transition(state, cmd.item_id, {"candidate": "active"})


def _dismiss(state: StreamState, cmd: c.DismissCandidate, ctx: Context) -> list[Event]:
    return _forget(
        state,
        c.ForgetMemory(item_id=cmd.item_id, scope=cmd.scope, reason="candidate dismissed"),
        ctx,
        candidates_only=True,
    )


def _forget(
    state: StreamState, cmd: c.ForgetMemory, ctx: Context, candidates_only: bool = False
) -> list[Event]:
    item = _item(state, cmd.item_id)
    if candidates_only and item.status != "candidate":
        raise Conflict(f"memory {item.item_id} is {item.status}, not a candidate")
    return [_forgotten(item, cmd.reason)]


def _clear(state: StreamState, cmd: c.ClearMemories, ctx: Context) -> list[Event]:
    """Every memory of the stream not yet forgotten (candidates, disabled and archived
    ones too), forgotten in one command; none when the scope holds none."""
    if ctx.scope == "shared" and not ctx.is_admin:
        raise Forbidden("clearing the org's shared memory needs the admin role")
    if not cmd.confirm:
        raise InvalidCommand(
            "clearing erases every memory of this scope for good, with no undo; "
            "send confirm=true to mean it"
        )
    return [
        _forgotten(item, cmd.reason) for item in state.items.values() if item.status != "forgotten"
    ]


def _link(state: StreamState, cmd: c.LinkMemory, ctx: Context) -> list[Event]:
    item = _item(state, cmd.item_id)
    return _links(state, item.item_id, item.links, [(cmd.target_id, cmd.kind, cmd.weight)], ctx)


def _unlink(state: StreamState, cmd: c.UnlinkMemory, ctx: Context) -> list[Event]:
    item = _item(state, cmd.item_id)
    if (cmd.target_id, cmd.kind) not in (item.links or {}):
        raise NotFound(
            f"memory {item.item_id} has no {cmd.kind!r} link to {cmd.target_id}",
            item_id=item.item_id,
            target_id=cmd.target_id,
            kind=cmd.kind,
        )
    return [MemoryUnlinked(item_id=item.item_id, target_id=cmd.target_id, kind=cmd.kind)]


def _related(
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


def _check_target(state: StreamState, source_id: str, target_id: str, ctx: Context) -> None:
    """A link goes to a memory the caller can see: one of this stream, not forgotten, or
    one of another stream that the writer found visible (``ctx.targets``)."""
    if target_id == source_id:
        raise InvalidCommand(f"memory {source_id} cannot link to itself")
    target = state.items.get(target_id)
    if target is not None and target.status == "forgotten":
        raise Gone(f"memory {target_id} was forgotten; nothing links to it", item_id=target_id)
    if target is None and target_id not in ctx.targets:
        raise NotFound(f"no memory {target_id} you can see", item_id=target_id)


def _propose(state: StreamState, cmd: c.ProposeChange, ctx: Context) -> list[Event]:
    if ctx.scope != "shared":
        raise InvalidCommand("proposals are for the shared scope: change your own memory directly")
    item = _item(state, cmd.item_id)
    _check_base(item, cmd.base_revision, cmd.content)
    _check_superseded_by(state, cmd.superseded_by)
    applies = {"archive": ("active", "disabled"), "unarchive": ("archived",)}
    if item.status not in applies.get(cmd.change, (item.status,)):
        raise Conflict(
            f"memory {item.item_id} is {item.status}; '{cmd.change}' does not apply",
            item_id=item.item_id,
            memory_status=item.status,
        )
    proposal_id = ctx.new_item_id()
    return [
        ChangeProposed(
            item_id=item.item_id,
            proposal_id=proposal_id,
            change=cmd.change,
            base_revision=item.revision,
            reason=cmd.reason,
            proposer=ctx.member or "",
            content=ctx.seal(item.item_id, cmd.content) if cmd.content is not None else None,
            title=ctx.seal(item.item_id, cmd.title) if cmd.title else None,
            content_hash=ctx.content_hash(cmd.content) if cmd.content is not None else None,
            content_length=len(cmd.content) if cmd.content is not None else None,
            superseded_by=cmd.superseded_by,
        )
    ]


def _pending(state: StreamState, proposal_id: str) -> Proposal:
    proposal = (state.proposals or {}).get(proposal_id)
    if proposal is None:
        raise NotFound(f"no proposal {proposal_id} in {state.stream_id}", proposal_id=proposal_id)
    if proposal.status != "pending":
        raise Conflict(
            f"proposal {proposal_id} is {proposal.status} already",
            proposal_id=proposal_id,
            proposal_status=proposal.status,
        )
    return proposal


def _resolve(
    proposal_id: str, proposal: Proposal, status: str, reason: str | None = None
) -> ProposalResolved:
    return ProposalResolved(
        item_id=proposal.item_id, proposal_id=proposal_id, status=status, reason=reason
    )


def _reviewer(state: StreamState, proposal: Proposal, ctx: Context, what: str) -> Item:
    """The memory's author or an admin reviews a proposal; an agent never merges."""
    item = _item(state, proposal.item_id)
    if ctx.is_agent and what == "merge":
        raise Forbidden("an agent can propose but never merge")
    if not ctx.is_admin and item.author is not None and ctx.member != item.author:
        raise Forbidden(
            f"only {item.author}, who saved memory {item.item_id}, or an admin can {what} "
            "this proposal"
        )
    return item


def _merge(state: StreamState, cmd: c.MergeProposal, ctx: Context) -> list[Event]:
    proposal = _pending(state, cmd.proposal_id)
    item = _reviewer(state, proposal, ctx, "merge")
    if ctx.now > proposal.proposed_at + timedelta(days=c.PROPOSAL_DAYS):
        return [_resolve(cmd.proposal_id, proposal, "expired")]
    if item.revision != proposal.base_revision:  # never rebased
        return [_resolve(cmd.proposal_id, proposal, "outdated")]
    change: list[Event]
    if proposal.change == "correct":
        assert proposal.content is not None
        change = [
            MemoryRevised(
                item_id=item.item_id,
                revision=item.revision + 1,
                base_revision=item.revision,
                reason="corrected",
                content=proposal.content.content,
                title=proposal.content.title or item.current.title,
                content_hash=proposal.content.content_hash,
                content_length=proposal.content.content_length,
            )
        ]
    elif proposal.change == "archive":
        allowed = {"active": "archived", "disabled": "archived"}
        change = _transition(state, item.item_id, allowed, proposal.superseded_by)
    else:
        change = _transition(state, item.item_id, {"archived": "active"})
    return [*change, _resolve(cmd.proposal_id, proposal, "merged")]


def _reject(state: StreamState, cmd: c.RejectProposal, ctx: Context) -> list[Event]:
    proposal = _pending(state, cmd.proposal_id)
    _reviewer(state, proposal, ctx, "reject")
    return [_resolve(cmd.proposal_id, proposal, "rejected", cmd.reason)]


def _withdraw(state: StreamState, cmd: c.WithdrawProposal, ctx: Context) -> list[Event]:
    proposal = _pending(state, cmd.proposal_id)
    if proposal.proposer != ctx.member:
        raise Forbidden(f"proposal {cmd.proposal_id} is {proposal.proposer}'s to withdraw")
    return [_resolve(cmd.proposal_id, proposal, "withdrawn")]


def _forgotten(item: Item, reason: str | None) -> MemoryForgotten:
    hashes = tuple(sorted({r.content_hash for r in item.revisions.values()}))
    return MemoryForgotten(
        item_id=item.item_id, content_hashes=hashes, revisions=len(item.revisions), reason=reason
    )


_HANDLERS: dict[type[c.Command], Callable[[StreamState, Any, Context], list[Event]]] = {
    c.RememberMemory: _remember,
    c.CorrectMemory: _correct,
    c.RestoreRevision: _restore_revision,
    c.UndoChange: _undo,
    c.PinMemory: _pin,
    c.DisableMemory: _disable,
    c.ArchiveMemory: _archive,
    c.UnarchiveMemory: _unarchive,
    c.ConfirmCandidate: _confirm,
    c.DismissCandidate: _dismiss,
    c.ForgetMemory: _forget,
    c.ClearMemories: _clear,
    c.LinkMemory: _link,
    c.UnlinkMemory: _unlink,
    c.ProposeChange: _propose,
    c.MergeProposal: _merge,
    c.RejectProposal: _reject,
    c.WithdrawProposal: _withdraw,
}
