"""Promotion and fork (seed 002), and a move (seed 004): another stream's memories copied
into this one.

The writer reads the source's active memories from the read model (another stream may be
another partition's) once the projector holds what the log held when the command came,
and passes them in (``Context.copies``; ``copies_ready`` is False when the projector did
not catch up in time, and the command is refused, copying nothing); each copy is sealed under
its own new key like any saved text. A key this stream holds already takes the source's
text as a new revision; text it holds, or forgot, is not copied again, so promoting twice
copies nothing the second time. A promotion copies the session's active memories; a fork
its disabled ones too, disabled (seed 002: learned memory is part of the session's history,
so a fork takes a copy of it, and a retracted fact stays retracted). A move copies one
memory of the caller's, at the revision it saw; its forget where it was follows (the writer
sends it in the move's transaction, ``moved_forget``)."""

from __future__ import annotations

import uuid
from collections.abc import Collection

from contracts import commands as c
from contracts.envelope import CommandEnvelope
from contracts.events import Event, MemoryRemembered, MemoryStatusChanged
from services.command.context import Context, Copy, copy_item_id
from services.command.errors import Conflict, Forbidden, InvalidCommand, NotFound, NotReadable
from services.command.rules import (
    MAX_LABELS,
    check_not_forgotten,
    expired,
    holder_revised,
    labelled,
    revises_holder,
    superseded_by,
)
from services.command.state import StreamState

MOVES = uuid.UUID("5d0f3c2e-7b1a-4c59-9a8e-2f6d4b1c0e73")  # a move's forget's id namespace


def promote(state: StreamState, cmd: c.PromoteSession, ctx: Context) -> list[Event]:
    if ctx.session is None:
        raise Forbidden(
            "a promotion copies the token's session into its agent: this token names no session"
        )
    return _copy_into(state, ctx, kinds=cmd.kinds, retracted=False)


def fork(state: StreamState, cmd: c.ForkSession, ctx: Context) -> list[Event]:
    if ctx.fork_of is None:
        raise InvalidCommand("this token's session forks no session (its fork_of claim)")
    if ctx.scope == f"session:{ctx.fork_of}":
        raise InvalidCommand("this token's session forks itself (its fork_of claim names it)")
    if state.seq:
        raise Forbidden(
            f"{state.stream_id} has a history already: a fork copies into a new session"
        )
    return _copy_into(state, ctx, kinds=None, retracted=True)


def move(state: StreamState, cmd: c.MoveMemory, ctx: Context) -> list[Event]:
    """The memory's copy in this scope: refused, copying nothing, when it is not the
    caller's to move, is not active where it was, moved on from the caller's revision, or
    this scope holds or forgot its text."""
    if ctx.is_agent:
        raise Forbidden("a person moves memories between scopes; an agent saves anew")
    if cmd.from_scope == cmd.scope:
        raise InvalidCommand(f"memory {cmd.item_id} is in the {cmd.scope} scope already")
    if not ctx.copies_ready:
        raise NotReadable(
            f"memory {cmd.item_id}'s newest revision is not readable yet (the read model "
            "trails the log): nothing was moved; try again shortly"
        )
    if not ctx.copies:
        raise NotFound(
            f"no active memory {cmd.item_id} in your {cmd.from_scope} scope (from_scope)",
            item_id=cmd.item_id,
        )
    [source] = ctx.copies
    if source.disabled:
        raise Conflict(f"memory {cmd.item_id} is disabled: enable it to move it")
    if cmd.from_scope == "shared" and source.author not in (None, ctx.member) and not ctx.is_admin:
        raise Forbidden(
            f"memory {cmd.item_id} is {source.author}'s: only its author or an org admin "
            "moves it out of the shared scope",
            item_id=cmd.item_id,
            author=source.author,
        )
    if cmd.base_revision != source.revision:
        raise Conflict(
            f"memory {cmd.item_id} is at revision {source.revision}, not {cmd.base_revision}",
            item_id=cmd.item_id,
            current_revision=source.revision,
            base_revision=cmd.base_revision,
        )
    digest = ctx.content_hash(source.content)
    check_not_forgotten(state, digest, cmd.resave_forgotten, source.content)
    holder = state.holding(digest, ctx.now)
    if holder is not None and holder.status == "active":
        raise Conflict(
            f"the {cmd.scope} scope holds this text already, as memory {holder.item_id}: "
            f"forget memory {cmd.item_id} instead",
            item_id=holder.item_id,
        )
    return _copy_into(state, ctx, kinds=None, retracted=False, resave=cmd.resave_forgotten)


