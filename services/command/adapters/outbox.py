"""What a partition's writer sends in its transaction besides events: the answers (in
process, or on ``engram.replies``), the commands it sends on, and dead letters."""

from __future__ import annotations

from typing import Any

from aiokafka import ConsumerRecord, TopicPartition

from contracts import topics
from contracts.envelope import CommandEnvelope, CommandReply
from engram.auth import TokenVerifier
from engram.kafka import PartitionBatches, letter_of
from engram.logging import get_logger
from services.command.adapters.batch import Cleanup, Decoded, Submitted
from services.command.answers import fitted, poisoned, refused
from services.command.core import new_item_id
from services.command.errors import NotDecidable

log = get_logger(__name__)


class Outbox:
    def __init__(
        self, producer: Any, verifier: TokenVerifier, partition: int, reply_partitions: int
    ) -> None:
        self.producer = producer  # the writer's transactional producer
        self._verifier = verifier
        self._consumed = TopicPartition(topics.COMMANDS, partition)
        # Reply readers scan every reply partition, so any one will do: the writer's own
        # avoids hashing each command id.
        self._reply_partition = partition % reply_partitions
        self.answers: list[tuple[Submitted, CommandReply]] = []  # handed over, this batch
        self.begin()

    def begin(self) -> None:
        """A new transaction: nothing answered yet, no reply sent."""
        self.answers = []
        self._replies = PartitionBatches(self.producer, topics.REPLIES, self._reply_partition)

    async def flush(self) -> None:
        """Hand the transaction's replies to the producer (before its offsets and commit)."""
        await self._replies.flush()

    def deliver(self) -> None:
        """Answer the handed-over commands, once their transaction has committed."""
        for submitted, reply in self.answers:
            if not submitted.answer.done():  # its caller may have stopped waiting
                submitted.answer.set_result(reply)

    async def reply(self, d: Decoded, reply: CommandReply, lettered: bool = False) -> None:
        """Answer the command: in process, or on engram.replies. A refusal of a record whose
        token shows no caller of the stream it names is dead-lettered instead (unless it
        is already, ``lettered``): any producer could otherwise put a rejection under
        another caller's command id, which that caller would take for its answer (QA)."""
        if d.submitted is not None:  # answered in process, once the transaction commits
            self.answers.append((d.submitted, reply))
            return
        if not reply.ok and not self.shown_caller(d, reply.stream_id):
            if not lettered:
                assert d.record is not None
                why = reply.rejection.detail if reply.rejection else "refused"
                await self.dead_letter(
                    d.record, f"refused, not answered (no caller of its stream signed it): {why}"
                )
            return
        await self.send_reply(reply.command_id, fitted(reply))

    async def refuse(self, d: Decoded, why: str, group_id: str) -> Cleanup:
        """Refuse, undecided, a command that broke the writer alone: a handed-over one fails
        (its gateway publishes it, and it comes back as a record); a record is dead-lettered,
        answered ``not_decidable`` when a reply can be made of it, and consumed, in a
        transaction of its own. Returns its key to discard (the gateway made it; nothing
        kept is sealed under it)."""
        if d.submitted is not None:
            d.submitted.fail(f"not decidable: {why}")
            return Cleanup()
        assert d.record is not None
        reply: CommandReply | None = None
        if d.envelope is not None:
            reply = refused(d.envelope, NotDecidable(why))
        elif d.named is not None:
            reply = poisoned(*d.named, why)
        if reply is not None and not self.shown_caller(d, reply.stream_id):
            reply = None  # see reply()
        try:
            value = fitted(reply) if reply is not None else None
        except Exception:  # whatever broke the writer may break its reply too
            value = None
        async with self.producer.transaction():
            if not d.marker:
                await self.dead_letter(d.record, f"not decidable: {why}")
            if reply is not None and value is not None:
                self.begin()  # a transaction of its own (the batch's was aborted)
                await self.send_reply(reply.command_id, value)
                await self.flush()
            await self.producer.send_offsets_to_transaction(
                {self._consumed: d.record.offset + 1}, group_id
            )
        env = d.envelope
        return Cleanup(discard=[new_item_id(env.stream_id, env.command_id)] if env else [])

    def shown_caller(self, d: Decoded, stream: str | None) -> bool:
        """Whether the record's token, its signature checked (an expired one too), is of a
        caller that may write ``stream``: who may be told that a command there failed."""
        token = d.envelope.token if d.envelope is not None else d.named_token
        holder = self._verifier.holder(token)
        if holder is None:
            return False
        return stream in {topics.stream_id(holder.org, scope) for scope in holder.scopes}

    async def send_command(self, env: CommandEnvelope | None) -> None:
        """A command the writer sends on (``services.command.moves``), in its transaction."""
        if env is not None:
            value = env.model_dump_json().encode()
            await self.producer.send(topics.COMMANDS, value, key=env.stream_id.encode())

    async def send_reply(self, command_id: str, value: bytes) -> None:
        """A reply, sent with the transaction's others at its ``flush``."""
        await self._replies.append(command_id.encode(), value)

    async def dead_letter(self, record: ConsumerRecord[bytes, bytes], error: str) -> None:
        topic, key, value = letter_of("command", record, error)
        log.warning(
            "command_dead_lettered",
            partition=record.partition,
            offset=record.offset,
            error=error[:300],
        )
        await self.producer.send(topic, value, key=key)
