"""A follower letters each poison record of a fetch once: a fetch Postgres refused is
applied again record by record, and decoding it again must not letter its undecodable
records a second time (QA: `engram dlq list projector` showed 7 letters for 4 records)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from engram.tracking import TrackedFollower


class Producer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []

    async def send_and_wait(self, topic: str, value: bytes, key: bytes | None = None) -> None:
        self.sent.append((topic, value))


async def test_a_record_of_one_fetch_is_lettered_once() -> None:
    async def handle(conn: Any, records: list[Any]) -> None:
        pass

    follower = TrackedFollower(
        bootstrap="127.0.0.1:9",
        topic="engram.events",
        group_id="g",
        pool=None,
        offsets_table="projector.offsets",
        service="projector",
        handle=handle,
    )
    producer = Producer()
    follower._letters.producer = producer
    poison = SimpleNamespace(
        topic="engram.events", partition=0, offset=38, key=b"k", value=b"not json {"
    )
    await follower.dead_letter(poison, "undecodable event")
    await follower.dead_letter(poison, "undecodable event")  # the fetch, record by record
    assert [topic for topic, _ in producer.sent] == ["engram.dlq.projector"]
    follower._letters.next_fetch()  # the same offset read again is lettered
    await follower.dead_letter(poison, "undecodable event")
    assert len(producer.sent) == 2
