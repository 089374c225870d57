"""The dead-letter topics (``engram.dlq.<service>``), as an operator reads them.

A letter (``engram.kafka.dead_letter``) carries the original record's bytes, where it came
from and the error; letters are counted as records (a letter written in a transaction is
followed by its marker). One whose record came from an input topic (``engram.commands``,
``engram.conversations``) can be re-driven: published there again, with its key, where
command ids and turn ids make a second delivery harmless. An event is never published
again: ``engram.events`` has one writer; a consumer fixed after a poison event re-reads it
by a replay.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition

from contracts import topics
from engram.topic_reads import COUNT_AT_MOST, READ_SECONDS, OperateError, scan

REDRIVABLE = (topics.COMMANDS, topics.CONVERSATIONS)


@dataclass(frozen=True)
class Letter:
    service: str
    offset: int  # in engram.dlq.<service>
    body: dict[str, Any]  # the letter: topic, partition, offset, key, value, error, failed_at


@dataclass(frozen=True)
class DeadLetters:
    topic: str
    count: int  # letters (read committed); offsets, markers included, when not exact
    exact: bool
    newest: list[Letter]


async def dead_letters(bootstrap: str, service: str, last: int) -> DeadLetters:
    """How many letters the service's dead-letter topic holds, and the ``last`` newest."""
    return await letters_in(bootstrap, _dead_letter_topic(service), last)


def _dead_letter_topic(service: str) -> str:
    if service not in topics.SERVICES:
        raise OperateError(f"no service {service!r}: one of {', '.join(topics.SERVICES)}")
    return topics.dead_letter_topic(service)


async def letters_in(bootstrap: str, topic: str, last: int) -> DeadLetters:
    """The letters of a dead-letter topic: counted as records, not offsets (a letter
    written in a transaction is followed by its commit marker), as ``engram lag`` counts,
    within the same bounds; past them, the offsets, and the count says it is not exact."""
    if last < 0:
        raise OperateError(f"the number of letters to show is 0 or more, not {last}")
    async with _reader(bootstrap, topic) as (kafka, tp, start, end):
        if end - start <= COUNT_AT_MOST:
            count, done, kept = await scan(kafka, tp, start, end, keep=last)
            if done:
                return DeadLetters(topic, count, True, [_letter(tp, r) for r in kept])
        newest = await _newest(kafka, tp, start, end, last)
        return DeadLetters(topic, end - start, False, [_letter(tp, r) for r in newest])


async def _newest(
    kafka: AIOKafkaConsumer, tp: TopicPartition, start: int, end: int, last: int
) -> list[ConsumerRecord[bytes, bytes]]:
    """The ``last`` newest records, read back from the end twice as far each time: a
    marker or an aborted record takes an offset too."""
    span = 2 * last
    while last > 0:
        since = max(start, end - span)
        _, done, kept = await scan(kafka, tp, since, end, keep=last)
        if not done:
            raise OperateError(f"{tp.topic} did not answer within {READ_SECONDS:.0f} s")
        if len(kept) >= last or since == start:
            return kept
        span *= 2
    return []


async def redrive(bootstrap: str, service: str, offset: int) -> tuple[str, int, int]:
    """Publish the record of the letter at ``offset`` again where it came from; returns
    the topic, partition and offset it now has."""
    async with _reader(bootstrap, _dead_letter_topic(service)) as (kafka, tp, start, end):
        letters = await _read(kafka, tp, offset, offset + 1) if start <= offset < end else []
    if not letters or letters[0].offset != offset:
        # Offsets in that range without a letter are the transactions' commit markers.
        held = (
            f"its letters are between offsets {start} and {end - 1} (`engram dlq list` names "
            "them; the offsets between are transaction markers)"
            if end > start
            else "it is empty"
        )
        raise OperateError(f"{tp.topic} holds no letter at offset {offset}: {held}")
    body = letters[0].body
    source = body.get("topic")
    if source not in REDRIVABLE:
        raise OperateError(
            f"the letter at {offset} holds a record of {source}, which is not re-driven: "
            f"only {' and '.join(REDRIVABLE)} take a record again (engram.events has one "
            "writer; a consumer fixed after a poison event re-reads it by `engram replay`)"
        )
    value = _record_value(body, offset)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    try:
        await producer.start()  # in the try: a start that fails halfway is stopped too
        key = body["key"].encode() if isinstance(body.get("key"), str) else None
        sent = await producer.send_and_wait(source, value, key=key)
    finally:
        await producer.stop()
    return source, sent.partition, sent.offset


def _record_value(body: dict[str, Any], offset: int) -> bytes:
    """The dead record's bytes, as its letter holds them (text, or base64 when they were
    not UTF-8); a letter that kept only their head cannot be re-driven."""
    if body.get("value_truncated"):
        raise OperateError(
            f"the letter at {offset} holds only the first bytes of a {body.get('value_bytes')}-"
            "byte record (too large for a letter): it cannot be re-driven"
        )
    if isinstance(body.get("value"), str):
        return str(body["value"]).encode()
    if isinstance(body.get("value_base64"), str):
        try:
            return base64.b64decode(body["value_base64"], validate=True)
        except ValueError as exc:
            raise OperateError(f"the letter at {offset} holds no valid base64 value") from exc
    raise OperateError(f"the letter at {offset} holds no record value to publish")


@asynccontextmanager
async def _reader(
    bootstrap: str, topic: str
) -> AsyncIterator[tuple[AIOKafkaConsumer, TopicPartition, int, int]]:
    """A reader of a dead-letter topic (one partition), with its first and end offsets."""
    tp = TopicPartition(topic, 0)
    kafka = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False
    )
    try:
        await kafka.start()  # in the try: a start that fails halfway is stopped too
        start = (await kafka.beginning_offsets([tp]))[tp]
        end = (await kafka.end_offsets([tp]))[tp]
        yield kafka, tp, start, end
    finally:
        await kafka.stop()


async def _read(kafka: AIOKafkaConsumer, tp: TopicPartition, start: int, end: int) -> list[Letter]:
    _, done, records = await scan(kafka, tp, start, end, keep=end - start)
    if not done:
        raise OperateError(f"{tp.topic} did not answer within {READ_SECONDS:.0f} s")
    return [_letter(tp, r) for r in records]


def _letter(tp: TopicPartition, record: ConsumerRecord[bytes, bytes]) -> Letter:
    try:
        body = json.loads(record.value or b"")
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python reads
        body = None
    if not isinstance(body, dict):
        body = {"error": "(not a dead letter: not a JSON object)"}
    return Letter(tp.topic.removeprefix(topics.DLQ_PREFIX), record.offset, body)
