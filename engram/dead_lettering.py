"""A follower's dead letters, as it writes them: a record it can never apply goes to its
service's dead-letter topic (``engram.dlq.<service>``) with the error, before its offset is
stored (``engram.letters`` reads them back for an operator)."""

from __future__ import annotations

from typing import Any

from aiokafka import AIOKafkaProducer
from prometheus_client import Counter

from engram.kafka import letter_of
from engram.logging import get_logger

log = get_logger(__name__)

# On every follower's /metrics (the projector's, the indexer's, the extractor's).
DEAD_LETTERED = Counter(
    "engram_records_dead_lettered_total", "Records sent to the dead-letter topic", ["service"]
)


class DeadLettering:
    """One service's letters, each poison record of the fetch being applied lettered once."""

    def __init__(self, bootstrap: str, service: str) -> None:
        self.producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
        self._service = service
        # The records of the fetch being applied that were dead-lettered: a fetch applied
        # again record by record (one Postgres refused) decodes them again, and each gets
        # one letter (QA: they got two).
        self._lettered: set[tuple[str, int, int]] = set()

    def next_fetch(self) -> None:
        self._lettered.clear()

    async def send(self, record: Any, error: str) -> None:
        """Publish a poison record with its error; once."""
        where = (record.topic, record.partition, record.offset)
        if where in self._lettered:
            return
        self._lettered.add(where)
        DEAD_LETTERED.labels(self._service).inc()
        await self._publish(record, error)
        log.error(
            "dead_lettered",
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            error=error[:500],
        )

    async def _publish(self, record: Any, error: str) -> None:
        topic, key, value = letter_of(self._service, record, error)
        await self.producer.send_and_wait(topic, value, key=key)
