"""Nothing is dropped silently: poison records land on the dead-letter topics."""

from __future__ import annotations

import json
import random
import string
import uuid
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from contracts import topics
from contracts.envelope import CommandEnvelope
from tests.conftest import Caller, caller
from tests.support import dead_letters, eventually, read_replies, replies_so_far, send_commands

pytestmark = pytest.mark.e2e


async def produce(bootstrap: str, topic: str, key: str, value: bytes) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, value, key=key.encode())
    finally:
        await producer.stop()


@pytest.mark.parametrize(
    ("topic", "service"), [(topics.COMMANDS, "command"), (topics.EVENTS, "projector")]
)
async def test_undecodable_records_go_to_the_dead_letter_topic(
    services: dict[str, str], stack_settings: dict[str, str], topic: str, service: str
) -> None:
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    marker = f"poison-{uuid.uuid4().hex}"
    await produce(bootstrap, topic, f"poison/{marker}", f'{{"not": "{marker}"'.encode())
    [letter] = await eventually(
        lambda: dead_letters(bootstrap, service, marker),
        what=f"{marker} on {topics.dead_letter_topic(service)}",
    )
    assert letter["topic"] == topic and letter["service"] == service
    assert "undecodable" in str(letter["error"]) and marker in str(letter["value"])


def command(
    who: Caller, payload: dict[str, Any], type_: str = "RememberMemory", stream: str | None = None
) -> CommandEnvelope:
    return CommandEnvelope(
        command_id=f"poison-{uuid.uuid4().hex}",
        type=type_,
        token=who.token,
        stream_id=stream or f"{who.org}/member:{who.member}",
        payload=payload,
    )


async def test_commands_no_rule_foresaw_are_refused_one_by_one(
    services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    """A Kafka caller's odd payloads never stop its partition's writer: each gets its own
    typed rejection, and a good command beside them is decided (a code review found each
    of these stopping the command service for good)."""
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    ana, eve = caller(), caller()
    async with httpx.AsyncClient(timeout=10) as http:  # ana's text, sealed in the log
        saved = await http.post(
            f"{services['command']}/v1/memories",
            headers=ana.headers,
            json={"content": "The vault code is 0451."},
        )
        assert saved.status_code == 201, saved.text
    sealed = await sealed_content(bootstrap, saved.json()["item_id"])
    bad = [
        command(ana, {"content": "x", "related_ids": 5}),
        command(ana, {"item_id": "a\u0000b", "base_revision": 1, "content": "x"}, "CorrectMemory"),
        command(ana, {"content": {"key_id": "k\u0000", "nonce": "!!", "ciphertext": "!!"}}),
        command(ana, {"item_id": "  padded  "}, "PinMemory"),
        command(eve, {"content": sealed}),  # another org's sealed text, replayed
        command(eve, {"content": "x"}, stream=f"{ana.org}/member:{ana.member}"),
    ]
    good = command(ana, {"content": "The standup moved to 9:45."})
    await send_commands(bootstrap, [*bad, good])
    replies = await read_replies(bootstrap, {c.command_id for c in [*bad[:-1], good]})
    [decided] = replies[good.command_id]
    assert decided.ok and decided.result["status"] == "active", decided
    answered, unanswered = bad[:-1], bad[-1]  # eve's in ana's stream: see below
    refusals = [replies[c.command_id][0].rejection for c in answered]
    assert all(r is not None for r in refusals), refusals
    assert [r.status for r in refusals if r] == [422, 422, 403, 404, 403]
    # A refusal goes only to a caller of the stream it names (QA: any producer could put
    # a rejection under another caller's command id): eve's is dead-lettered, unanswered.
    [letter] = await eventually(
        lambda: dead_letters(bootstrap, "command", unanswered.command_id),
        what="eve's command dead-lettered",
    )
    assert "not answered" in str(letter["error"])
    assert (await replies_so_far(bootstrap, {unanswered.command_id}))[unanswered.command_id] == []


async def sealed_content(bootstrap: str, item_id: str) -> dict[str, Any]:
    """The sealed content of the event that saved ``item_id``, as anyone reading
    engram.events sees it."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        consumer.subscribe([topics.EVENTS])

        async def find() -> dict[str, Any] | None:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for r in records:
                    if item_id.encode() not in (r.value or b""):
                        continue  # (other tests' poison records are on this topic too)
                    body = json.loads(r.value or b"{}")
                    if body.get("payload", {}).get("item_id") == item_id:
                        return dict(body["payload"]["content"])
            return None

        return await eventually(find, what=f"the event of {item_id}")
    finally:
        await consumer.stop()


async def test_an_invalid_envelope_that_names_its_command_is_answered_too(
    services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    """Dead-lettered, and its caller, who waits for an answer to that id, gets one."""
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    ana = caller()
    envelope = command(ana, {"content": "x"})
    body = {**envelope.model_dump(mode="json"), "unexpected": 1}
    await produce(bootstrap, topics.COMMANDS, envelope.stream_id, json.dumps(body).encode())
    [reply] = (await read_replies(bootstrap, {envelope.command_id}))[envelope.command_id]
    assert not reply.ok and reply.rejection is not None
    assert reply.rejection.status == 422 and "unexpected" in reply.rejection.detail


async def test_a_very_long_word_in_a_long_named_scope_is_projected(
    services: dict[str, str],
) -> None:
    """Postgres's btree rows hold 2,704 bytes: a 1,500-byte word beside a 1,600-byte stream
    id, neither compressible, once stopped the projector on an event the writer had
    accepted (a code review)."""
    rng = random.Random(uuid.uuid4().int)  # names of their own on every run

    def name() -> str:  # 200 characters of 4 bytes each
        return "".join(chr(rng.randint(0x1D400, 0x1D6A3)) for _ in range(200))

    word = "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(1500))
    who = caller(org=name(), member=name())
    async with httpx.AsyncClient(timeout=10) as http:
        saved = await http.post(
            f"{services['command']}/v1/memories",
            headers=who.headers,
            json={"content": f"{word} is the longest word here"},
        )
        assert saved.status_code == 201, saved.text
        item = saved.json()["item_id"]

        async def visible() -> bool:
            r = await http.get(f"{services['recall']}/v1/memories/{item}", headers=who.headers)
            return r.status_code == 200

        await eventually(visible, what="the memory in the read model")
        found = await http.post(
            f"{services['recall']}/v1/search", headers=who.headers, json={"query": "longest word"}
        )
        assert [m["id"] for m in found.json()["memories"]] == [item]
