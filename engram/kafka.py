"""Kafka plumbing: client factories, topic set-up, and the dead-letter writer.

Consumers of ``engram.events`` read committed records only: a writer's aborted
transaction must never reach a read model.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaError, TopicAlreadyExistsError
from aiokafka.producer import sender as _sender

from contracts.topics import TopicSpec, dead_letter_topic, topic_specs
from engram.logging import get_logger

log = get_logger(__name__)


def json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), default=str).encode()


def producer(bootstrap: str, **kwargs: Any) -> AIOKafkaProducer:
    return AIOKafkaProducer(
        bootstrap_servers=bootstrap, linger_ms=kwargs.pop("linger_ms", 1), **kwargs
    )


# A transaction's first write to a partition is refused with CONCURRENT_TRANSACTIONS while
# the broker still writes the previous commit's markers (3 to 4 ms on one broker); aiokafka
# then waits a fixed 20 ms (its BACKOFF_OVERRIDE) before it asks again, and every other
# transactional retry waits retry_backoff_ms (100 ms by default). Back-to-back transactions,
# the writer's normal state, paid that on every batch: 25 ms per HTTP command at best.
TXN_RETRY_SECONDS = 0.002
_sender.BACKOFF_OVERRIDE = TXN_RETRY_SECONDS


# A transactional producer's record batches: aiokafka's default of 16 KiB split a
# 500-command batch into dozens of record batches, and the broker pays for each one (its
# CPU per command in the sustained benchmark fell from 0.23 to 0.08 ms at 512 KiB). It
# stays below the broker's message.max.bytes (1 MiB).
TXN_BATCH_BYTES = 512 * 1024


def transactional_producer(bootstrap: str, transactional_id: str) -> AIOKafkaProducer:
    """A transactional, idempotent producer that retries refused transaction requests
    after 2 ms, not 20 or 100 ms, in record batches of up to 512 KiB."""
    return AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=transactional_id,
        enable_idempotence=True,
        linger_ms=0,
        max_batch_size=TXN_BATCH_BYTES,
        retry_backoff_ms=round(TXN_RETRY_SECONDS * 1000),
    )


class PartitionBatches:
    """A transaction's records for one topic-partition, handed to the producer a record
    batch at a time (``send_batch``, up to the producer's ``max_batch_size``), not a record
    at a time: ``send`` checks the topic's metadata, picks the partition and makes a future
    for every record. One a transaction: ``flush`` before its offsets and commit;
    ``last_offset`` after the commit."""

    def __init__(self, producer: AIOKafkaProducer, topic: str, partition: int) -> None:
        self._producer, self._topic, self._partition = producer, topic, partition
        self._batch: Any = None
        self._sent: list[tuple[asyncio.Future[Any], int]] = []  # (batch's future, records)

    async def append(self, key: bytes, value: bytes) -> None:
        if self._batch is None or self._batch.append(key=key, value=value, timestamp=None) is None:
            await self.flush()  # full (or none yet): a new batch takes the record
            self._batch = self._producer.create_batch()
            self._batch.append(key=key, value=value, timestamp=None)  # the first always fits

    async def flush(self) -> None:
        if self._batch is not None and self._batch.record_count():
            future = await self._producer.send_batch(
                self._batch, self._topic, partition=self._partition
            )
            self._sent.append((future, self._batch.record_count()))
        self._batch = None

    @property
    def records(self) -> int:
        return sum(count for _, count in self._sent)

    def last_offset(self) -> int | None:
        """The offset of the last record sent, once the batches are acknowledged."""
        ends = [future.result().offset + count - 1 for future, count in self._sent]
        return max(ends) if ends else None


# How long the broker may hold an empty fetch. It answers as soon as committed records
# arrive (a transaction's commit marker wakes a read-committed fetch), so this bounds
# only idle polling: at 100 ms the idle broker spent 2 percentage points of a core more,
# and an A/B run gained 8% sustained throughput at 500 with no latency cost.
FETCH_MAX_WAIT_MS = 500


def consumer(bootstrap: str, *topics: str, **kwargs: Any) -> AIOKafkaConsumer:
    """Every Engram consumer: read committed only (an aborted write never reaches a read
    model), offsets never auto-committed (each follower stores its own)."""
    return AIOKafkaConsumer(
        *topics,
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=kwargs.pop("fetch_max_wait_ms", FETCH_MAX_WAIT_MS),
        **kwargs,
    )


@contextlib.asynccontextmanager
async def stopped_on_failure(stop: Callable[[], Awaitable[None]], part: str) -> AsyncIterator[None]:
    """Around a start in steps: when a step fails or the start is cancelled, ``stop`` what
    the earlier steps started, then the step's error goes on. A ``stop`` that fails as well
    is logged (``cleanup_failed``), not raised: its error would hide why the start failed."""
    try:
        yield
    except BaseException:
        try:
            await stop()  # safe on clients that did not start (aiokafka's are)
        except Exception as exc:
            log.error("cleanup_failed", part=part, error=repr(exc), exc_info=exc)
        raise


# How long /health waits for the broker to answer.
BROKER_HEALTH_SECONDS = 2.0


async def broker_answers(kafka: AIOKafkaConsumer, timeout: float = BROKER_HEALTH_SECONDS) -> bool:
    """Whether the broker answers a request (the assigned partitions' ends, or the topics)
    within ``timeout``: ``/health`` says 503 while it does not (chaos QA: it said 200 with
    the broker down)."""
    assigned = list(kafka.assignment())
    request = kafka.end_offsets(assigned) if assigned else kafka.topics()
    try:
        await asyncio.wait_for(request, timeout)
    except (TimeoutError, KafkaError):
        return False
    return True


async def ensure_topics(bootstrap: str, partitions: int) -> list[str]:
    """Create every missing topic with its partition count and settings, and bring the
    settings of the existing ones to what ``contracts.topics`` says."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        await admin.start()  # in the try: a start that fails halfway is stopped too
        existing = set(await admin.list_topics())
        missing = [s for s in topic_specs(partitions) if s.name not in existing]
        for spec in missing:
            # A replica's set-up may win the race; that is fine.
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics([_new_topic(spec)])
        _check_partitions(
            await admin.describe_topics([s.name for s in topic_specs(partitions)]), partitions
        )
        await _converge_configs(admin, [s for s in topic_specs(partitions) if s.name in existing])
        return [s.name for s in missing]
    finally:
        await admin.close()


async def topic_configs(admin: AIOKafkaAdminClient, names: list[str]) -> dict[str, dict[str, str]]:
    """Each topic's settings as the broker reports them (defaults included)."""
    resources = [ConfigResource(ConfigResourceType.TOPIC, name) for name in names]
    found: dict[str, dict[str, str]] = {}
    for response in await admin.describe_configs(resources):
        for error, message, _type, name, entries in response.resources:
            if error:
                raise RuntimeError(f"cannot read the settings of topic {name}: {message}")
            found[name] = {entry[0]: entry[1] for entry in entries}
    return found


async def _converge_configs(admin: AIOKafkaAdminClient, specs: list[TopicSpec]) -> None:
    """A topic made by an older version keeps its old settings until set-up alters them
    (a whole-resource AlterConfigs: the spec is every setting Engram manages)."""
    if not specs:
        return
    actual = await topic_configs(admin, [s.name for s in specs])
    for spec in specs:
        wanted = spec.config()
        differs = {k: v for k, v in wanted.items() if actual.get(spec.name, {}).get(k) != v}
        if differs:
            resource = ConfigResource(ConfigResourceType.TOPIC, spec.name, wanted)
            for response in await admin.alter_configs([resource]):
                for error, message, _type, name in response.resources:
                    if error:
                        raise RuntimeError(f"cannot change the settings of topic {name}: {message}")
            log.info("topic_settings_updated", topic=spec.name, settings=differs)


def _new_topic(spec: TopicSpec) -> NewTopic:
    return NewTopic(spec.name, spec.partitions, 1, topic_configs=spec.config())


def _check_partitions(described: list[dict[str, Any]], partitions: int) -> None:
    """Commands and events must stay co-partitioned, or one stream gets two writers."""
    counts = {d["topic"]: len(d["partitions"]) for d in described}
    if counts.get("engram.commands") != counts.get("engram.events"):
        raise RuntimeError(f"engram.commands and engram.events differ in partitions: {counts}")
    if counts.get("engram.events") != partitions:
        log.warning("partition_count_differs", configured=partitions, actual=counts)


async def partition_count(bootstrap: str, topic: str) -> int:
    """Partitions of a topic; fails clearly when the set-up step has not created it."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        await admin.start()  # in the try: a start that fails halfway is stopped too
        [described] = await admin.describe_topics([topic])
    finally:
        await admin.close()
    if not described["partitions"]:
        raise RuntimeError(f"topic {topic} is missing: run `engram setup` first")
    return len(described["partitions"])


def letter_of(service: str, record: Any, error: str) -> tuple[str, bytes, bytes]:
    """``dead_letter`` for a consumed record: its topic, partition, offset, key and value."""
    return dead_letter(
        service,
        topic=record.topic,
        partition=record.partition,
        offset=record.offset,
        key=record.key,
        value=record.value,
        error=error,
    )


def dead_letter(
    service: str,
    *,
    topic: str,
    partition: int,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    error: str,
) -> tuple[str, bytes, bytes]:
    """A dead-letter record: the original bytes and where they came from, plus the error.

    The value goes in as text (``value``) when it is UTF-8, else as base64
    (``value_base64``), so a redrive publishes the very bytes. A letter that would not fit
    a Kafka request (a record near the broker's limit, escaped) keeps the value's size,
    SHA-256 and first bytes instead (``value_truncated``): a letter that cannot be written
    would hold its partition's writer forever."""
    body: dict[str, Any] = {
        "service": service,
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "key": key.decode(errors="replace")[:LETTER_KEY_CHARS] if key else None,
        "error": error[:LETTER_ERROR_CHARS],
        "failed_at": datetime.now(UTC).isoformat(),
    }
    letter = json_bytes({**body, **_letter_value(value)})
    if len(letter) > LETTER_MAX_BYTES:
        assert value is not None  # the rest of a letter is bounded
        letter = json_bytes(
            {
                **body,
                "value_truncated": True,
                "value_bytes": len(value),
                "value_sha256": hashlib.sha256(value).hexdigest(),
                "value_head_base64": base64.b64encode(value[:LETTER_HEAD_BYTES]).decode(),
            }
        )
    return dead_letter_topic(service), (key or b"")[:LETTER_KEY_CHARS], letter


# A letter stays well under the producers' request limit (1 MiB) whatever it carries.
LETTER_MAX_BYTES = 900_000
LETTER_HEAD_BYTES = 16_384
LETTER_ERROR_CHARS = 4_000
LETTER_KEY_CHARS = 1_000


def _letter_value(value: bytes | None) -> dict[str, str | None]:
    if not value:
        return {"value": None}
    try:
        return {"value": value.decode()}
    except UnicodeDecodeError:
        return {"value_base64": base64.b64encode(value).decode()}


async def publish_commands(bootstrap: str, envelopes: list[Any], topic: str = "") -> None:
    """Publish CommandEnvelopes as a Kafka caller does: keyed by their stream, on
    ``engram.commands`` (or ``topic``)."""
    from contracts.topics import COMMANDS

    out = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        await out.start()  # in the try: a start that fails halfway is stopped too
        for env in envelopes:
            value, key = env.model_dump_json().encode(), env.stream_id.encode()
            await out.send(topic or COMMANDS, value, key=key)
        await out.flush()
    finally:
        await out.stop()
