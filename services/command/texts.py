"""What a save or a correction decides (seeds 000 and 002): a confirmed fact, an
inference the org's learning applies, or a candidate a person confirms (the revisions an
undo or a restore brings back are ``reverts``'s). Pure, as ``core`` is."""

from __future__ import annotations

from contracts import commands as c
from contracts.events import Event, MemoryRemembered, MemoryRevised, MemoryStatusChanged
from services.command.changes import holder_revised, new_revision, revises_holder, superseded_by
from services.command.confirm import user_asked_to_save
from services.command.context import Context
from services.command.errors import Forbidden
from services.command.labels import inherited, labelled
from services.command.links import related
from services.command.reverts import restore_revision as restore_revision  # core imports it here
from services.command.reverts import undo as undo  # core imports it here
from services.command.rules import (
    check_base,
    check_not_forgotten,
    check_not_held,
    check_owner,
    check_run_cap,
    find_item,
)
from services.command.state import Item, StreamState


def inferences_kept(state: StreamState, events: list[Event]) -> list[Event]:
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


def remember(state: StreamState, cmd: c.RememberMemory, ctx: Context) -> list[Event]:
    digest = ctx.content_hash(cmd.content)
    check_not_forgotten(state, digest, cmd.resave_forgotten, cmd.content)
    key_hash = ctx.key_hash(cmd.key) if cmd.key else None
    inferred = _applied(state, cmd, ctx, key_hash, digest)
    confirmed = inferred or _confirms(state, cmd, ctx, key_hash, digest)
    if inferred or not confirmed:  # learned again, or proposed again: not twice
        check_not_held(state, digest, ctx)
    existing = state.active_by_key(key_hash) if key_hash else None
    if existing and confirmed:  # one key holds one fact: a confirmed save replaces it
        check_owner(existing, ctx, asked=True)
        if revises_holder(existing, cmd.kind, cmd.expires_at, ctx.now):
            return _holder_saved(state, cmd, ctx, existing, digest, inferred)
    return _saved_anew(state, cmd, ctx, digest, existing, confirmed, inferred)


def _confirms(
    state: StreamState, cmd: c.RememberMemory, ctx: Context, key_hash: str | None, digest: str
) -> bool:
    """A save is a fact unless it is sent as a candidate, or is an agent's its user did
    not ask for."""
    return not cmd.candidate and (
        not ctx.is_agent or _agent_confirms(state, cmd, ctx, key_hash, digest)
    )


def _holder_saved(
    state: StreamState,
    cmd: c.RememberMemory,
    ctx: Context,
    holder: Item,
    digest: str,
    inferred: bool,
) -> list[Event]:
    """The key's memory revised by the save, with the links it asks for."""
    revised = holder_revised(
        holder,
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
    links = related(state, holder.item_id, holder.links, cmd.related_ids, ctx)
    return [*revised, *links]


def _saved_anew(
    state: StreamState,
    cmd: c.RememberMemory,
    ctx: Context,
    digest: str,
    existing: Item | None,
    confirmed: bool,
    inferred: bool,
) -> list[Event]:
    """The save as a memory of its own: a fact, or a candidate within its run's cap."""
    if not confirmed:
        check_run_cap(state, cmd.run_id, ctx)
    item_id = ctx.new_item_id()
    links = related(state, item_id, None, cmd.related_ids, ctx)
    # A fact of another kind or lifetime is a memory of its own, which the key's memory is
    # archived for (superseded by it); the command's answer is the new memory's, its last.
    superseded = [superseded_by(existing, item_id)] if existing and confirmed else []
    saved = _remembered(cmd, ctx, item_id, digest, existing, confirmed, inferred)
    return [*superseded, saved, *links]


def _remembered(
    cmd: c.RememberMemory,
    ctx: Context,
    item_id: str,
    digest: str,
    existing: Item | None,
    confirmed: bool,
    inferred: bool,
) -> MemoryRemembered:
    return MemoryRemembered(
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
    )


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
    state: StreamState,
    cmd: c.RememberMemory | c.CorrectMemory,
    ctx: Context,
    key_hash: str | None,
    digest: str,
) -> bool:
    """An agent's save is a fact when the user's message asked for it (seed 000), unless
    its key's fact, or its very text, is retracted: that is a person's to bring back (seed
    002; a seed audit and QA: an agent's save made it active again). Its correction too,
    with no key: nor is another memory corrected to a retracted text (QA)."""
    asked = user_asked_to_save(cmd.user_message, cmd.content, shared=ctx.scope == "shared")
    return asked and not state.retracts(key_hash, digest)


