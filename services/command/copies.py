"""Promotion and fork (seed 002): another stream's memories copied into this one (a move's
copy, ``moves``, too).

The writer reads the source's active memories from the read model (another stream may be
another partition's) once the projector holds what the log held when the command came,
and passes them in (``Context.copies``; ``copies_ready`` is False when the projector did
not catch up in time, and the command is refused, copying nothing); each copy is sealed under
its own new key like any saved text. A key this stream holds already takes the source's
text as a new revision; text it holds, or forgot, is not copied again, so promoting twice
copies nothing the second time. A promotion copies the session's active memories; a fork
its disabled ones too, disabled (seed 002: learned memory is part of the session's history,
so a fork takes a copy of it, and a retracted fact stays retracted)."""

from __future__ import annotations

from collections.abc import Collection

from contracts import commands as c
from contracts.events import Event, MemoryRemembered, MemoryStatusChanged
from services.command.changes import expired, holder_revised, revises_holder, superseded_by
from services.command.context import Context, Copy, copy_item_id
from services.command.errors import Forbidden, InvalidCommand, NotReadable
from services.command.labels import MAX_LABELS, labelled
from services.command.state import Item, StreamState


def promote(state: StreamState, cmd: c.PromoteSession, ctx: Context) -> list[Event]:
    if ctx.session is None:
        raise Forbidden(
            "a promotion copies the token's session into its agent: this token names no session"
        )
    return copy_into(state, ctx, kinds=cmd.kinds, retracted=False, inferences=True)


def fork(state: StreamState, cmd: c.ForkSession, ctx: Context) -> list[Event]:
    if ctx.fork_of is None:
        raise InvalidCommand("this token's session forks no session (its fork_of claim)")
    if ctx.scope == f"session:{ctx.fork_of}":
        raise InvalidCommand("this token's session forks itself (its fork_of claim names it)")
    if state.seq:
        raise Forbidden(
            f"{state.stream_id} has a history already: a fork copies into a new session"
        )
    return copy_into(state, ctx, kinds=None, retracted=True, inferences=True)


def copy_into(
    state: StreamState,
    ctx: Context,
    kinds: Collection[str] | None,
    retracted: bool,
    resave: bool = False,
    inferences: bool = False,
) -> list[Event]:
    """``inferences``: an inferred source is copied as an inference, and never over a
    confirmed fact of its key (a promotion's, a fork's; a move is a person's act, and
    confirms what it moves)."""
    copies = _sources(ctx, retracted)
    held = _held(state, ctx)
    events: list[Event] = []
    keys_done: set[str] = set()
    base_id = ctx.new_item_id()  # the command's own: each copy's id derives from it
    for source in copies:
        digest = ctx.content_hash(source.content)
        passed_over = _passed_over(state, ctx, source, digest, kinds, held, resave)
        if passed_over or _key_done(source, keys_done):
            continue
        inferred = inferences and source.inferred
        same_key = state.active_by_key(ctx.key_hash(source.key)) if source.key else None
        if inferred and same_key is not None and same_key.confirmed:
            continue  # an inference never replaces a confirmed fact (QA: a promotion did)
        held.add(digest)
        _add_copy(events, ctx, source, digest, same_key, base_id, inferred)
    return events


def _sources(ctx: Context, retracted: bool) -> list[Copy]:
    if not ctx.copies_ready:
        raise NotReadable(
            "the source session's newest memories are not readable yet (the read model "
            "trails the log): nothing was copied; try again shortly"
        )
    # The active ones first: a key's active fact wins over a retracted one of the key.
    copies = sorted((s for s in ctx.copies if retracted or not s.retracted), key=_is_retracted)
    if len(copies) > c.MAX_COPIES:
        raise InvalidCommand(f"the source holds more than {c.MAX_COPIES} memories to copy")
    return copies


def _held(state: StreamState, ctx: Context) -> set[str]:
    return {  # an expired memory holds its text no longer: a lasting copy takes its place
        item.current.content_hash
        for item in state.items.values()
        if item.status == "active" and item.revisions and not expired(item, ctx.now)
    }


def _passed_over(
    state: StreamState,
    ctx: Context,
    source: Copy,
    digest: str,
    kinds: Collection[str] | None,
    held: set[str],
    resave: bool,
) -> bool:
    """A source not copied: not of the kinds asked for, its text held or forgotten here,
    or, for an agent, a retracted fact."""
    if (kinds is not None and source.kind not in kinds) or digest in held:
        return True
    if digest in state.forgotten_hashes and not resave:  # never brings forgotten text back
        return True
    # A person brings a retracted fact back (seed 002; QA: a promotion did).
    return ctx.is_agent and state.retracts(ctx.key_hash(source.key) if source.key else None, digest)


def _key_done(source: Copy, keys_done: set[str]) -> bool:
    """Whether a copy took the source's key already, else the key is taken now."""
    if source.key in keys_done and not source.retracted:
        return True  # one key holds one fact: the source's first (newest) wins
    if source.key and not source.retracted:  # (a retracted fact holds no key: QA, a
        keys_done.add(source.key)  # fork left one out, and an agent brought it back)
    return False


def _add_copy(
    events: list[Event],
    ctx: Context,
    source: Copy,
    digest: str,
    same_key: Item | None,
    base_id: str,
    inferred: bool,
) -> None:
    """The source's copy appended to ``events``: a revision of the key's memory, as a
    keyed save makes (``texts.remember``), or a memory of its own."""
    if same_key is not None and revises_holder(same_key, source.kind, source.expires_at, ctx.now):
        events.extend(_holder_revised(same_key, source, digest, ctx, inferred))
        return
    copy_id = copy_item_id(base_id, source.item_id)
    if same_key is not None:  # another kind or lifetime: a memory of its own takes the key
        events.append(superseded_by(same_key, copy_id))
    events.append(_copied(source, copy_id, digest, ctx, inferred))
    if source.retracted:  # only into a new session: no key or text of it is held here
        events.extend(_retracted(copy_id, source.status))


def _holder_revised(
    holder: Item, source: Copy, digest: str, ctx: Context, inferred: bool
) -> list[Event]:
    return holder_revised(
        holder,
        ctx,
        content=source.content,
        title=source.title,
        digest=digest,
        key=source.key,
        tags=source.tags,
        sources=_copy_sources(source),
        pinned=source.pinned,
        inferred=inferred,
    )


def _retracted(item_id: str, status: str) -> list[Event]:
    """A fork's copy of a retracted fact made as it is: disabled, and archived since."""
    events: list[Event] = [
        MemoryStatusChanged(item_id=item_id, revision=2, status="disabled", previous="active")
    ]
    if status == "archived":
        events.append(
            MemoryStatusChanged(item_id=item_id, revision=3, status="archived", previous="disabled")
        )
    return events


def _is_retracted(source: Copy) -> bool:
    return source.retracted


def _copied(
    source: Copy, item_id: str, digest: str, ctx: Context, inferred: bool = False
) -> MemoryRemembered:
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
        inferred=inferred,
    )


def _copy_sources(source: Copy) -> tuple[str, ...]:
    """A copy's sources: the memory it copies, then the newest of that memory's own."""
    return (source.item_id, *source.sources[-(MAX_LABELS - 1) :])
