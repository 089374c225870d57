"""What a command must pass before the writer decides it (and a repeat before it is
answered), and what ``decide`` is given.

A command's token must hold when the broker appended the command (now, for one handed
over in process); its payload is opened (text the gateway sealed) and validated; its
stream must be the token's scope, keyed to this partition. Each failure is a typed
``DomainError``, answered like any rejection.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from contracts import topics
from contracts.commands import COMMANDS, Command, ForgetMoved, MoveMemory
from contracts.envelope import CommandEnvelope, CommandReply
from engram.auth import AuthError, Principal, ScopeError, TokenVerifier
from engram.billing import principal_caller
from engram.crypto import (
    KeyMissingError,
    MasterKey,
    open_payload,
    open_sealed,
    seal,
    sealed_key_ids,
)
from services.command.adapters.batch import Decoded
from services.command.adapters.lookups import Lookups, command_key
from services.command.adapters.policies import OrgLimits
from services.command.answers import fingerprint, json_errors, refused, repeated
from services.command.context import Context, Copy, new_item_id
from services.command.errors import (
    DomainError,
    Forbidden,
    Gone,
    InvalidCommand,
    MemoryOff,
    Unauthenticated,
)
from services.command.state import StreamState


def issued_at(env: CommandEnvelope, master: MasterKey, appended_at: float | None) -> float | None:
    """The time a command's token must hold at: the broker's append time, or, for one the
    command service sent itself (a move's forget, ``services.command.moves``), none: its
    token is the mover's, which may expire before the forget is decided (QA: a move just
    before its token expired left the memory in both scopes). Only the command service
    can make such a command's id; any other command of the type is refused."""
    if env.type != ForgetMoved.__name__:
        return appended_at
    if env.command_id != master.issued_id(env.stream_id, env.token, env.payload):
        raise Forbidden("ForgetMoved is the command service's own (a move's forget)")
    return float("-inf")


def caller(verifier: TokenVerifier, env: CommandEnvelope, appended_at: float | None) -> Principal:
    """The token's principal, when its stream is one of the token's scopes: what even a
    repeated command must show before it is answered."""
    try:
        principal = verifier.verify(env.token, at=appended_at)
    except AuthError as exc:
        raise Unauthenticated(str(exc)) from exc
    org, _, scope = env.stream_id.partition("/")
    if org != principal.org or scope not in principal.scopes:
        raise Forbidden(f"stream_id {env.stream_id!r} is not one of the token's scopes")
    return principal


def authorise(
    verifier: TokenVerifier,
    env: CommandEnvelope,
    keys: dict[str, bytes],
    appended_at: float | None,
    partition: tuple[int, int],
    master: MasterKey,
) -> tuple[Principal, Command]:
    """The command's principal and its validated command; ``partition``: (this writer's
    partition, the partition count)."""
    principal = caller(verifier, env, issued_at(env, master, appended_at))
    cmd = _opened(env, keys)
    _check_stream(env, principal, cmd)
    _check_partition(env, partition)
    return principal, cmd


def _model(env: CommandEnvelope) -> type[Command]:
    model = COMMANDS.get(env.type)
    if model is None:
        raise InvalidCommand(f"unknown command type {env.type!r}", known=sorted(COMMANDS))
    if sealed_key_ids(env.payload) - {new_item_id(env.stream_id, env.command_id)}:
        # The gateway seals a command's text under the command's own key only: text sealed
        # under another (copied from a log, another org's) is not this command's to open.
        raise Forbidden("the command's sealed text is under a key that is not its own")
    return model


def _opened(env: CommandEnvelope, keys: dict[str, bytes]) -> Command:
    """The payload, its sealed text opened, as its type's command."""
    model = _model(env)
    try:
        return model.model_validate(open_payload(env.payload, keys))
    except KeyMissingError as exc:
        raise Gone("the command's text was sealed under a key that is now shredded") from exc
    except ValidationError as exc:
        raise InvalidCommand("the command is invalid", errors=json_errors(exc)) from exc
    except ValueError as exc:  # sealed text that does not open (bad nonce, tampered)
        raise InvalidCommand(f"the command's sealed text cannot be opened: {exc}") from exc


def _check_stream(env: CommandEnvelope, principal: Principal, cmd: Command) -> None:
    try:
        expected = principal.stream(cmd.scope)
        if isinstance(cmd, MoveMemory):  # where it is must be the caller's too (QA: a 404)
            principal.scope(cmd.from_scope)
        if isinstance(cmd, ForgetMoved):
            principal.scope(cmd.to_scope)
    except ScopeError as exc:
        raise Forbidden(str(exc)) from exc
    if expected != env.stream_id:
        raise Forbidden(f"stream_id {env.stream_id!r} is not the token's {cmd.scope} scope")


def _check_partition(env: CommandEnvelope, partition: tuple[int, int]) -> None:
    mine, count = partition
    if topics.partition_for(env.stream_id, count) != mine:
        raise InvalidCommand("the command was not keyed by its stream_id")


