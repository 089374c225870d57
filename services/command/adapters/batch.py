"""What a writer's batch is made of: commands read from ``engram.commands`` or handed over
in process by this instance's HTTP gateway, decoded; the data keys they may seal with;
and what is left to clean up once the batch has committed."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeAlias, TypeGuard

from aiokafka import ConsumerRecord
from pydantic import ValidationError

from contracts import topics
from contracts.envelope import (
    COMMAND_ID_LENGTH,
    STREAM_ID_LENGTH,
    CommandEnvelope,
    CommandReply,
)
from engram.billing import Account
from engram.crypto import KeyMissingError, MasterKey, open_payload, sealed_key_ids
from services.command.adapters.lookups import Lookups, command_key, ids_in
from services.command.answers import json_errors
from services.command.context import Copy, copy_item_id, new_item_id
from services.command.state import Proposal, StreamState


@dataclass
class Cleanup:
    """After commit: keys of forgotten items to shred, unused command keys to discard
    (never one an event of the batch used: the same command id may come twice)."""

    shred: list[str] = field(default_factory=list)
    discard: list[str] = field(default_factory=list)
    used: set[str] = field(default_factory=set)
    # What the batch spent from its orgs' accounts (seed 004), given back if it fails.
    spent: list[tuple[Account, str, int]] = field(default_factory=list)

    def unused(self) -> list[str]:
        return [k for k in self.discard if k not in self.used]


class NotApplied(Exception):
    """A command handed over in process was not decided, or its transaction failed."""


@dataclass
class Submitted:
    """A command this instance's HTTP gateway handed over in process."""

    envelope: CommandEnvelope
    answer: asyncio.Future[CommandReply]
    timestamp_ms: float = field(default_factory=lambda: time.time() * 1000)

    def fail(self, reason: str) -> None:
        if not self.answer.done():
            self.answer.set_exception(NotApplied(reason))


Record: TypeAlias = "ConsumerRecord[bytes, bytes]"
Queued: TypeAlias = "Record | Submitted"


@dataclass
class Decoded:
    record: Record | None
    envelope: CommandEnvelope | None = None
    poison: str | None = None
    submitted: Submitted | None = None
    marker: bool = False  # the pruner's roll marker: committed with the batch, nothing else
    # A poison envelope's (command_id, stream_id), when it names them: its caller waits
    # for an answer to that id, and gets a rejection besides the dead letter.
    named: tuple[str, str] | None = None
    named_token: str | None = None  # and the token it carries, if any (who may be told)

    @property
    def appended_at(self) -> float | None:
        """When the broker appended the command (epoch seconds), the time its token must
        hold at; None (now) for a command handed over in process, or one whose timestamp
        its producer set."""
        record = self.record
        if record is None or record.timestamp_type != topics.LOG_APPEND_TIME:
            return None
        return record.timestamp / 1000


def decode(item: Queued) -> Decoded:
    """A queued command as the writer takes it: handed over, a roll marker, a command
    envelope, or poison (with why)."""
    if isinstance(item, Submitted):
        return Decoded(None, envelope=item.envelope, submitted=item)
    record = item
    if topics.is_roll_marker(record.headers, record.value):
        return Decoded(record, marker=True)
    try:
        return Decoded(record, envelope=CommandEnvelope.model_validate_json(record.value or b""))
    except ValidationError as exc:
        why = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'record'}: {e['msg']}"
            for e in json_errors(exc)  # bounded: the reason goes into a reply
        )
        named, token = _named(record)
        return Decoded(
            record, poison=f"undecodable command envelope: {why}", named=named, named_token=token
        )
    except Exception as exc:  # whatever a record holds, it stops no partition: poison
        return Decoded(record, poison=f"undecodable command envelope: {exc!r}"[:1000])


def _named(record: Record) -> tuple[tuple[str, str] | None, str | None]:
    """The command id and stream a poison envelope names, if it is JSON that does, and the
    token it carries, if it is text."""
    try:
        body = json.loads(record.value or b"")
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python reads
        return None, None
    if not isinstance(body, dict):
        return None, None
    command_id, stream_id, token = body.get("command_id"), body.get("stream_id"), body.get("token")
    token = token if isinstance(token, str) else None
    if _answerable(command_id, COMMAND_ID_LENGTH[1]) and _answerable(stream_id, STREAM_ID_LENGTH):
        return (command_id, stream_id), token
    return None, token