def moved_forget(
    cmd: c.Command, env: CommandEnvelope, source_stream: str, events: list[Event]
) -> CommandEnvelope | None:
    """The forget a move sends to the stream it moved from, in its own transaction: of the
    revision it copied, naming the copy, under the caller's token and an id of its own
    derived from the move's (None for any other command, or a move that copied nothing)."""
    if not isinstance(cmd, c.MoveMemory) or not events:
        return None
    copy = events[-1].item_id
    return CommandEnvelope(
        command_id=str(uuid.uuid5(MOVES, f"{env.stream_id}\x1f{env.command_id}")),
        type=c.ForgetMemory.__name__,
        token=env.token,
        stream_id=source_stream,
        payload={
            "item_id": cmd.item_id,
            "scope": cmd.from_scope,
            "base_revision": cmd.base_revision,
            "moved_to": copy,
            "reason": f"moved to the {cmd.scope} scope as {copy}",
        },
    )


def _copy_into(
    state: StreamState,
    ctx: Context,
    kinds: Collection[str] | None,
    retracted: bool,
    resave: bool = False,
) -> list[Event]:
    if not ctx.copies_ready:
        raise NotReadable(
            "the source session's newest memories are not readable yet (the read model "
            "trails the log): nothing was copied; try again shortly"
        )
    # The active ones first: a key's active fact wins over a retracted one of the key.
    copies = sorted((s for s in ctx.copies if retracted or not s.disabled), key=_is_disabled)
    if len(copies) > c.MAX_COPIES:
        raise InvalidCommand(f"the source holds more than {c.MAX_COPIES} memories to copy")
    held = {  # an expired memory holds its text no longer: a lasting copy takes its place
        item.current.content_hash
        for item in state.items.values()
        if item.status == "active" and item.revisions and not expired(item, ctx.now)
    }
    events: list[Event] = []
    keys_done: set[str] = set()
    base_id = ctx.new_item_id()  # the command's own: each copy's id derives from it
    for source in copies:
        digest = ctx.content_hash(source.content)
        if (kinds is not None and source.kind not in kinds) or digest in held:
            continue
        if digest in state.forgotten_hashes and not resave:  # never brings forgotten text back
            continue
        if ctx.is_agent and state.retracts(
            ctx.key_hash(source.key) if source.key else None, digest
        ):
            continue  # a person brings a retracted fact back (seed 002; QA: a promotion did)
        if source.key in keys_done:
            continue  # one key holds one fact: the source's first (newest) wins
        if source.key:
            keys_done.add(source.key)
        held.add(digest)
        same_key = state.active_by_key(ctx.key_hash(source.key)) if source.key else None
        if same_key is not None and revises_holder(
            same_key, source.kind, source.expires_at, ctx.now
        ):  # as a keyed save does (core._remember)
            events += holder_revised(
                same_key,
                ctx,
                content=source.content,
                title=source.title,
                digest=digest,
                key=source.key,
                tags=source.tags,
                sources=_copy_sources(source),
                pinned=source.pinned,
            )
            continue
        copy_id = copy_item_id(base_id, source.item_id)
        if same_key is not None:  # another kind or lifetime: a memory of its own takes the key
            events.append(superseded_by(same_key, copy_id))
        events.append(_copied(source, copy_id, digest, ctx))
        if source.disabled:  # only into a new session: no key or text of it is held here
            events.append(
                MemoryStatusChanged(
                    item_id=copy_id, revision=2, status="disabled", previous="active"
                )
            )
    return events


def _is_disabled(source: Copy) -> bool:
    return source.disabled


def _copied(source: Copy, item_id: str, digest: str, ctx: Context) -> MemoryRemembered:
    return MemoryRemembered(
        item_id=item_id,
        scope=ctx.scope,
        kind=source.kind,
        status="active",
        content=ctx.seal(item_id, source.content),
        title=ctx.seal(item_id, source.title) if source.title else None,
        pinned=source.pinned,
        **labelled(item_id, ctx, source.key, source.tags, _copy_sources(source)),
        content_hash=digest,
        content_length=len(source.content),
        expires_at=source.expires_at,
        author=ctx.member,
    )


def _copy_sources(source: Copy) -> tuple[str, ...]:
    """A copy's sources: the memory it copies, then the newest of that memory's own."""
    return (source.item_id, *source.sources[-(MAX_LABELS - 1) :])