def correct(state: StreamState, cmd: c.CorrectMemory, ctx: Context) -> list[Event]:
    item = find_item(state, cmd.item_id)
    check_base(item, cmd.base_revision, cmd.content)
    _check_not_retracted(item, ctx)
    digest = ctx.content_hash(cmd.content)
    check_not_forgotten(state, digest, cmd.resave_forgotten, cmd.content)
    confirmed = not ctx.is_agent or _agent_confirms(state, cmd, ctx, None, digest)
    inference = not item.confirmed and item.status != "candidate"
    if (item.confirmed or inference) and not _rewrites(state, ctx, digest, confirmed, inference):
        return _proposed(state, cmd, ctx, item, digest)
    return _corrected(state, cmd, ctx, item, digest, confirmed, inference)


def _check_not_retracted(item: Item, ctx: Context) -> None:
    if ctx.is_agent and item.retracted:  # QA: it rewrote the text a person had retracted
        raise Forbidden(
            f"memory {item.item_id} is retracted: a person changes it or brings it back",
            item_id=item.item_id,
        )


def _rewrites(
    state: StreamState, ctx: Context, digest: str, confirmed: bool, inference: bool
) -> bool:
    """Whether the correction rewrites the memory. An inferred fact (seed 002's learned
    memory) is rewritten unasked, as the extractor's consolidation does, only while the
    org applies learning, and never to a retracted text (QA: an agent brought one back so)."""
    return confirmed or (inference and ctx.apply_learning and not state.retracts(None, digest))


def _proposed(
    state: StreamState, cmd: c.CorrectMemory, ctx: Context, item: Item, digest: str
) -> list[Event]:
    """An inference never replaces a confirmed fact: it waits as a candidate, unless the
    scope holds its text already (QA: an agent's correction to the fact's own text, or to
    a candidate's, went round already_held)."""
    check_not_held(state, digest, ctx)
    check_run_cap(state, cmd.run_id, ctx)
    new_id = ctx.new_item_id()
    candidate = _candidate(cmd, ctx, item, new_id, digest)
    return [candidate, *related(state, new_id, None, cmd.related_ids, ctx)]


def _candidate(
    cmd: c.CorrectMemory, ctx: Context, item: Item, new_id: str, digest: str
) -> MemoryRemembered:
    return MemoryRemembered(
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
    )


def _corrected(
    state: StreamState,
    cmd: c.CorrectMemory,
    ctx: Context,
    item: Item,
    digest: str,
    confirmed: bool,
    inference: bool,
) -> list[Event]:
    """The memory's new revision, by its owner (an agent's, asked for)."""
    check_owner(item, ctx, asked=confirmed)
    if item.status == "candidate" or not confirmed:  # it stays one, or an inference: not
        # as a copy of text the scope holds
        check_not_held(state, digest, ctx, own=item.item_id)
    # An agent's unasked correction of an inference is one too (seed 002's consolidation).
    inferred = inference and not confirmed
    revised = new_revision(
        item, cmd.content, cmd.title, ctx, "corrected", digest=digest, inferred=inferred
    )
    return [revised, *related(state, item.item_id, item.links, cmd.related_ids, ctx)]
