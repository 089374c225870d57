"""A command that breaks the writer alone (a fault no rule names) is refused undecided:
dead-lettered, answered ``not_decidable`` when a reply can be made of it, and consumed,
all in one transaction; a handed-over one fails, so its gateway publishes it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import asyncpg
import pytest
from aiokafka import ConsumerRecord
from aiokafka.errors import KafkaConnectionError, MessageSizeTooLargeError
from asyncpg.exceptions._base import InternalClientError

from contracts import topics
from contracts.envelope import CommandEnvelope, CommandReply
from engram.auth import TokenVerifier, mint_token
from engram.crypto import MasterKey
from engram.faults import is_transient
from engram.settings import CommonSettings
from services.command.adapters.admission import repeat_reply
from services.command.adapters.batch import Cleanup, Decoded, NotApplied, Submitted, decode
from services.command.adapters.lookups import Lookups
from services.command.adapters.writer import PartitionWriter
from services.command.answers import MAX_REPLY_BYTES, fitted
from services.command.context import new_item_id
from services.command.state import StreamState

SECRET = "s" * 32
VERIFIER = TokenVerifier(CommonSettings.model_validate({"ENGRAM_JWT_SECRET": SECRET}))
ANA = mint_token(SECRET, org="acme", member="ana")
ENVELOPE: dict[str, Any] = {
    "command_id": "cmd-00000001",
    "type": "RememberMemory",
    "token": ANA,
    "stream_id": "acme/member:ana",
    "payload": {"content": "x"},
}


class Producer:
    """What one transaction sent, and the offsets it consumed."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []
        self.offsets: list[dict[Any, int]] = []
        self.committed = 0

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        yield
        self.committed += 1

    async def send(
        self, topic: str, value: bytes, key: bytes | None = None, partition: int | None = None
    ) -> None:
        self.sent.append((topic, value))

    async def send_offsets_to_transaction(self, offsets: dict[Any, int], group: str) -> None:
        self.offsets.append(offsets)

    def create_batch(self) -> Batch:
        return Batch()

    async def send_batch(self, batch: Batch, topic: str, partition: int) -> None:
        self.sent += [(topic, value) for value in batch.values]


class Batch:
    """A record batch: its values, in order (aiokafka's ``BatchBuilder``, as it is used)."""

    def __init__(self) -> None:
        self.values: list[bytes] = []

    def append(self, key: bytes, value: bytes, timestamp: int | None) -> object:
        self.values.append(value)
        return object()

    def record_count(self) -> int:
        return len(self.values)


def writer() -> tuple[PartitionWriter, Producer]:
    keys = SimpleNamespace(master=MasterKey(bytes(32)))  # nothing here opens or makes a key
    w = PartitionWriter(
        0,
        "127.0.0.1:9",
        "test",
        keys,  # type: ignore[arg-type]
        VERIFIER,
        None,  # type: ignore[arg-type]
        partitions=1,
        reply_partitions=1,
    )
    producer = Producer()
    w._out.producer = producer  # the writer's transactions and sends all go through it
    w._out.begin()  # as a batch's transaction begins
    return w, producer


def record(value: bytes, timestamp: int = 0) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(
        topic=topics.COMMANDS,
        partition=0,
        offset=41,
        timestamp=timestamp,
        timestamp_type=1,
        key=b"acme/member:ana",
        value=value,
        checksum=None,
        serialized_key_size=15,
        serialized_value_size=len(value),
        headers=[],
    )


async def test_a_record_is_dead_lettered_answered_and_consumed_in_one_transaction() -> None:
    w, producer = writer()
    cleanup = await w.refuse(record(json.dumps(ENVELOPE).encode()), "ValueError: boom")
    assert producer.committed == 1
    letters = topics.dead_letter_topic("command")
    assert [topic for topic, _ in producer.sent] == [letters, topics.REPLIES]
    reply = json.loads(producer.sent[1][1])
    assert (reply["ok"], reply["rejection"]["code"]) == (False, "not_decidable")
    assert "ValueError: boom" in reply["rejection"]["detail"]
    assert [list(o.values()) for o in producer.offsets] == [[42]]
    assert cleanup.discard == [new_item_id("acme/member:ana", "cmd-00000001")]