def _answerable(value: object, longest: int) -> TypeGuard[str]:
    """Text a reply can carry: within its field's bound, and UTF-8 (QA: a lone surrogate,
    which JSON allows and pydantic refuses, made the poison's reply fail to encode and
    aborted the transaction for good; a 600 KB id made a reply the broker refused)."""
    if not isinstance(value, str) or len(value) > longest:
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def keys_needed(
    decoded: list[Decoded],
    states: Mapping[str, StreamState],
    looked_up: Lookups,
    master: MasterKey,
) -> tuple[list[tuple[str, str]], set[str]]:
    """The data keys a batch may seal with: ``(item_id, org)`` of each it may create (a
    new item's, a copy's), and the ids of the existing ones it may need."""
    new: list[tuple[str, str]] = []
    existing: set[str] = set()
    for d in decoded:
        if (env := d.envelope) is None:
            continue
        org = env.stream_id.split("/", 1)[0]
        # A key for every copy read, whatever its status then: the live one decides (QA:
        # one read retracted, enabled earlier in the batch, was copied without a key). A
        # key a decision leaves unused is discarded.
        copies = looked_up.copies.get(command_key(env), ())
        _add_new(new, env, org, copies)
        _add_existing(existing, env, states.get(env.stream_id), org, copies, master)
    return new, existing


def _add_new(
    new: list[tuple[str, str]], env: CommandEnvelope, org: str, copies: tuple[Copy, ...]
) -> None:
    """The items a command may create: its own (a save's, a correction's) and its copies."""
    own = new_item_id(env.stream_id, env.command_id)
    if env.type in ("RememberMemory", "CorrectMemory"):
        new.append((own, org))
    new.extend([(copy_item_id(own, s.item_id), org) for s in copies])


def _add_existing(
    existing: set[str],
    env: CommandEnvelope,
    state: StreamState | None,
    org: str,
    copies: tuple[Copy, ...],
    master: MasterKey,
) -> None:
    """The stored memories whose data keys a command may need: those it names, those its
    copies revise, its proposal's, and the one holding a save's key."""
    if state and copies:  # a key the stream holds takes the copy as a revision
        existing.update(_revised_by_copies(state, copies, org, master))
    existing.update(ids_in(env.payload.get("item_id")))
    # A rejection's reason is sealed under the key of the memory its proposal is on.
    if (proposal := _proposal_of(state, env.payload.get("proposal_id"))) is not None:
        existing.add(proposal.item_id)
    key = env.payload.get("key") if env.type == "RememberMemory" else None
    # A confirmed save with a known key revises that item, under its key.
    if state and (holder := _holder_of(state, key, master)):
        existing.add(holder)
    existing.update(ids_in(list(sealed_key_ids(env.payload))))


def _revised_by_copies(
    state: StreamState, copies: tuple[Copy, ...], org: str, master: MasterKey
) -> set[str]:
    return {
        i.item_id
        for s in copies
        if s.key and (i := state.active_by_key(master.key_hash(org, s.key)))
    }


def _proposal_of(state: StreamState | None, pid: object) -> Proposal | None:
    if state and state.proposals and isinstance(pid, str):
        return state.proposals.get(pid.strip())
    return None


def sealed_key_holders(
    decoded: list[Decoded],
    states: Mapping[str, StreamState],
    keys: dict[str, bytes],
    master: MasterKey,
) -> set[str]:
    """The memories whose data keys a batch also needs, beyond ``keys_needed``'s: those that
    hold the key a save names sealed (the HTTP gateway seals a key it publishes on Kafka),
    which only the save's own data key opens. A key that does not open is left to the
    admission, which refuses its command."""
    holders: set[str] = set()
    for d in decoded:
        env = d.envelope
        sealed = env.payload.get("key") if env and env.type == "RememberMemory" else None
        if env is None or not isinstance(sealed, dict):
            continue
        if (state := states.get(env.stream_id)) is None:
            continue
        try:
            key = open_payload({"key": sealed}, keys)["key"]
        except (KeyMissingError, ValueError):  # pydantic's ValidationError is a ValueError
            continue
        if holder := _holder_of(state, key, master):
            holders.add(holder)
    return holders - set(keys)


def _holder_of(state: StreamState, key: object, master: MasterKey) -> str | None:
    """The memory of the stream that holds a save's key as sent (stripped, as the command
    model strips it), if the key is text and one does."""
    if not isinstance(key, str):
        return None
    org = state.stream_id.split("/", 1)[0]
    holder = state.active_by_key(master.key_hash(org, key.strip()))
    return holder.item_id if holder else None
