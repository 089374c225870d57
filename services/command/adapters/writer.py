"""The single writer of one partition: restore, decide, append exactly once.

One transactional producer per input partition (``engram-command-<p>``): a new
owner's ``init_transactions`` fences the old one and aborts its open
transaction, and the consumed offsets commit in the same transaction as the
events and replies. aiokafka has no KIP-447, hence one id per partition.

A batch holds commands read from ``engram.commands`` and commands this instance's HTTP
gateway handed over in process (``Submitted``): those have no offset to commit and get
their answer through a future once the transaction has committed, not on
``engram.replies``. If the transaction fails, their futures fail with ``NotApplied`` and
the gateway publishes them on ``engram.commands`` instead (same command id, so a command
that did commit after all gets its first answer again).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from aiokafka import ConsumerRecord, TopicPartition

from contracts import topics
from contracts.commands import Command, ForgetMoved
from contracts.envelope import Actor, CommandEnvelope, CommandReply, EventEnvelope, MadeBy
from contracts.events import SCHEMA_VERSIONS, Event, MemoryForgotten
from engram.auth import Principal, TokenVerifier
from engram.faults import is_transient
from engram.kafka import dead_letter, transactional_producer
from engram.keystore import KeyStore
from engram.logging import get_logger
from services.command.adapters.admission import authorise, context_for, repeat_reply
from services.command.adapters.batch import (
    Cleanup,
    Decoded,
    Queued,
    Submitted,
    decode,
    keys_needed,
    sealed_key_holders,
)
from services.command.adapters.lookups import BatchLookups, Lookups, command_key
from services.command.adapters.policies import OrgLimits
from services.command.adapters.restore import Restorer
from services.command.answers import (
    accepted,
    answer,
    fingerprint,
    fitted,
    poisoned,
    refused,
)
from services.command.charges import cost
from services.command.core import decide, new_item_id
from services.command.errors import DomainError, NotDecidable
from services.command.fold import evolve
from services.command.moves import after_decision, after_refusal
from services.command.origin import made_by
from services.command.state import StreamState

log = get_logger(__name__)


class PartitionWriter:
    def __init__(
        self,
        partition: int,
        bootstrap: str,
        group_id: str,
        keystore: KeyStore,
        verifier: TokenVerifier,
        restorer: Restorer,
        partitions: int,
        reply_partitions: int,
        checkpoint_every: int = 5000,
        cached_items: int = 100_000,
        lookups: BatchLookups | None = None,
    ) -> None:
        self.partition = partition
        self._lookups = lookups
        self._group_id = group_id
        self._keys = keystore
        self._verifier = verifier
        self._restorer = restorer
        self._where = (partition, partitions)  # what a command's key must hash to
        self._reply_partitions = reply_partitions
        self._producer = transactional_producer(bootstrap, f"engram-command-{partition}")
        # A cache of stream states, least recently used first. A stream not in it is
        # exactly its checkpoint row (or new): streams leave it only right after a
        # checkpoint, which saved every changed stream.
        self.states: dict[str, StreamState] = {}
        self._cached_items = cached_items
        self.dirty: set[str] = set()  # streams changed since the last checkpoint
        self.next_event_offset = 0
        self.events_since_checkpoint = 0
        self._checkpoint_every = checkpoint_every
        self._sent: list[asyncio.Future[Any]] = []
        self._answers: list[tuple[Submitted, CommandReply]] = []

    async def start(self) -> None:
        await self._producer.start()  # init_transactions: fences a zombie owner
        # Events replayed count toward the next checkpoint: a long replay is saved soon.
        restored = await self._restorer.restore(self.partition)
        self.states, self.next_event_offset = restored.states, restored.next_offset
        self.events_since_checkpoint, self.dirty = restored.replayed, restored.dirty
        await self._maybe_checkpoint()

    async def _maybe_checkpoint(self) -> None:
        """Every N events (after a commit or a long restore), save the decision state as of
        ``next_event_offset``, so the next owner replays at most N events."""
        if self.events_since_checkpoint >= self._checkpoint_every:
            await self._restorer.save(
                self.partition, self.states, self.dirty, self.next_event_offset
            )
            self.events_since_checkpoint = 0
            self.dirty = set()
            self._evict()

    def _evict(self) -> None:
        """Drop the least recently used streams (all saved) while the cache holds more
        than its budget (a stream counts its items plus one, so empty states count too);
        the most recent stream always stays."""
        held = sum(len(state.items) + 1 for state in self.states.values())
        for stream_id in list(self.states)[:-1]:
            if held <= self._cached_items:
                break
            held -= len(self.states.pop(stream_id).items) + 1

    async def _load(self, stream_ids: set[str]) -> None:
        """Bring the batch's streams into the cache, as the most recently used."""
        if missing := [s for s in stream_ids if s not in self.states]:
            loaded = await self._restorer.load(self.partition, missing)
            for stream_id in missing:
                self.states[stream_id] = loaded.get(stream_id) or StreamState(stream_id)
        for stream_id in stream_ids:
            self.states[stream_id] = self.states.pop(stream_id)

    async def stop(self) -> None:
        await self._producer.stop()

    async def process(self, batch: list[Queued]) -> Cleanup:
        """Decide a batch and commit it in one transaction; return the keys to clean up."""
        t0 = time.perf_counter()
        decoded = [decode(item) for item in batch]
        consumed = [d.record for d in decoded if d.record is not None]
        cleanup = Cleanup()
        self._sent, self._answers = [], []
        try:
            await self._load({d.envelope.stream_id for d in decoded if d.envelope is not None})
            envelopes = [d.envelope for d in decoded if d.envelope is not None]
            appended = {
                command_key(d.envelope): d.appended_at for d in decoded if d.envelope is not None
            }
            looked_up = (
                await self._lookups.gather(envelopes, self.states, appended)
                if self._lookups
                else Lookups()
            )
            keys = await self._prepare_keys(decoded, looked_up)
            t1 = time.perf_counter()
            async with self._producer.transaction():
                for d in decoded:
                    await self._handle(d, keys, looked_up, cleanup)
                t2 = time.perf_counter()
                if consumed:
                    tp = TopicPartition(topics.COMMANDS, self.partition)
                    await self._producer.send_offsets_to_transaction(
                        {tp: consumed[-1].offset + 1}, self._group_id
                    )
                t3 = time.perf_counter()
        except BaseException as exc:
            for account, caller, spent in cleanup.spent:  # nothing of the batch was charged
                account.spend(caller, -spent)
            # A fault of the moment, or a stop: the handed-over commands fail, and their
            # gateway publishes them. Any other fault is the batch's own: the worker decides
            # it again one command at a time, and each is answered then.
            if is_transient(exc) or not isinstance(exc, Exception):
                for d in decoded:
                    if d.submitted is not None:
                        d.submitted.fail(f"the batch failed: {exc!r}")
            raise
        t4 = time.perf_counter()
        for submitted, reply in self._answers:
            if not submitted.answer.done():  # its caller may have stopped waiting
                submitted.answer.set_result(reply)
        if self._sent:  # where a checkpoint taken now would resume reading
            self.next_event_offset = max(f.result().offset for f in self._sent) + 1
            self.events_since_checkpoint += len(self._sent)
        try:
            await self._maybe_checkpoint()
        except Exception:  # committed all the same: the next batch saves it (QA: a failed
            # save here read as the batch's own fault, and the batch was decided again)
            log.warning("checkpoint_failed", partition=self.partition, exc_info=True)
        for stream_id in {d.envelope.stream_id for d in decoded if d.envelope is not None}:
            state = self.states.get(stream_id)
            if state is not None and state.seq == 0 and not state.results:
                del self.states[stream_id]  # nothing decided there (all refused): not kept
        first = batch[0]
        since = first.timestamp_ms if isinstance(first, Submitted) else first.timestamp
        log.debug(
            "batch_timing",
            n=len(batch),
            handed_over=len(batch) - len(consumed),
            keys_ms=round((t1 - t0) * 1000, 1),
            decide_ms=round((t2 - t1) * 1000, 1),
            offsets_ms=round((t3 - t2) * 1000, 1),
            commit_ms=round((t4 - t3) * 1000, 1),
            queue_ms=round(time.time() * 1000 - since, 1),
        )
        return cleanup

    async def _prepare_keys(self, decoded: list[Decoded], looked_up: Lookups) -> dict[str, bytes]:
        """Fetch or create every data key the batch may seal with: one round trip, and a
        second when a save's sealed key names a memory of the stream (``sealed_key_holders``)."""
        master = self._keys.master
        keys = await self._keys.ensure(*keys_needed(decoded, self.states, looked_up, master))
        if holders := sealed_key_holders(decoded, self.states, keys, master):
            keys |= await self._keys.get_many(holders)
        return keys

    async def _handle(
        self, d: Decoded, keys: dict[str, bytes], looked_up: Lookups, cleanup: Cleanup
    ) -> None:
        if d.marker:
            return
        if d.envelope is None:
            assert d.record is not None  # only a Kafka record can be undecodable
            await self._dead_letter(d.record, d.poison or "poison")
            if d.named is not None:  # its caller waits for an answer to this id
                await self._reply(d, poisoned(*d.named, d.poison or "poison"), lettered=True)
            return
        env = d.envelope
        state = self.states.setdefault(env.stream_id, StreamState(env.stream_id))
        if (first := state.first_answer(env.command_id)) is not None:  # a repeat
            limits = looked_up.limits.get(env.stream_id.split("/", 1)[0], OrgLimits())
            reply = repeat_reply(
                self._verifier,
                d,
                state,
                keys,
                self._where,
                self._keys.master,
                first,
                memory_on=limits.memory,
            )
            await self._reply(d, reply)
            return
        own = new_item_id(env.stream_id, env.command_id)  # no item's yet: not a repeat
        cmd: Command | None = None
        principal: Principal | None = None
        try:
            principal, cmd = authorise(
                self._verifier, env, keys, d.appended_at, self._where, self._keys.master
            )
            copies = looked_up.live_copies(command_key(env), self.states)
            ctx = context_for(env, principal, cmd, keys, looked_up, self._keys.master, copies)
            events = decide(state, cmd, ctx)
        except DomainError as exc:
            await self._reply(d, refused(env, exc))
            if env.type == ForgetMoved.__name__:  # a move undone, or left whole: logged
                log.warning("move_refused", stream_id=env.stream_id, why=exc.code)
            issue = self._keys.master.issued_id  # a refusal's follow-up: in this transaction
            await self._send_command(after_refusal(cmd, env, principal, issue))
            cleanup.discard.append(own)  # its key sealed nothing that stays
            return
        except Exception as exc:  # an input no rule foresaw: this command fails, not the rest
            log.exception("command_not_decidable", command_id=env.command_id)
            if d.record is not None:
                await self._dead_letter(d.record, f"not decidable: {exc!r}")
            reply = refused(env, NotDecidable(f"{type(exc).__name__}: {exc}"))
            await self._reply(d, reply, lettered=True)
            cleanup.discard.append(own)
            return
        if ctx.account is not None and (spent := cost(events)):
            # At once, no await since the hold was checked: the next command of the org,
            # on any partition, sees what is left (given back if the batch fails).
            ctx.account.spend(ctx.caller, spent)
            cleanup.spent.append((ctx.account, ctx.caller, spent))
        actor, made = principal.actor(), made_by(cmd, ctx.is_agent)
        ids = [await self._append(state, env, actor, made, e) for e in events]
        result = answer(cmd, state, env.command_id, events, ctx)
        if not events:  # it changed nothing: a retry gets this answer, not a new decision
            state.record_answer(env.command_id, result)
            self.dirty.add(state.stream_id)
        state.record_fingerprint(env.command_id, fingerprint(cmd, self._keys.master))
        # Its follow-up, in this transaction; the answer names it (a Kafka caller waits
        # for its answer to know the move settled).
        follow = after_decision(cmd, env, principal, events, self._keys.master.issued_id)
        if follow is not None:
            result = {**result, "settled_by": follow.command_id}
        await self._reply(d, accepted(env, result, ids))
        await self._send_command(follow)
        cleanup.shred += [e.item_id for e in events if isinstance(e, MemoryForgotten)]
        cleanup.used |= {e.item_id for e in events}
        if not any(e.item_id == own for e in events):
            cleanup.discard.append(own)

    async def _append(
        self, state: StreamState, env: CommandEnvelope, actor: Actor, made: MadeBy, event: Event
    ) -> str:
        name = type(event).__name__
        envelope = EventEnvelope(
            event_id=str(uuid.uuid4()),
            type=name,
            schema_version=SCHEMA_VERSIONS[name],
            stream_id=state.stream_id,
            seq=state.seq + 1,
            command_id=env.command_id,
            occurred_at=datetime.now(UTC),
            actor=actor,
            made_by=made,
            payload=event.model_dump(mode="json"),
        )
        evolve(state, envelope.seq, env.command_id, event)
        self.dirty.add(state.stream_id)
        self._sent.append(
            await self._producer.send(
                topics.EVENTS,
                envelope.model_dump_json().encode(),
                key=state.stream_id.encode(),
                partition=self.partition,
            )
        )
        return envelope.event_id

    async def refuse(self, item: Queued, why: str) -> Cleanup:
        """Refuse, undecided, a command that broke the writer alone: a handed-over one fails
        (its gateway publishes it, and it comes back as a record); a record is dead-lettered,
        answered ``not_decidable`` when a reply can be made of it, and consumed. Returns
        its key to discard (the gateway made it; nothing kept is sealed under it)."""
        d = decode(item)
        if d.submitted is not None:
            d.submitted.fail(f"not decidable: {why}")
            return Cleanup()
        assert d.record is not None
        reply: CommandReply | None = None
        if d.envelope is not None:
            reply = refused(d.envelope, NotDecidable(why))
        elif d.named is not None:
            reply = poisoned(*d.named, why)
        if reply is not None and not self._shown_caller(d, reply.stream_id):
            reply = None  # see _reply
        try:
            value = fitted(reply) if reply is not None else None
        except Exception:  # whatever broke the writer may break its reply too
            value = None
        tp = TopicPartition(topics.COMMANDS, self.partition)
        async with self._producer.transaction():
            if not d.marker:
                await self._dead_letter(d.record, f"not decidable: {why}")
            if reply is not None and value is not None:
                await self._send_reply(reply.command_id, value)
            await self._producer.send_offsets_to_transaction(
                {tp: d.record.offset + 1}, self._group_id
            )
        env = d.envelope
        return Cleanup(discard=[new_item_id(env.stream_id, env.command_id)] if env else [])

    async def _reply(self, d: Decoded, reply: CommandReply, lettered: bool = False) -> None:
        """Answer the command: in process, or on engram.replies. A refusal of a record whose
        token shows no caller of the stream it names is dead-lettered instead (unless it
        is already, ``lettered``): any producer could otherwise put a rejection under
        another caller's command id, which that caller would take for its answer (QA)."""
        if d.submitted is not None:  # answered in process, once the transaction commits
            self._answers.append((d.submitted, reply))
            return
        if not reply.ok and not self._shown_caller(d, reply.stream_id):
            if not lettered:
                assert d.record is not None
                why = reply.rejection.detail if reply.rejection else "refused"
                await self._dead_letter(
                    d.record, f"refused, not answered (no caller of its stream signed it): {why}"
                )
            return
        await self._send_reply(reply.command_id, fitted(reply))

    def _shown_caller(self, d: Decoded, stream: str | None) -> bool:
        """Whether the record's token, its signature checked (an expired one too), is of a
        caller that may write ``stream``: who may be told that a command there failed."""
        token = d.envelope.token if d.envelope is not None else d.named_token
        holder = self._verifier.holder(token)
        if holder is None:
            return False
        return stream in {topics.stream_id(holder.org, scope) for scope in holder.scopes}

    async def _send_command(self, env: CommandEnvelope | None) -> None:
        """A command the writer sends on (``services.command.moves``), in its transaction."""
        if env is not None:
            value = env.model_dump_json().encode()
            await self._producer.send(topics.COMMANDS, value, key=env.stream_id.encode())

    async def _send_reply(self, command_id: str, value: bytes) -> None:
        # Reply readers scan every reply partition, so any one will do: ours avoids
        # hashing each command id.
        await self._producer.send(
            topics.REPLIES,
            value,
            key=command_id.encode(),
            partition=self.partition % self._reply_partitions,
        )

    async def _dead_letter(self, record: ConsumerRecord[bytes, bytes], error: str) -> None:
        topic, key, value = dead_letter(
            "command",
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            key=record.key,
            value=record.value,
            error=error,
        )
        log.warning(
            "command_dead_lettered",
            partition=record.partition,
            offset=record.offset,
            error=error[:300],
        )
        await self._producer.send(topic, value, key=key)