@pytest.mark.parametrize(
    "token",
    [
        "not-a-token",
        mint_token("another secret, not the service's", org="acme", member="ana"),
        mint_token(SECRET, org="acme", member="bob"),  # a caller, of another stream
        mint_token(SECRET, org="other", member="ana"),
    ],
)
async def test_a_refusal_goes_only_to_a_caller_its_token_shows(token: str) -> None:
    """QA (Kafka): any producer could put a rejection under another caller's command id,
    with a made-up token or none: a caller that takes the first reply for its id took it
    for its answer. A refusal is answered only to a token signed for the stream (an
    expired one too); any other is dead-lettered, unanswered."""
    for value in (
        {**ENVELOPE, "token": token},
        {"command_id": "cmd-00000001", "stream_id": "acme/member:ana", "token": token},
    ):
        w, producer = writer()
        decoded = decode(record(json.dumps(value).encode()))
        await w._handle(decoded, {}, Lookups(), Cleanup())
        await w._out.flush()  # as before the transaction's offsets
        assert [topic for topic, _ in producer.sent] == [topics.dead_letter_topic("command")]
    w, producer = writer()
    await w.refuse(record(json.dumps({**ENVELOPE, "token": token}).encode()), "boom")
    assert [topic for topic, _ in producer.sent] == [topics.dead_letter_topic("command")]
    expired = mint_token(SECRET, org="acme", member="ana", ttl_seconds=-60)
    w, producer = writer()
    appended = record(
        json.dumps({**ENVELOPE, "token": expired}).encode(), timestamp=int(time.time() * 1000)
    )  # after the token expired
    await w._handle(decode(appended), {}, Lookups(), Cleanup())
    await w._out.flush()
    assert [topic for topic, _ in producer.sent] == [topics.REPLIES]
    assert json.loads(producer.sent[0][1])["rejection"]["code"] == "unauthenticated"


async def test_a_record_no_reply_can_be_made_of_is_dead_lettered_and_consumed() -> None:
    w, producer = writer()
    await w.refuse(record(b"\xff not json"), "ValueError: boom")
    assert [topic for topic, _ in producer.sent] == [topics.dead_letter_topic("command")]
    assert [list(o.values()) for o in producer.offsets] == [[42]]


async def test_a_handed_over_command_fails_so_its_gateway_publishes_it() -> None:
    w, producer = writer()
    answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    await w.refuse(Submitted(CommandEnvelope.model_validate(ENVELOPE), answer), "boom")
    with pytest.raises(NotApplied, match="not decidable: boom"):
        await answer
    assert producer.sent == [] and producer.committed == 0


@pytest.mark.parametrize(
    ("fault", "fails"), [(ValueError("a bug"), False), (OSError("connection reset"), True)]
)
async def test_a_batchs_own_fault_leaves_handed_over_commands_to_be_decided_alone(
    fault: Exception, fails: bool
) -> None:
    """A fault of the moment fails them (their gateway publishes them, the batch is read
    again); a fault of the batch's own leaves them to the worker, which decides each
    alone and answers it (QA: they were published again too, and answered as repeats)."""
    w, _ = writer()

    async def broken(stream_ids: object) -> None:
        raise fault

    w.streams.load = broken  # type: ignore[method-assign]
    answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    with pytest.raises(type(fault)):
        await w.process([Submitted(CommandEnvelope.model_validate(ENVELOPE), answer)])
    assert answer.done() is fails


@pytest.mark.parametrize(
    ("fault", "transient"),
    [
        (KafkaConnectionError(), True),
        (MessageSizeTooLargeError(), False),  # too large again, for good: the command's own
        (OSError("reset"), True),
        (asyncpg.CannotConnectNowError("the database system is starting up"), True),
        (asyncpg.AdminShutdownError("terminating connection"), True),
        (asyncpg.DeadlockDetectedError("deadlock"), True),
        (asyncpg.UniqueViolationError("duplicate key"), False),
        (ValueError("surrogates not allowed"), False),
        # Chaos QA: asyncpg's protocol after its connection was cut under an operation.
        (
            InternalClientError("cannot switch to state 15; another operation (2) is in progress"),
            True,
        ),
    ],
)
def test_a_fault_of_the_moment_is_told_from_a_commands_own(
    fault: Exception, transient: bool
) -> None:
    """QA: a Postgres restart (57P01, 57P03) counted as a command's own fault, and a valid
    command was refused; a reply too large for the broker counted as the moment's, and its
    partition retried it for good."""
    assert is_transient(fault) is transient


