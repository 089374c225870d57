"""How the HTTP gateway routes a command: handed over in process when this instance
writes its partition, else (or when the hand-over failed before a decision) sealed and
published on engram.commands. The Kafka trip itself is stubbed here; the e2e tests run
both paths against the real broker."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from aiokafka.errors import KafkaTimeoutError

from contracts.envelope import CommandEnvelope, CommandReply
from services.command.adapters.batch import NotApplied
from services.command.adapters.replies import CommandGateway, ReplyTimeout


def _envelope() -> CommandEnvelope:
    return CommandEnvelope(
        command_id="cmd-0001",
        type="RememberMemory",
        token="t",
        stream_id="acme/member:ann",
        payload={"content": "plain text", "scope": "private"},
    )


def _reply(via: str) -> CommandReply:
    return CommandReply(
        command_id="cmd-0001", ok=True, stream_id="acme/member:ann", result={"via": via}
    )


class Recorder:
    def __init__(self) -> None:
        self.sealed: list[CommandEnvelope] = []
        self.published: list[CommandEnvelope] = []

    async def seal(self, envelope: CommandEnvelope) -> CommandEnvelope:
        self.sealed.append(envelope)
        return envelope.model_copy(update={"payload": {"content": "sealed"}})

    async def publish(self, envelope: CommandEnvelope) -> CommandReply:
        self.published.append(envelope)
        return _reply("kafka")


def _gateway(hand_over: object, recorder: Recorder) -> CommandGateway:
    gateway = CommandGateway("127.0.0.1:1", hand_over)  # type: ignore[arg-type]
    gateway._publish = recorder.publish  # type: ignore[method-assign]
    return gateway


async def test_a_command_handed_over_is_neither_sealed_nor_published() -> None:
    recorder = Recorder()

    def hand_over(envelope: CommandEnvelope) -> asyncio.Future[CommandReply]:
        answer: asyncio.Future[CommandReply] = asyncio.get_running_loop().create_future()
        answer.set_result(_reply("in process"))
        return answer

    reply = await _gateway(hand_over, recorder).send(_envelope(), 5, recorder.seal)
    assert reply.result == {"via": "in process"}
    assert recorder.sealed == [] and recorder.published == []


async def test_a_partition_written_elsewhere_goes_sealed_through_kafka() -> None:
    recorder = Recorder()
    reply = await _gateway(lambda envelope: None, recorder).send(_envelope(), 5, recorder.seal)
    assert reply.result == {"via": "kafka"}
    assert [e.payload for e in recorder.published] == [{"content": "sealed"}]


async def test_a_hand_over_not_applied_is_published_with_the_same_command_id() -> None:
    recorder = Recorder()

    def hand_over(envelope: CommandEnvelope) -> asyncio.Future[CommandReply]:
        answer: asyncio.Future[CommandReply] = asyncio.get_running_loop().create_future()
        answer.set_exception(NotApplied("the partition was revoked"))
        return answer

    reply = await _gateway(hand_over, recorder).send(_envelope(), 5, recorder.seal)
    assert reply.result == {"via": "kafka"}
    assert [e.command_id for e in recorder.published] == ["cmd-0001"]
    assert recorder.published[0].payload == {"content": "sealed"}


async def test_no_answer_in_time_from_the_writer_is_a_reply_timeout() -> None:
    recorder = Recorder()

    def hand_over(envelope: CommandEnvelope) -> asyncio.Future[CommandReply]:
        return asyncio.get_running_loop().create_future()  # never answered

    with pytest.raises(ReplyTimeout):
        await _gateway(hand_over, recorder).send(_envelope(), 0.05, recorder.seal)
    assert recorder.published == []  # it may still be applied: the caller retries


@pytest.mark.parametrize("delivery", ["hangs", "times out"])
async def test_a_delivery_that_hangs_or_times_out_is_a_reply_timeout_in_time(
    delivery: str,
) -> None:
    """Chaos QA: with the broker away, the producer's delivery (up to its 40 s request
    timeout) ran outside the deadline, and a command answered after 36 s where the reply
    timeout is 15; its KafkaTimeoutError would have been a 500."""
    recorder = Recorder()

    async def send_and_wait(*args: object, **kwargs: object) -> None:
        if delivery == "hangs":
            await asyncio.Event().wait()
        raise KafkaTimeoutError()

    gateway = CommandGateway("127.0.0.1:1", None)
    gateway._producer = SimpleNamespace(send_and_wait=send_and_wait)
    started = asyncio.get_running_loop().time()
    with pytest.raises(ReplyTimeout):
        await gateway.send(_envelope(), 0.2, recorder.seal)
    assert asyncio.get_running_loop().time() - started < 1
    assert gateway._waiting == {}  # its waiter is gone


class _Replies:
    """engram.replies as the listener reads it: one fetch, then nothing more."""

    def __init__(self, records: list[SimpleNamespace]) -> None:
        self._fetches = [{"tp": records}]

    async def getmany(self, timeout_ms: int) -> dict[str, list[SimpleNamespace]]:
        if self._fetches:
            return self._fetches.pop(0)
        await asyncio.sleep(3600)
        return {}


async def test_a_reply_that_is_not_the_writers_is_skipped_and_the_listener_goes_on() -> None:
    gateway = CommandGateway("127.0.0.1:1")
    forged = SimpleNamespace(key=b"cmd-0001", value=b'{"not": "a reply"}', partition=0, offset=1)
    real = SimpleNamespace(
        key=b"cmd-0001", value=_reply("kafka").model_dump_json().encode(), partition=0, offset=2
    )
    gateway._consumer = _Replies([forged, real])
    answer: asyncio.Future[CommandReply] = asyncio.get_running_loop().create_future()
    gateway._waiting["cmd-0001"] = {"acme/member:ann": answer}
    listening = asyncio.create_task(gateway._listen())
    try:
        assert (await asyncio.wait_for(answer, 2)).result == {"via": "kafka"}
        assert not listening.done()
    finally:
        listening.cancel()
