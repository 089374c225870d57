"""How an HTTP caller's command reaches its writer, and its answer comes back.

When this instance writes the command's partition, the command is handed over in
process: no trip through Kafka before the writer's own transaction, and the text never
touches a Kafka log in plain or sealed form (the events carry it sealed, as always).
Otherwise (another instance writes it, or the hand-over failed before the command was
decided) the text is sealed, the command published to ``engram.commands``, and its answer
awaited on ``engram.replies``: this instance reads every reply partition from the end
(no consumer group) and hands each reply to the future waiting for it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaTimeoutError
from pydantic import ValidationError

from contracts import topics
from contracts.envelope import CommandEnvelope, CommandReply
from engram.kafka import broker_answers, consumer, partition_count, stopped_on_failure
from engram.logging import get_logger
from services.command.adapters.batch import NotApplied

log = get_logger(__name__)

HandOver = Callable[[CommandEnvelope], "asyncio.Future[CommandReply] | None"]
Seal = Callable[[CommandEnvelope], Awaitable[CommandEnvelope]]


class ReplyTimeout(Exception):
    """No reply in time; the command may still be applied (retry with the same id)."""


class CommandGateway:
    def __init__(self, bootstrap: str, hand_over: HandOver | None = None) -> None:
        self._bootstrap = bootstrap
        self._hand_over = hand_over
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, linger_ms=0, enable_idempotence=True
        )
        self._consumer = consumer(bootstrap)
        # By command id, then stream: a command id is the caller's, and the same one may
        # be in flight in two scopes (each answered for its own).
        self._waiting: dict[str, dict[str, asyncio.Future[CommandReply]]] = {}
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """A start that fails stops what it had started (the producer, when the consumer or
        the replies topic fails), before the error goes on."""
        async with stopped_on_failure(self.stop, "command_gateway"):
            await self._producer.start()
            await self._consumer.start()
            await self._read_replies_from_the_end()
        self._task = asyncio.create_task(self._listen(), name="reply-listener")

    async def _read_replies_from_the_end(self) -> None:
        parts = range(await partition_count(self._bootstrap, topics.REPLIES))
        tps = [TopicPartition(topics.REPLIES, p) for p in parts]
        self._consumer.assign(tps)
        await self._consumer.seek_to_end(*tps)
        for tp in tps:  # resolve the end positions now, before any command is sent
            await self._consumer.position(tp)

    async def stop(self) -> None:
        """Safe on a gateway that did not start, or only partly (aiokafka's stop is)."""
        if self._task:
            self._task.cancel()
        try:
            await self._consumer.stop()
        finally:  # a consumer that fails to stop leaves no producer open
            await self._producer.stop()

    async def broker_answers(self) -> bool:
        return await broker_answers(self._consumer)

    @property
    def healthy(self) -> bool:
        return self._task is not None and not self._task.done()

    async def send(self, envelope: CommandEnvelope, timeout: float, seal: Seal) -> CommandReply:
        """The command's answer. ``envelope`` carries the text in plain; ``seal`` seals it
        for the trip through Kafka, when there is one."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        answer = self._hand_over(envelope) if self._hand_over else None
        if answer is not None:
            try:
                return await asyncio.wait_for(answer, timeout)
            except TimeoutError as exc:
                raise ReplyTimeout(envelope.command_id) from exc
            except NotApplied as exc:  # not decided: the topic's next owner will
                log.info("hand_over_failed", command_id=envelope.command_id, reason=str(exc))
        # One deadline for sealing, publishing and the answer: the producer's delivery
        # alone may take its 40 s request timeout while the broker is away (chaos QA: a
        # command answered after 36 s, where the reply timeout is 15).
        try:
            async with asyncio.timeout_at(deadline):
                return await self._publish(await seal(envelope))
        except (TimeoutError, KafkaTimeoutError) as exc:
            raise ReplyTimeout(envelope.command_id) from exc

    @contextlib.contextmanager
    def expecting(
        self, commands: list[CommandEnvelope]
    ) -> Iterator[list[asyncio.Future[CommandReply]]]:
        """Futures for the answers to commands the writer will send itself (a move's
        forget), registered before the command they follow is sent, so that no answer
        comes before its waiter."""
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in commands]
        for env, future in zip(commands, futures, strict=True):
            self._waiting.setdefault(env.command_id, {})[env.stream_id] = future
        try:
            yield futures
        finally:
            for env in commands:
                waiting = self._waiting.get(env.command_id, {})
                waiting.pop(env.stream_id, None)
                if not waiting:
                    self._waiting.pop(env.command_id, None)

    async def _publish(self, envelope: CommandEnvelope) -> CommandReply:
        future: asyncio.Future[CommandReply] = asyncio.get_running_loop().create_future()
        waiting = self._waiting.setdefault(envelope.command_id, {})
        waiting[envelope.stream_id] = future
        try:
            await self._producer.send_and_wait(
                topics.COMMANDS,
                envelope.model_dump_json().encode(),
                key=envelope.stream_id.encode(),
            )
            return await future
        finally:
            waiting.pop(envelope.stream_id, None)
            if not waiting:
                self._waiting.pop(envelope.command_id, None)

    async def _listen(self) -> None:
        while True:
            batches = await self._consumer.getmany(timeout_ms=500)
            for records in batches.values():
                for record in records:
                    key = (record.key or b"").decode(errors="replace")  # anyone may write here
                    if (waiting := self._waiting.get(key)) is None:
                        continue
                    try:
                        reply = CommandReply.model_validate_json(record.value or b"")
                    except ValidationError as exc:  # not the writer's: its waiter waits on
                        log.warning(
                            "reply_undecodable",
                            partition=record.partition,
                            offset=record.offset,
                            error=str(exc)[:300],
                        )
                        continue
                    future = waiting.get(reply.stream_id)
                    if future is not None and not future.done():
                        future.set_result(reply)
