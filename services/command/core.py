"""The pure decision core: ``decide(state, command, ctx) -> events``.

No I/O. Time, ids and sealing are passed in through ``Context`` so tests are
deterministic and the writer decides the same way on every replica. The item lifecycle
is here; saves and corrections (``texts``), links, proposals, copies, moves and charges
have modules of their own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contracts import commands as c
from contracts.events import (
    Event,
    MemoryPinned,
    MemoryRelabeled,
    MemoryRevised,
    MemoryStatusChanged,
    RevisionsPruned,
)
from engram.billing import hold_on
from services.command.charges import charged
from services.command.context import Context, new_item_id
from services.command.copies import fork, promote
from services.command.errors import (
    Conflict,
    Forbidden,
    Held,
    InvalidCommand,
    MemoryOff,
)
from services.command.labels import relabeled
from services.command.links import link, unlink
from services.command.moves import forget_moved, move
from services.command.proposals import merge, propose, reject, withdraw
from services.command.rules import (
    check_base,
    check_may_forget,
    check_owner,
    check_person_to_enable,
    check_quota,
    check_superseded_by,
    find_item,
    forgotten,
    replaced_on_confirm,
    transition,
)
from services.command.state import StreamState
from services.command.texts import correct, inferences_kept, remember, restore_revision, undo

__all__ = ["Context", "decide", "new_item_id"]


# What an agent may still do while its org's memory is off: erase. An agent's own scope is
# reached with its token alone, and forgetting is never refused (QA: the agent's memories
# could be erased by nobody until memory was on again).
ERASURES = (c.ForgetMemory, c.ClearMemories, c.ForgetMoved)
# What a held org may still do (seed 004's holds): erase, a dismissal (which forgets a
# candidate) too.
UNHELD = (*ERASURES, c.DismissCandidate)


def decide(state: StreamState, cmd: c.Command, ctx: Context) -> list[Event]:
    if cmd.expected_version is not None and cmd.expected_version != state.seq:
        raise Conflict(
            f"{state.stream_id} is at version {state.seq}, not {cmd.expected_version}: read "
            "it again and retry",
            current_version=state.seq,
            expected_version=cmd.expected_version,
        )
    if not isinstance(cmd, UNHELD) and (hold := hold_on(ctx.account, ctx.caller)):
        raise Held(hold)  # seed 004: a held org's every call but an erasure
    if ctx.is_agent and not ctx.memory and not isinstance(cmd, ERASURES):
        raise MemoryOff(
            "memory is off for this org (its policy's memory): an agent saves and changes "
            "nothing but forgets; what is held stays, for its people to read, correct and "
            "forget"
        )
    handler = _HANDLERS[type(cmd)]
    events = handler(state, cmd, ctx)
    if ctx.is_agent:
        events = inferences_kept(state, events)
    if ctx.max_memories_per_scope is not None:
        check_quota(state, events, ctx.max_memories_per_scope)
    return charged(state, cmd, events, ctx) + _pruned(state, events, ctx.keep_revisions)


def _pruned(state: StreamState, events: list[Event], keep: int | None) -> list[Event]:
    """What the org's retention drops after these events: for each memory given a new
    revision, the revisions more than ``keep`` before it (seed 004 keeps three)."""
    if keep is None:
        return []
    newest: dict[str, int] = {}
    for event in events:
        if isinstance(event, MemoryRevised | MemoryPinned | MemoryRelabeled | MemoryStatusChanged):
            newest[event.item_id] = event.revision
    pruned: list[Event] = []
    for item_id, revision in newest.items():
        item = state.items.get(item_id)  # None: made by these events (a fork's copy)
        if item is not None and item.revisions and min(item.revisions) < revision - keep:
            pruned.append(RevisionsPruned(item_id=item_id, before=revision - keep))
    return pruned


def _relabel(state: StreamState, cmd: c.RelabelMemory, ctx: Context) -> list[Event]:
    """Another kind or other tags: a new revision with the same text (none when nothing
    changes, as a pin to the pin it has)."""
    item = find_item(state, cmd.item_id)
    check_base(item, cmd.base_revision)
    check_owner(item, ctx)  # a teammate proposes it (change "relabel")
    relabel = relabeled(item, cmd.kind, cmd.tags, ctx)
    return [] if relabel is None else [relabel]


def _pin(state: StreamState, cmd: c.PinMemory, ctx: Context) -> list[Event]:
    item = find_item(state, cmd.item_id)
    check_owner(item, ctx)
    if item.pinned == cmd.pinned:
        return []
    return [MemoryPinned(item_id=item.item_id, revision=item.revision + 1, pinned=cmd.pinned)]


def _disable(state: StreamState, cmd: c.DisableMemory, ctx: Context) -> list[Event]:
    allowed = (
        {"active": "disabled", "disabled": "disabled"}
        if cmd.disabled
        else {"disabled": "active", "active": "active"}
    )
    item = find_item(state, cmd.item_id)
    check_owner(item, ctx)
    if not cmd.disabled:
        check_person_to_enable(item, ctx)
    return transition(state, cmd.item_id, allowed)


def _retract(state: StreamState, cmd: c.RetractKey, ctx: Context) -> list[Event]:
    """Disable the active memory that holds the key (seed 002's Forget by key); none holds
    it: 409, as the seed's unknown key. The key stays out of the answer: replies carry no
    memory's words."""
    item = state.active_by_key(ctx.key_hash(cmd.key))
    if item is None:
        raise Conflict("no active memory of this scope holds that key")
    check_owner(item, ctx)
    return transition(state, item.item_id, {"active": "disabled"})


def _archive(state: StreamState, cmd: c.ArchiveMemory, ctx: Context) -> list[Event]:
    check_superseded_by(state, cmd.item_id, cmd.superseded_by)
    item = find_item(state, cmd.item_id)
    check_owner(item, ctx)
    # Archived, it could be unarchived, active (QA: an agent brought a disabled memory
    # back by archiving it, then unarchiving it).
    check_person_to_enable(item, ctx)
    return transition(
        state, cmd.item_id, {"active": "archived", "disabled": "archived"}, cmd.superseded_by
    )


def _unarchive(state: StreamState, cmd: c.UnarchiveMemory, ctx: Context) -> list[Event]:
    item = find_item(state, cmd.item_id)
    check_owner(item, ctx)
    check_person_to_enable(item, ctx)
    return transition(state, cmd.item_id, {"archived": "active"})


def _confirm(state: StreamState, cmd: c.ConfirmCandidate, ctx: Context) -> list[Event]:
    if ctx.is_agent:
        raise Forbidden("only a person can confirm a candidate")
    replaced = replaced_on_confirm(state, find_item(state, cmd.item_id), ctx)
    # The candidate's own change last: a command's answer is the state after its last event.
    return [*replaced, *transition(state, cmd.item_id, {"candidate": "active"})]


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
    item = find_item(state, cmd.item_id)
    if candidates_only and item.status != "candidate":
        raise Conflict(f"memory {item.item_id} is {item.status}, not a candidate")
    if not candidates_only:  # a candidate is dismissed by any person, as it is confirmed
        check_may_forget(item, ctx)
    if cmd.base_revision is not None:
        check_base(item, cmd.base_revision)
    return [forgotten(item, cmd.reason)]


def _clear(state: StreamState, cmd: c.ClearMemories, ctx: Context) -> list[Event]:
    """Every memory of the stream not yet forgotten (candidates, disabled and archived
    ones too), forgotten in one command; none when the scope holds none."""
    if ctx.scope == "shared" and (ctx.is_agent or not ctx.is_admin):
        # An agent's, even an admin's, never (QA: seed 000, as its forget of a shared fact).
        raise Forbidden("clearing the org's shared memory needs a person with the admin role")
    if not cmd.confirm:
        raise InvalidCommand(
            "clearing erases every memory of this scope for good, with no undo; "
            "send confirm=true to mean it"
        )
    return [
        forgotten(item, cmd.reason) for item in state.items.values() if item.status != "forgotten"
    ]


_HANDLERS: dict[type[c.Command], Callable[[StreamState, Any, Context], list[Event]]] = {
    c.RememberMemory: remember,
    c.CorrectMemory: correct,
    c.RelabelMemory: _relabel,
    c.RestoreRevision: restore_revision,
    c.UndoChange: undo,
    c.PinMemory: _pin,
    c.DisableMemory: _disable,
    c.RetractKey: _retract,
    c.ArchiveMemory: _archive,
    c.UnarchiveMemory: _unarchive,
    c.ConfirmCandidate: _confirm,
    c.DismissCandidate: _dismiss,
    c.ForgetMemory: _forget,
    c.ClearMemories: _clear,
    c.LinkMemory: link,
    c.UnlinkMemory: unlink,
    c.ProposeChange: propose,
    c.MergeProposal: merge,
    c.RejectProposal: reject,
    c.WithdrawProposal: withdraw,
    c.PromoteSession: promote,
    c.ForkSession: fork,
    c.MoveMemory: move,
    c.ForgetMoved: forget_moved,
}
