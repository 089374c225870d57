"""A move (seed 004: an update that changes a memory's scope). A scope is a stream of its
own, perhaps another partition's, so no one transaction of one stream can move a memory.

1. ``MoveMemory`` is decided where the memory goes: a copy of it, read from the read model
   as a promotion's sources are (``Context.copies``), at the revision its caller saw.
2. In the same Kafka transaction the writer sends ``ForgetMoved`` to the stream it came
   from (``moved_forget``): both are in the log, or neither.
3. There the memory is forgotten at that revision. Refused (it changed since, or another
   move or a forget got there first), the move is undone: the writer sends the copy's own
   ``ForgetMoved`` (``move_undone``), so that one memory holds the text, never two.

A moved memory's text lives on, so neither forget counts it as forgotten text
(``MemoryForgotten.moved_to``)."""

from __future__ import annotations

from collections.abc import Callable

from contracts import commands as c
from contracts.envelope import CommandEnvelope
from contracts.events import Event
from engram.auth import Principal
from services.command.changes import forgotten
from services.command.context import Context, Copy, copy_item_id, new_item_id
from services.command.copies import copy_into
from services.command.errors import (
    Conflict,
    Forbidden,
    Gone,
    InvalidCommand,
    NotFound,
    NotReadable,
)
from services.command.rules import check_base, check_may_forget, check_not_forgotten, find_item
from services.command.state import StreamState


def move(state: StreamState, cmd: c.MoveMemory, ctx: Context) -> list[Event]:
    """The memory's copy in this scope: refused, copying nothing, when it is not the
    caller's to move, is not active where it was, moved on from the caller's revision, or
    this scope holds its text, its key, or forgot its text."""
    _check_request(cmd, ctx)
    source = _source(cmd, ctx)
    _check_active(cmd, source, ctx)
    _check_mover(cmd, source, ctx)
    _check_revision(cmd, source)
    _check_text_unheld(state, cmd, source, ctx)
    _check_key_unheld(state, cmd, source, ctx)
    copied = copy_into(state, ctx, kinds=None, retracted=False, resave=cmd.resave_forgotten)
    if not copied:  # never a 200 with nothing moved (QA): a case the checks above missed
        raise Conflict(f"memory {cmd.item_id} cannot be copied into the {cmd.scope} scope")
    return copied


def _check_request(cmd: c.MoveMemory, ctx: Context) -> None:
    if ctx.is_agent:
        raise Forbidden("a person moves memories between scopes; an agent saves anew")
    if cmd.from_scope == cmd.scope:
        raise InvalidCommand(f"memory {cmd.item_id} is in the {cmd.scope} scope already")


def _source(cmd: c.MoveMemory, ctx: Context) -> Copy:
    """The memory where it is, as the read model holds it."""
    if not ctx.copies_ready:
        raise NotReadable(
            f"memory {cmd.item_id}'s newest revision is not readable yet (the read model "
            "trails the log): nothing was moved; try again shortly"
        )
    if not ctx.copies:
        raise NotFound(
            f"no memory {cmd.item_id} in your {cmd.from_scope} scope (from_scope)",
            item_id=cmd.item_id,
        )
    [source] = ctx.copies
    return source


def _check_active(cmd: c.MoveMemory, source: Copy, ctx: Context) -> None:
    if source.status == "forgotten":
        raise Gone(f"memory {cmd.item_id} was forgotten; it cannot be moved", item_id=cmd.item_id)
    lapsed = source.expires_at is not None and source.expires_at <= ctx.now
    if source.status != "active" or lapsed:
        state_now = "expired" if source.status == "active" else source.status
        raise Conflict(
            f"memory {cmd.item_id} is {state_now}: only an active memory moves",
            item_id=cmd.item_id,
            memory_status=state_now,
        )


def _check_mover(cmd: c.MoveMemory, source: Copy, ctx: Context) -> None:
    if cmd.from_scope == "shared" and source.author not in (None, ctx.member) and not ctx.is_admin:
        raise Forbidden(
            f"memory {cmd.item_id} is {source.author}'s: only its author or an org admin "
            "moves it out of the shared scope",
            item_id=cmd.item_id,
            author=source.author,
        )


def _check_revision(cmd: c.MoveMemory, source: Copy) -> None:
    if cmd.base_revision != source.revision:
        raise Conflict(
            f"memory {cmd.item_id} is at revision {source.revision}, not {cmd.base_revision}",
            item_id=cmd.item_id,
            current_revision=source.revision,
            base_revision=cmd.base_revision,
        )


