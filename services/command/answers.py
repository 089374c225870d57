"""What the writer answers a command with (pure): its reply, accepted or refused; the
changed item's state, a clear's or a forget's receipt, a promotion's or a fork's copies;
and a validation error's details as a caller reads them."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from contracts.commands import ClearMemories, Command, ForgetMemory, ForkSession, PromoteSession
from contracts.envelope import CommandEnvelope, CommandReply
from contracts.events import Event, MemoryForgotten, MemoryStatusChanged, RevisionsPruned
from engram.crypto import SENSITIVE_FIELDS, MasterKey
from services.command.context import Context, copy_item_id
from services.command.errors import DomainError, IdempotencyKeyReused, InvalidCommand
from services.command.state import StreamState


def accepted(
    env: CommandEnvelope, result: dict[str, Any], events: list[str] | None = None
) -> CommandReply:
    """A decided command's reply (a repeat's too: its first answer, marked duplicate)."""
    return CommandReply(
        command_id=env.command_id,
        ok=True,
        stream_id=env.stream_id,
        result=result,
        events=events or [],
    )


def fingerprint(cmd: Command, master: MasterKey) -> bytes:
    """A keyed digest of the command as decided (its text unsealed): equal for a true
    repeat, and no hash of the text a checkpoint reader could test guesses against."""
    return master.digest(cmd.model_dump_json().encode())


def repeated(env: CommandEnvelope, first: dict[str, Any], same: bool) -> CommandReply:
    """A repeat's reply: its first answer, or, when ``same`` is False (another request
    under the used id), a refusal that names the first one's item."""
    if same:
        again = dict(first)
        erased = again.pop("erased", None)
        again.update(stream_id=env.stream_id, duplicate=True)
        return accepted(env, _with_receipt(again, env.type, erased))
    return refused(
        env,
        IdempotencyKeyReused(
            f"command id {env.command_id!r} was used for another request in this scope "
            f"(it answered for memory {first.get('item_id')}): send this request with a "
            "new Idempotency-Key",
            first_item_id=first.get("item_id"),
        ),
    )


def poisoned(command_id: str, stream_id: str, why: str) -> CommandReply:
    """The answer to an envelope that names its command but is invalid (it is also
    dead-lettered): the reason, without the record's text."""
    return CommandReply(
        command_id=command_id,
        ok=False,
        stream_id=stream_id,
        rejection=InvalidCommand(
            f"{why[:MAX_WHY_SHOWN]} (the record is on engram.dlq.command)"
        ).rejection(),
    )


# A reply on engram.replies stays well under the broker's 1 MiB a record: a refusal whose
# details would pass this is sent without them, and an answer with lists longer than fit
# (a clear's receipt names every memory it erased, its events are as many: QA, a clear of
# 12,000 memories made a reply the broker refused, and the partition retried it for good)
# keeps their first entries and says how many there were.
MAX_REPLY_BYTES = 256 * 1024
_LISTS_KEPT = (1_000, 100, 10)


def fitted(reply: CommandReply) -> bytes:
    """The reply's JSON as the reply topic takes it: whole, or trimmed."""
    value = reply.model_dump_json().encode()
    if len(value) <= MAX_REPLY_BYTES:
        return value
    if reply.rejection is not None:
        r = reply.rejection
        note = f"{r.detail[:MAX_WHY_SHOWN]} (its details, {len(value)} bytes, were left out)"
        trimmed = r.model_copy(update={"detail": note, "extra": {}})
        return reply.model_copy(update={"rejection": trimmed}).model_dump_json().encode()
    for kept in _LISTS_KEPT:
        value = _with_lists_cut(reply, kept).model_dump_json().encode()
        if len(value) <= MAX_REPLY_BYTES:
            break
    return value


def _with_lists_cut(reply: CommandReply, kept: int) -> CommandReply:
    """The answer with its receipt's ``erased``, its ``copied`` and its ``events`` cut to
    their first ``kept``, each with its whole count (``erased_total``, ``copied_total``,
    ``events_total``) when it was longer."""
    result = dict(reply.result)
    receipt = result.get("receipt")
    if isinstance(receipt, dict) and len(erased := receipt.get("erased") or []) > kept:
        result["receipt"] = {**receipt, "erased": erased[:kept], "erased_total": len(erased)}
    if isinstance(copied := result.get("copied"), list) and len(copied) > kept:
        result.update(copied=copied[:kept], copied_total=len(copied))
    if len(reply.events) > kept:
        result["events_total"] = len(reply.events)
    return reply.model_copy(update={"result": result, "events": reply.events[:kept]})


def refused(env: CommandEnvelope, exc: DomainError) -> CommandReply:
    """A typed rejection. It may travel on engram.replies, a plain Kafka log: the caller's
    text stays out of it (the HTTP gateway gives it back to its own caller)."""
    extra = {k: v for k, v in exc.extra.items() if k not in SENSITIVE_FIELDS}
    return CommandReply(
        command_id=env.command_id,
        ok=False,
        stream_id=env.stream_id,
        rejection=exc.rejection().model_copy(update={"extra": extra}),
    )


