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
import contextlib
import time
from datetime import UTC, datetime
from typing import Any

from aiokafka import TopicPartition

from contracts import topics
from contracts.commands import Command, ForgetMoved
from contracts.envelope import Actor, CommandEnvelope, CommandReply, MadeBy, event_json
from contracts.events import SCHEMA_VERSIONS, Event, MemoryForgotten
from engram.auth import Principal, TokenVerifier
from engram.faults import is_transient
from engram.ids import random_id
from engram.kafka import PartitionBatches, transactional_producer
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
from services.command.adapters.outbox import Outbox
from services.command.adapters.policies import OrgLimits
from services.command.adapters.restore import Restorer
from services.command.adapters.streams import StreamCache
from services.command.answers import accepted, answer, fingerprint, poisoned, refused
from services.command.charges import cost
from services.command.context import Context
from services.command.core import decide, new_item_id
from services.command.errors import DomainError, NotDecidable
from services.command.fold import evolve
from services.command.moves import after_decision, after_refusal
from services.command.origin import made_by
from services.command.state import StreamState

log = get_logger(__name__)
CHECKPOINT_WRITE_WAIT_SECONDS = 10.0


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
        self._where = (partition, partitions)  # what a command's key must hash to
        producer = transactional_producer(bootstrap, f"engram-command-{partition}")
        self._out = Outbox(producer, verifier, partition, reply_partitions)
        self.streams = StreamCache(partition, restorer, checkpoint_every, cached_items)
        self._events = PartitionBatches(producer, topics.EVENTS, partition)

    async def start(self) -> None:
        await self._out.producer.start()  # init_transactions: fences a zombie owner
        await self.streams.restore()

    async def stop(self) -> None:
        # The checkpoint being written, if any, is finished first (bounded: a database that
        # does not answer must not hold up a revocation; the next owner replays more).
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.streams.written(), CHECKPOINT_WRITE_WAIT_SECONDS)
        await self._out.producer.stop()

    async def process(self, batch: list[Queued]) -> Cleanup:
        """Decide a batch and commit it in one transaction; return the keys to clean up."""
        t0 = time.perf_counter()
        decoded = [decode(item) for item in batch]
        consumed = [d.record for d in decoded if d.record is not None]
        cleanup = Cleanup()
        self._out.begin()
        self._events = PartitionBatches(self._out.producer, topics.EVENTS, self.partition)
        try:
            looked_up = await self._look_up(decoded)
            keys = await self._prepare_keys(decoded, looked_up)
            t1 = time.perf_counter()
            async with self._out.producer.transaction():
                for d in decoded:
                    await self._handle(d, keys, looked_up, cleanup)
                await self._events.flush()
                await self._out.flush()
                t2 = time.perf_counter()
                if consumed:
                    tp = TopicPartition(topics.COMMANDS, self.partition)
                    await self._out.producer.send_offsets_to_transaction(
                        {tp: consumed[-1].offset + 1}, self._group_id
                    )
                t3 = time.perf_counter()
        except BaseException as exc:
            self._failed(decoded, cleanup, exc)
            raise
        t4 = time.perf_counter()
        await self._committed(decoded)
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

    async def _look_up(self, decoded: list[Decoded]) -> Lookups:
        """Bring the batch's streams into the cache, then read what its commands need from
        outside their streams."""
        await self.streams.load({d.envelope.stream_id for d in decoded if d.envelope is not None})
        if not self._lookups:
            return Lookups()
        envelopes = [d.envelope for d in decoded if d.envelope is not None]
        appended = {
            command_key(d.envelope): d.appended_at for d in decoded if d.envelope is not None
        }
        return await self._lookups.gather(envelopes, self.streams.states, appended)

    def _failed(self, decoded: list[Decoded], cleanup: Cleanup, exc: BaseException) -> None:
        for account, caller, spent in cleanup.spent:  # nothing of the batch was charged
            account.spend(caller, -spent)
        # A fault of the moment, or a stop: the handed-over commands fail, and their
        # gateway publishes them. Any other fault is the batch's own: the worker decides
        # it again one command at a time, and each is answered then.
        if is_transient(exc) or not isinstance(exc, Exception):
            for d in decoded:
                if d.submitted is not None:
                    d.submitted.fail(f"the batch failed: {exc!r}")

    async def _committed(self, decoded: list[Decoded]) -> None:
        self._out.deliver()
        if (last := self._events.last_offset()) is not None:
            self.streams.committed(last, self._events.records)
        try:
            await self.streams.maybe_checkpoint()
        except Exception:  # committed all the same: the next batch saves it (QA: a failed
            # save here read as the batch's own fault, and the batch was decided again)
            log.warning("checkpoint_failed", partition=self.partition, exc_info=True)
        self.streams.drop_undecided(
            {d.envelope.stream_id for d in decoded if d.envelope is not None}
        )

    async def _prepare_keys(self, decoded: list[Decoded], looked_up: Lookups) -> dict[str, bytes]:
        """Fetch or create every data key the batch may seal with: one round trip, and a
        second when a save's sealed key names a memory of the stream (``sealed_key_holders``)."""
        master = self._keys.master
        keys = await self._keys.ensure(
            *keys_needed(decoded, self.streams.states, looked_up, master)
        )
        if holders := sealed_key_holders(decoded, self.streams.states, keys, master):
            keys |= await self._keys.get_many(holders)
        return keys

    async def _handle(
        self, d: Decoded, keys: dict[str, bytes], looked_up: Lookups, cleanup: Cleanup
    ) -> None:
        if d.marker:
            return
        if d.envelope is None:
            assert d.record is not None  # only a Kafka record can be undecodable
            await self._out.dead_letter(d.record, d.poison or "poison")
            if d.named is not None:  # its caller waits for an answer to this id
                await self._out.reply(d, poisoned(*d.named, d.poison or "poison"), lettered=True)
            return
        state = self.streams.states.setdefault(
            d.envelope.stream_id, StreamState(d.envelope.stream_id)
        )
        if (first := state.first_answer(d.envelope.command_id)) is not None:  # a repeat
            await self._out.reply(d, self._repeat(d, state, keys, looked_up, first))
            return
        await self._decide(d, d.envelope, state, keys, looked_up, cleanup)

    def _repeat(
        self,
        d: Decoded,
        state: StreamState,
        keys: dict[str, bytes],
        looked_up: Lookups,
        first: Any,
    ) -> CommandReply:
        assert d.envelope is not None
        limits = looked_up.limits.get(d.envelope.stream_id.split("/", 1)[0], OrgLimits())
        return repeat_reply(
            self._verifier,
            d,
            state,
            keys,
            self._where,
            self._keys.master,
            first,
            memory_on=limits.memory,
        )

    async def _decide(
        self,
        d: Decoded,
        env: CommandEnvelope,
        state: StreamState,
        keys: dict[str, bytes],
        looked_up: Lookups,
        cleanup: Cleanup,
    ) -> None:
        own = new_item_id(env.stream_id, env.command_id)  # no item's yet: not a repeat
        cmd: Command | None = None
        principal: Principal | None = None
        try:
            principal, cmd = authorise(
                self._verifier, env, keys, d.appended_at, self._where, self._keys.master
            )
            copies = looked_up.live_copies(command_key(env), self.streams.states)
            ctx = context_for(env, principal, cmd, keys, looked_up, self._keys.master, copies)
            events = decide(state, cmd, ctx)
        except DomainError as exc:
            await self._out.reply(d, refused(env, exc))
            if env.type == ForgetMoved.__name__:  # a move undone, or left whole: logged
                log.warning("move_refused", stream_id=env.stream_id, why=exc.code)
            issue = self._keys.master.issued_id  # a refusal's follow-up: in this transaction
            await self._out.send_command(after_refusal(cmd, env, principal, issue))
            cleanup.discard.append(own)  # its key sealed nothing that stays
            return
        except Exception as exc:  # an input no rule foresaw: this command fails, not the rest
            log.exception("command_not_decidable", command_id=env.command_id)
            if d.record is not None:
                await self._out.dead_letter(d.record, f"not decidable: {exc!r}")
            reply = refused(env, NotDecidable(f"{type(exc).__name__}: {exc}"))
            await self._out.reply(d, reply, lettered=True)
            cleanup.discard.append(own)
            return
        await self._apply(d, env, state, principal, cmd, ctx, events, cleanup)
        if not any(e.item_id == own for e in events):
            cleanup.discard.append(own)

    async def _apply(
        self,
        d: Decoded,
        env: CommandEnvelope,
        state: StreamState,
        principal: Principal,
        cmd: Command,
        ctx: Context,
        events: list[Event],
        cleanup: Cleanup,
    ) -> None:
        """Append a decided command's events, answer it, and send its follow-up."""
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
            self.streams.dirty.add(state.stream_id)
        state.record_fingerprint(env.command_id, fingerprint(cmd, self._keys.master))
        # Its follow-up, in this transaction; the answer names it (a Kafka caller waits
        # for its answer to know the move settled).
        follow = after_decision(cmd, env, principal, events, self._keys.master.issued_id)
        if follow is not None:
            result = {**result, "settled_by": follow.command_id}
        await self._out.reply(d, accepted(env, result, ids))
        await self._out.send_command(follow)
        cleanup.shred += [e.item_id for e in events if isinstance(e, MemoryForgotten)]
        cleanup.used |= {e.item_id for e in events}

    async def _append(
        self, state: StreamState, env: CommandEnvelope, actor: Actor, made: MadeBy, event: Event
    ) -> str:
        name = type(event).__name__
        event_id, seq = random_id(), state.seq + 1
        value = event_json(
            event_id=event_id,
            type=name,
            schema_version=SCHEMA_VERSIONS[name],
            stream_id=state.stream_id,
            seq=seq,
            command_id=env.command_id,
            occurred_at=datetime.now(UTC),
            actor=actor,
            made_by=made,
            payload=event,
        )
        evolve(state, seq, env.command_id, event)
        self.streams.dirty.add(state.stream_id)
        await self._events.append(state.stream_id.encode(), value)
        return event_id

    async def refuse(self, item: Queued, why: str) -> Cleanup:
        """Refuse, undecided, a command that broke the writer alone (``Outbox.refuse``)."""
        return await self._out.refuse(decode(item), why, self._group_id)