def _check_text_unheld(state: StreamState, cmd: c.MoveMemory, source: Copy, ctx: Context) -> None:
    """Its text neither forgotten here (but to resave it) nor held by an active memory."""
    digest = ctx.content_hash(source.content)
    check_not_forgotten(state, digest, cmd.resave_forgotten, source.content)
    holder = state.holding(digest, ctx.now, ("active",))  # (QA: a candidate hid it)
    if holder is not None:
        raise Conflict(
            f"the {cmd.scope} scope holds this text already, as memory {holder.item_id}: "
            f"forget memory {cmd.item_id} instead",
            item_id=holder.item_id,
        )


def _check_key_unheld(state: StreamState, cmd: c.MoveMemory, source: Copy, ctx: Context) -> None:
    keyed = state.active_by_key(ctx.key_hash(source.key)) if source.key else None
    if keyed is not None:  # QA: a move revised (or archived) a teammate's memory by its key
        raise Conflict(
            f"memory {keyed.item_id} holds this memory's key in the {cmd.scope} scope: "
            "correct that one, or forget one of the two",
            item_id=keyed.item_id,
        )


def forget_moved(state: StreamState, cmd: c.ForgetMoved, ctx: Context) -> list[Event]:
    """The moved memory (or, undoing the move, its copy) erased at the revision copied."""
    item = find_item(state, cmd.item_id)
    check_may_forget(item, ctx)
    check_base(item, cmd.base_revision)
    reason = (
        f"the move to the {cmd.to_scope} scope undone: memory {cmd.moved_to} changed, moved "
        "or was forgotten first"
        if cmd.undo
        else f"moved to the {cmd.to_scope} scope as {cmd.moved_to}"
    )
    return [forgotten(item, reason, moved_to=cmd.moved_to)]


# How the command service names a command it sends itself: a keyed hash of its stream and
# payload (``MasterKey.issued_id``), which no caller can make.
Issue = Callable[[str, str, dict[str, object]], str]


def after_decision(
    cmd: c.Command, env: CommandEnvelope, principal: Principal, events: list[Event], issue: Issue
) -> CommandEnvelope | None:
    """What a decided command sends on: a move, the forget of the memory it moved."""
    if isinstance(cmd, c.MoveMemory) and events:
        return moved_forget(cmd, env, principal, issue)
    return None


def after_refusal(
    cmd: c.Command | None, env: CommandEnvelope, principal: Principal | None, issue: Issue
) -> CommandEnvelope | None:
    """What a refused command sends on: a move's refused forget, the move's undo (none for
    an undo, nor for a forget refused before it could be read: its token no longer
    verifies at all, and the undo's would not either)."""
    if isinstance(cmd, c.ForgetMoved) and principal is not None and not cmd.undo:
        return move_undone(cmd, env, principal, issue)
    return None


def moved_forget(
    cmd: c.MoveMemory, env: CommandEnvelope, principal: Principal, issue: Issue
) -> CommandEnvelope:
    """The forget a move sends to the stream it moved from: of the revision it copied,
    naming the copy (whose id follows from the move's), under the caller's token. The
    command service's gateway makes it too, before the move is sent, to wait for it."""
    forget = c.ForgetMoved(
        item_id=cmd.item_id,
        scope=cmd.from_scope,
        base_revision=cmd.base_revision,
        moved_to=copy_item_id(new_item_id(env.stream_id, env.command_id), cmd.item_id),
        to_scope=cmd.scope,
        follows=f"{env.stream_id} {env.command_id}",
    )
    return _sent(forget, env, principal.stream(cmd.from_scope), issue)


def move_undone(
    cmd: c.ForgetMoved, env: CommandEnvelope, principal: Principal, issue: Issue
) -> CommandEnvelope:
    """The forget of a move's copy, when the moved memory's own forget was refused."""
    undo = c.ForgetMoved(
        item_id=cmd.moved_to,
        scope=cmd.to_scope,
        base_revision=1,  # a move's copy is a memory of its own: it never revises another
        moved_to=cmd.item_id,
        to_scope=cmd.scope,
        undo=True,
        follows=f"{env.stream_id} {env.command_id}",
    )
    return _sent(undo, env, principal.stream(cmd.to_scope), issue)


def _sent(
    cmd: c.ForgetMoved, env: CommandEnvelope, stream_id: str, issue: Issue
) -> CommandEnvelope:
    payload = cmd.model_dump(mode="json", exclude_defaults=True)
    return CommandEnvelope(
        command_id=issue(stream_id, env.token, payload),
        type=c.ForgetMoved.__name__,
        token=env.token,
        stream_id=stream_id,
        payload=payload,
    )