def test_a_clears_answer_keeps_its_first_thousand_and_counts_the_rest() -> None:
    erased = [{"item_id": f"{n:036}", "revisions": 3} for n in range(12_000)]
    reply = CommandReply(
        command_id="cmd-00000001",
        ok=True,
        stream_id="acme/member:ana",
        result={"seq": 9, "receipt": {"erased": erased, "where": ["x"]}},
        events=[f"{n:036}" for n in range(12_000)],
    )
    sent = fitted(reply)
    assert len(sent) <= MAX_REPLY_BYTES
    body = json.loads(sent)
    receipt = body["result"]["receipt"]
    assert (len(receipt["erased"]), receipt["erased_total"]) == (1_000, 12_000)
    assert (len(body["events"]), body["result"]["events_total"]) == (1_000, 12_000)
    assert receipt["where"] == ["x"] and body["result"]["seq"] == 9


async def test_a_checkpoint_that_fails_after_the_commit_does_not_fail_the_batch() -> None:
    """QA: a failed save read as the batch's own fault, and the committed batch was taken
    apart and decided again (answered as repeats)."""
    w, producer = writer()

    class Restorer:
        async def save(self, *args: object) -> None:
            raise asyncpg.UniqueViolationError("a bug in the save")

    async def nothing(*args: object) -> dict[str, bytes]:
        return {}

    w.streams._restorer = Restorer()  # type: ignore[assignment]
    w.streams.load = nothing  # type: ignore[assignment,method-assign]
    w._prepare_keys = nothing  # type: ignore[assignment,method-assign]
    w.streams.events_since_checkpoint = w.streams.checkpoint_every  # due now
    marker = ConsumerRecord(
        topic=topics.COMMANDS,
        partition=0,
        offset=5,
        timestamp=0,
        timestamp_type=1,
        key=None,
        value=None,
        checksum=None,
        serialized_key_size=0,
        serialized_value_size=0,
        headers=[(topics.ROLL_MARKER_HEADER, b"1")],
    )
    await w.process([marker])
    assert producer.committed == 1 and [list(o.values()) for o in producer.offsets] == [[6]]
    assert w.streams.events_since_checkpoint == w.streams.checkpoint_every  # saved later


def test_an_agents_repeat_is_refused_while_its_orgs_memory_is_off() -> None:
    """QA: a repeat got its first answer, the memory's state and all, though memory was off
    (a repeat is answered before any decision)."""
    secret = "s" * 32
    verifier = TokenVerifier(CommonSettings.model_validate({"ENGRAM_JWT_SECRET": secret}))
    state = StreamState("acme/member:ana")
    first = {"item_id": "i1", "revision": 1, "status": "active"}

    def reply(token: str, memory_on: bool) -> CommandReply:
        env = CommandEnvelope.model_validate({**ENVELOPE, "token": token})
        return repeat_reply(
            verifier,
            Decoded(None, env),
            state,
            {},
            (0, 1),
            MasterKey(bytes(32)),
            first,
            memory_on=memory_on,
        )

    agent = mint_token(secret, org="acme", member="ana", agent="bot")
    refused_reply = reply(agent, memory_on=False)
    assert refused_reply.rejection is not None
    assert refused_reply.rejection.code == "memory_off"
    assert reply(agent, memory_on=True).ok
    person = mint_token(secret, org="acme", member="ana")
    assert reply(person, memory_on=False).ok


def test_a_repeat_that_is_no_valid_command_is_refused_not_answered_first() -> None:
    """QA (Kafka): a repeat under a used id with an empty content, or a forget of another
    type, got the first save's answer, ok and all; whether the stream kept the first's
    fingerprint or (after a restore) only its answer."""
    secret = "s" * 32
    verifier = TokenVerifier(CommonSettings.model_validate({"ENGRAM_JWT_SECRET": secret}))
    token = mint_token(secret, org="acme", member="ana")
    first = {"item_id": "i1", "revision": 1, "status": "active"}
    master = MasterKey(bytes(32))

    def reply(state: StreamState, **envelope: Any) -> CommandReply:
        env = CommandEnvelope.model_validate({**ENVELOPE, "token": token, **envelope})
        return repeat_reply(verifier, Decoded(None, env), state, {}, (0, 1), master, first)

    for known in (False, True):
        state = StreamState("acme/member:ana")
        if known:
            state.record_fingerprint(ENVELOPE["command_id"], b"digest of the first")
        empty = reply(state, payload={"content": ""})
        assert empty.rejection is not None and empty.rejection.code == "invalid"
        other = reply(state, type="ForgetMemory", payload={"item_id": "i1", "reason": "r" * 600})
        assert other.rejection is not None and other.rejection.code == "invalid"
        unknown = reply(state, type="ForgetMemoryy", payload={"item_id": "i1"})
        assert unknown.rejection is not None and unknown.rejection.code == "invalid"
    same = reply(StreamState("acme/member:ana"), payload={"content": "x"})
    assert same.ok and same.result is not None and same.result["duplicate"] is True