def context_for(
    env: CommandEnvelope,
    principal: Principal,
    cmd: Command,
    keys: dict[str, bytes],
    looked_up: Lookups,
    master: MasterKey,
    copies: tuple[Copy, ...] = (),
) -> Context:
    """What ``decide`` gets besides the state: the caller, the time, ids, sealing, and what
    the batch looked up outside the stream (``copies``: a promotion's or a fork's sources
    still active, ``Lookups.live_copies``)."""
    limits = looked_up.limits.get(principal.org, OrgLimits())
    return Context(
        scope=principal.scope(cmd.scope),
        is_agent=principal.is_agent,
        now=datetime.now(UTC),
        new_item_id=lambda: new_item_id(env.stream_id, env.command_id),
        seal=_sealer(keys),
        open=lambda sealed: open_sealed(sealed, keys[sealed.key_id]),
        content_hash=lambda text: master.content_hash(principal.org, text),
        key_hash=lambda key: master.key_hash(principal.org, key),
        source_hash=lambda source: master.source_hash(principal.org, source),
        is_admin="admin" in principal.roles,
        targets=_visible_targets(looked_up, principal),
        forgotten_targets=_forgotten_targets(looked_up, principal),
        member=principal.member,
        keep_revisions=limits.keep_revisions,
        max_candidates_per_run=limits.max_candidates_per_run,
        max_memories_per_scope=limits.max_memories_per_scope,
        memory=limits.memory,
        apply_learning=limits.learning == "apply",
        account=limits.account,
        caller=principal_caller(principal) if limits.account is not None else "",
        copies=copies,
        fork_of=principal.fork_of,
        session=principal.session,
        copies_ready=command_key(env) not in looked_up.unready,
    )


def _sealer(keys: dict[str, bytes]) -> Callable[[str, str], Any]:
    def seal_for(item_id: str, text: str) -> Any:
        return seal(item_id, keys[item_id], text)

    return seal_for


def _visible_targets(looked_up: Lookups, principal: Principal) -> frozenset[str]:
    return frozenset(i for i, t in looked_up.targets.items() if t.visible_to(principal))


def _forgotten_targets(looked_up: Lookups, principal: Principal) -> frozenset[str]:
    return frozenset(i for i, t in looked_up.targets.items() if t.forgotten_for(principal))


def repeat_reply(
    verifier: TokenVerifier,
    d: Decoded,
    state: StreamState,
    keys: dict[str, bytes],
    partition: tuple[int, int],
    master: MasterKey,
    first: dict[str, Any],
    memory_on: bool = True,
) -> CommandReply:
    """A repeat's reply: its first answer, for its own caller only, unless it is another
    request under the used id (as far as the stream knows: a command decided after the
    last checkpoint is known after a restore by its answer only), or an agent's while its
    org's memory is off (``memory_on``: QA, it read the memory's state then)."""
    env = d.envelope
    assert env is not None
    refusal = _repeat_refusal(verifier, env, d.appended_at, state, master, first, memory_on)
    if refusal is not None:
        return refused(env, refusal)
    if env.once:  # the id names one act: its first answer, whatever the repeat carries
        return repeated(env, first, same=True)
    return _repeat_compared(verifier, env, d.appended_at, state, keys, partition, master, first)


def _repeat_refusal(
    verifier: TokenVerifier,
    env: CommandEnvelope,
    appended_at: float | None,
    state: StreamState,
    master: MasterKey,
    first: dict[str, Any],
    memory_on: bool,
) -> DomainError | None:
    """Why a repeat is refused whatever it carries: its caller, memory off for an agent,
    or the memory it made gone."""
    try:
        principal = caller(verifier, env, issued_at(env, master, appended_at))
    except DomainError as exc:
        return exc
    if principal.is_agent and not memory_on:
        return MemoryOff("memory is off for this org (its policy's memory)")
    return _made_gone(env, state, first)


def _made_gone(env: CommandEnvelope, state: StreamState, first: dict[str, Any]) -> Gone | None:
    own = state.items.get(new_item_id(env.stream_id, env.command_id))
    if own is not None and own.status == "forgotten":
        return _own_gone(env, own.item_id)
    moved = env.type == MoveMemory.__name__
    copy = state.items.get(str(first.get("item_id"))) if moved else None
    if copy is not None and copy.status == "forgotten":  # as a save's (QA: it said active)
        return Gone(
            "this move's copy is gone: the move was undone, or the copy since moved on or forgotten"
        )
    return None


def _own_gone(env: CommandEnvelope, item_id: str) -> Gone:
    # Not its first answer, which named the memory as it was: the gateway, which cannot
    # seal a retry under the shredded key, answers so too (QA: the paths differed).
    if env.once:  # an id that names the act: there is no new one to send (QA)
        return Gone(
            f"this was done once already, as memory {item_id}, "
            "since forgotten or moved: it is not done again"
        )
    return Gone("this command id belongs to a forgotten memory; send a new one")


def _repeat_compared(
    verifier: TokenVerifier,
    env: CommandEnvelope,
    appended_at: float | None,
    state: StreamState,
    keys: dict[str, bytes],
    partition: tuple[int, int],
    master: MasterKey,
    first: dict[str, Any],
) -> CommandReply:
    """Its first answer when the repeat is the request first decided, else its refusal."""
    try:
        _, cmd = authorise(verifier, env, keys, appended_at, partition, master)
    except Gone:  # its text sealed under the command's own key, shredded once decided
        return repeated(env, first, same=True)  # (the gateway's record sent again)
    except DomainError as exc:
        # Not the request first decided, which was valid: refused as it is (QA: an empty
        # content, or a forget of another type, got the first save's answer, ok).
        return refused(env, exc)
    known = state.fingerprint_of(env.command_id)
    return repeated(env, first, same=known is None or fingerprint(cmd, master) == known)
