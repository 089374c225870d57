"""The pure decision core: ``decide(state, command, ctx) -> events``.

No I/O. Time, ids and sealing are passed in through ``Context`` so tests are
deterministic and the writer decides the same way on every replica. The item lifecycle
is here; links and proposals have modules of their own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contracts import commands as c
from contracts.events import (
    Event,
    MemoryPinned,
    MemoryRelabeled,
    MemoryRemembered,
    MemoryRevised,
    MemoryStatusChanged,
    RevisionsPruned,
)
from engram.billing import hold_on
from services.command.charges import charged
from services.command.confirm import user_asked_to_save
from services.command.context import Context, new_item_id
from services.command.copies import fork, promote
from services.command.errors import (
    Conflict,
    Forbidden,
    Held,
    InvalidCommand,
    MemoryOff,
)
from services.command.labels import inherited, labelled, relabeled
from services.command.links import link, related, unlink
from services.command.moves import forget_moved, move
from services.command.proposals import merge, propose, reject, withdraw
from services.command.rules import (
    check_base,
    check_key_free,
    check_may_forget,
    check_not_forgotten,
    check_not_held,
    check_owner,
    check_person_for_text,
    check_person_to_enable,
    check_quota,
    check_run_cap,
    check_superseded_by,
    find_item,
    forgotten,
    holder_revised,
    new_revision,
    replaced_on_confirm,
    revises_holder,
    status_change,
    superseded_by,
    transition,
)
from services.command.state import Item, StreamState

__all__ = ["Context", "decide", "new_item_id"]


# What an agent may still do while its org's memory is off: erase. An agent's own scope is
# reached with its token alone, and forgetting is never refused (QA: the agent's memories
# could be erased by nobody until memory was on again).
ERASURES = (c.ForgetMemory, c.ClearMemories, c.ForgetMoved)


def decide(state: StreamState, cmd: c.Command, ctx: Context) -> list[Event]:
    if cmd.expected_version is not None and cmd.expected_version != state.seq:
        raise Conflict(
            f"{state.stream_id} is at version {state.seq}, not {cmd.expected_version}: read "
            "it again and retry",
            current_version=state.seq,
            expected_version=cmd.expected_version,
        )
    if not isinstance(cmd, ERASURES) and (hold := hold_on(ctx.account, ctx.caller)):
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
        events = _inferences_kept(state, events)
    if ctx.max_memories_per_scope is not None:
        check_quota(state, events, ctx.max_memories_per_scope)
    return charged(state, cmd, events, ctx) + _pruned(state, events, ctx.keep_revisions)


def _inferences_kept(state: StreamState, events: list[Event]) -> list[Event]:
    """An agent's change of an inferred fact leaves it one: an undo, a restore, or a
    status change back to active confirm nothing (QA: an agent's unarchive, or its undo
    of the extractor's revision, made the inference a confirmed fact). Its corrections and
    saves say so themselves (one the user asked for confirms it)."""
    kept: list[Event] = []
    for event in events:
        item = state.items.get(event.item_id)
        if (
            item is not None
            and not item.confirmed
            and item.status != "candidate"
            and (
                isinstance(event, MemoryStatusChanged)
                or (isinstance(event, MemoryRevised) and event.reason != "corrected")
            )
        ):
            event = event.model_copy(update={"inferred": True})
        kept.append(event)
    return kept


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


def _remember(state: StreamState, cmd: c.RememberMemory, ctx: Context) -> list[Event]:
    digest = ctx.content_hash(cmd.content)
    check_not_forgotten(state, digest, cmd.resave_forgotten, cmd.content)
    key_hash = ctx.key_hash(cmd.key) if cmd.key else None
    inferred = _applied(state, cmd, ctx, key_hash, digest)
    confirmed = inferred or (
        not cmd.candidate
        and (not ctx.is_agent or _agent_confirms(state, cmd, ctx, key_hash, digest))
    )
    if inferred or not confirmed:  # learned again, or proposed again: not twice
        check_not_held(state, digest, ctx)
    existing = state.active_by_key(key_hash) if key_hash else None
    if existing and confirmed:  # one key holds one fact: a confirmed save replaces it
        check_owner(existing, ctx, asked=True)
        if revises_holder(existing, cmd.kind, cmd.expires_at, ctx.now):
            revised = holder_revised(
                existing,
                ctx,
                content=cmd.content,
                title=cmd.title,
                digest=digest,
                key=cmd.key,
                tags=cmd.tags,
                sources=cmd.sources,
                pinned=cmd.pinned,
                inferred=inferred,
            )
            links = related(state, existing.item_id, existing.links, cmd.related_ids, ctx)
            return [*revised, *links]
    if not confirmed:
        check_run_cap(state, cmd.run_id, ctx)
    item_id = ctx.new_item_id()
    links = related(state, item_id, None, cmd.related_ids, ctx)
    # A fact of another kind or lifetime is a memory of its own, which the key's memory is
    # archived for (superseded by it); the command's answer is the new memory's, its last.
    superseded = [superseded_by(existing, item_id)] if existing and confirmed else []
    return [
        *superseded,
        MemoryRemembered(
            item_id=item_id,
            scope=ctx.scope,
            kind=cmd.kind,
            status="active" if confirmed else "candidate",
            content=ctx.seal(item_id, cmd.content),
            title=ctx.seal(item_id, cmd.title) if cmd.title else None,
            pinned=cmd.pinned,
            **labelled(item_id, ctx, cmd.key, cmd.tags, cmd.sources),
            content_hash=digest,
            content_length=len(cmd.content),
            expires_at=cmd.expires_at,
            replaces=existing.item_id if existing else None,
            author=ctx.member,
            run_id=None if confirmed else cmd.run_id,
            inferred=inferred,
        ),
        *links,
    ]


LEARNED_SCOPES = ("session:", "agent:")  # seed 002's learned memory and agent memory


def _applied(
    state: StreamState, cmd: c.RememberMemory, ctx: Context, key_hash: str | None, digest: str
) -> bool:
    """Whether the extractor's fact is used at once, unconfirmed (the org's ``learning:
    apply``, seed 002): in a session's or an agent's memory only, and never over a confirmed
    fact of its key, nor for a key or a text a person retracted (seed 002: only a direct
    Remember brings one back). Otherwise it waits as a candidate (seed 000)."""
    if not (cmd.extracted and ctx.apply_learning and ctx.scope.startswith(LEARNED_SCOPES)):
        return False
    holder = state.active_by_key(key_hash) if key_hash else None
    return (holder is None or not holder.confirmed) and not state.retracts(key_hash, digest)


def _agent_confirms(
    state: StreamState, cmd: c.RememberMemory, ctx: Context, key_hash: str | None, digest: str
) -> bool:
    """An agent's save is a fact when the user's message asked for it (seed 000), unless
    its key's fact, or its very text, is retracted: that is a person's to bring back (seed
    002; a seed audit and QA: an agent's save made it active again)."""
    asked = user_asked_to_save(cmd.user_message, cmd.content, shared=ctx.scope == "shared")
    return asked and not state.retracts(key_hash, digest)


def _correct(state: StreamState, cmd: c.CorrectMemory, ctx: Context) -> list[Event]:
    item = find_item(state, cmd.item_id)
    check_base(item, cmd.base_revision, cmd.content)
    if ctx.is_agent and item.retracted:  # QA: it rewrote the text a person had retracted
        raise Forbidden(
            f"memory {item.item_id} is retracted: a person changes it or brings it back",
            item_id=item.item_id,
        )
    digest = ctx.content_hash(cmd.content)
    check_not_forgotten(state, digest, cmd.resave_forgotten, cmd.content)
    confirmed = not ctx.is_agent or (
        user_asked_to_save(cmd.user_message, cmd.content, shared=ctx.scope == "shared")
        # Nor another memory corrected to a retracted text (QA).
        and not state.retracts(None, digest)
    )
    # An inferred fact (seed 002's learned memory) is rewritten unasked, as the
    # extractor's consolidation does, only while the org applies learning, and never to a
    # retracted text (QA: an agent brought one back so).
    inference = not item.confirmed and item.status != "candidate"
    rewrites = confirmed or (inference and ctx.apply_learning and not state.retracts(None, digest))
    if (item.confirmed or inference) and not rewrites:
        # An inference never replaces a confirmed fact: it waits as a candidate, unless the
        # scope holds its text already (QA: an agent's correction to the fact's own text,
        # or to a candidate's, went round already_held).
        check_not_held(state, digest, ctx)
        check_run_cap(state, cmd.run_id, ctx)
        new_id = ctx.new_item_id()
        return [
            MemoryRemembered(
                item_id=new_id,
                scope=ctx.scope,
                kind=item.kind,
                status="candidate",
                content=ctx.seal(new_id, cmd.content),
                title=ctx.seal(new_id, cmd.title) if cmd.title else None,
                **inherited(item, new_id, ctx),
                content_hash=digest,
                content_length=len(cmd.content),
                replaces=item.item_id,
                author=ctx.member,
                run_id=cmd.run_id,
            ),
            *related(state, new_id, None, cmd.related_ids, ctx),
        ]
    check_owner(item, ctx, asked=confirmed)
    if item.status == "candidate" or not confirmed:  # it stays one, or an inference: not
        # as a copy of text the scope holds
        check_not_held(state, digest, ctx, own=item.item_id)
    # An agent's unasked correction of an inference is one too (seed 002's consolidation).
    revised = new_revision(
        item, cmd.content, cmd.title, ctx, "corrected", digest=digest, inferred=not confirmed
    )
    return [revised, *related(state, item.item_id, item.links, cmd.related_ids, ctx)]


def _restore_revision(state: StreamState, cmd: c.RestoreRevision, ctx: Context) -> list[Event]:
    item = find_item(state, cmd.item_id)
    check_base(item, cmd.base_revision)
    check_owner(item, ctx)
    check_person_for_text(item, ctx, "restore an earlier text of")
    old = item.revisions.get(cmd.revision)
    if cmd.revision < item.revision and old is None and item.revisions:
        raise Conflict(
            f"memory {item.item_id} no longer keeps revision {cmd.revision}: the org's "
            f"retention keeps revisions {min(item.revisions)} to {item.revision}",
            item_id=item.item_id,
            oldest_kept=min(item.revisions),
        )
    if old is None or cmd.revision >= item.revision:
        raise InvalidCommand(f"memory {item.item_id} has no earlier revision {cmd.revision}")
    return [_copy_revision(state, item, cmd.revision, "restored")]


def _copy_revision(state: StreamState, item: Item, revision: int, reason: str) -> MemoryRevised:
    old = item.revisions[revision]
    if old.content_hash in state.forgotten_hashes:  # as a correction, never without asking
        raise Conflict(
            f"revision {revision} of memory {item.item_id} holds text that was forgotten "
            "since: correct the memory with that text and resave_forgotten=true if you mean "
            "to bring it back",
            item_id=item.item_id,
            revision=revision,
        )
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
    item = find_item(state, cmd.item_id)
    check_base(item, cmd.base_revision)
    check_owner(item, ctx)
    if item.last_change is None:
        raise Conflict(f"memory {item.item_id} has no change to undo", item_id=item.item_id)
    what, before = item.last_change
    if what == "revision":
        check_person_for_text(item, ctx, "undo a correction of")
        return [_copy_revision(state, item, before, "undone")]
    if what == "pinned":
        return [MemoryPinned(item_id=item.item_id, revision=item.revision + 1, pinned=before)]
    if what == "relabel":
        kind, labels = before
        return [
            MemoryRelabeled(
                item_id=item.item_id, revision=item.revision + 1, kind=kind, labels=labels
            )
        ]
    if item.status == "candidate":  # only a person's confirm makes a candidate a memory
        raise Conflict(
            f"memory {item.item_id} is a candidate: confirm or dismiss it",
            item_id=item.item_id,
            memory_status=item.status,
        )
    if before == "active":
        check_person_to_enable(item, ctx)
        check_key_free(state, item)
    return [status_change(item, before)]


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
    c.RememberMemory: _remember,
    c.CorrectMemory: _correct,
    c.RelabelMemory: _relabel,
    c.RestoreRevision: _restore_revision,
    c.UndoChange: _undo,
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
