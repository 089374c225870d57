"""Publishes proposals on ``engram.commands``, keyed by stream id like every command."""

from __future__ import annotations

import asyncio

from contracts import topics
from contracts.envelope import CommandEnvelope
from engram.kafka import producer, stopped_on_failure


class CommandPublisher:
    def __init__(self, bootstrap: str) -> None:
        # Idempotent: a producer retry never writes a proposal twice into the log.
        self._producer = producer(bootstrap, acks="all", enable_idempotence=True)

    async def start(self) -> None:
        # Connected, then no producer id: close the connections.
        async with stopped_on_failure(self._producer.stop, "command_publisher"):
            await self._producer.start()

    async def stop(self) -> None:
        await self._producer.stop()

    async def publish(self, envelopes: list[CommandEnvelope]) -> None:
        """Send all, then wait for all: the turn's offset is stored only after this returns."""
        sent = [
            await self._producer.send(
                topics.COMMANDS, env.model_dump_json().encode(), key=env.stream_id.encode()
            )
            for env in envelopes
        ]
        await asyncio.gather(*sent)