def answer(
    cmd: Command, state: StreamState, command_id: str, events: list[Event], ctx: Context
) -> dict[str, Any]:
    """The result of a decided command: the stream's version and generation, with the
    state of the item it changed; a promotion's or a fork's, each item it wrote; a clear's
    (or any forget's) receipt, not the last item it forgot."""
    result = _changed(cmd, state, command_id, events, ctx)
    result.pop("erased", None)  # named whole in the receipt, from the events
    result.update(stream_id=state.stream_id, generation=state.generation, seq=state.seq)
    forgotten = [
        {"item_id": e.item_id, "revisions": e.revisions}
        for e in events
        if isinstance(e, MemoryForgotten)
    ]
    return _with_receipt(result, type(cmd).__name__, forgotten or None)


# The commands whose answer is a receipt of what they forgot; a clear's names no memory of
# its own (its state after its last forget is no answer to it).
_RECEIPTED = frozenset({ForgetMemory.__name__, ClearMemories.__name__})


def _with_receipt(
    result: dict[str, Any], command_type: str, erased: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """An answer, first or repeated, with the receipt its forgets call for."""
    if command_type == ClearMemories.__name__:
        for name in ("item_id", "revision", "status"):
            result.pop(name, None)
    if erased is not None or command_type in _RECEIPTED:
        result["receipt"] = forget_receipt(erased or [])
    return result


def _changed(
    cmd: Command, state: StreamState, command_id: str, events: list[Event], ctx: Context
) -> dict[str, Any]:
    if isinstance(cmd, PromoteSession | ForkSession):  # not the memories they archived
        written = dict.fromkeys(
            e.item_id for e in events if not isinstance(e, MemoryStatusChanged | RevisionsPruned)
        )
        # The state keeps a key's hash only: each copy's key is its source's, and each
        # copied key's holder now took the key of the copy that revised it.
        base = ctx.new_item_id()
        keys = {copy_item_id(base, c.item_id): c.key for c in ctx.copies if c.key is not None}
        keys |= {
            holder.item_id: c.key
            for c in ctx.copies
            if c.key is not None and (holder := state.active_by_key(ctx.key_hash(c.key)))
        }
        return {
            "copied": [
                {"item_id": i, "revision": state.items[i].revision, "key": keys.get(i)}
                for i in written
            ]
        }
    if not events and (item := state.items.get(getattr(cmd, "item_id", ""))) is not None:
        return {"item_id": item.item_id, "revision": item.revision, "status": item.status}
    return dict(state.results.get(command_id, {}))


def forget_receipt(erased: list[dict[str, Any]]) -> dict[str, Any]:
    """What a forget erased (``{"item_id", "revisions"}`` each), where, and what stays."""
    return {
        "erased": list(erased),
        "where": [
            "keystore: the item's data key is deleted, so every sealed copy in engram.events "
            "(its text, key, tags and sources) is unreadable (crypto-shredding)",
            "read models: text, key, tags and sources removed from the item, every revision, "
            "every proposal on it and every embedding; its links removed",
            "engram.commands: a command that carried the text in plain (a Kafka caller's) is "
            "deleted from the broker's disk within minutes of being decided, as every decided "
            "command is",
            "engram.conversations: a conversation turn it was proposed from is deleted from "
            "the broker's disk within minutes of being handled, as every handled turn is",
        ],
        "kept": "a content-free tombstone and keyed hashes of the text, the key and the "
        "sources; copies a promotion or a fork made of it are memories of their own scope, "
        "forgotten on their own",
    }


# A validation error lists at most this many errors, each field name cut to this length:
# a rejection must fit the reply topic's records (QA: 32,000 unknown fields made a reply of
# 1.2 MB, which the broker refused, and the partition retried it for good).
MAX_ERRORS_LISTED = 20
MAX_NAME_SHOWN = 100
MAX_WHY_SHOWN = 2_000


def json_errors(exc: ValidationError) -> list[dict[str, Any]]:
    errors = exc.errors()
    listed = [
        {"loc": [shown(part) for part in e["loc"]], "msg": e["msg"], "type": e["type"]}
        for e in errors[:MAX_ERRORS_LISTED]
    ]
    if len(errors) > MAX_ERRORS_LISTED:
        more = len(errors) - MAX_ERRORS_LISTED
        listed.append({"loc": [], "msg": f"and {more} more errors", "type": "more_errors"})
    return listed


def shown(part: int | str) -> int | str:
    """A field name or index as an error names it: a long name cut short."""
    if isinstance(part, str) and len(part) > MAX_NAME_SHOWN:
        return part[:MAX_NAME_SHOWN] + "..."
    return part
