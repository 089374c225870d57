"""A part that starts in steps (a gateway, a pruner, a follower) closes what it had
started when a later step fails or the start is cancelled. No infrastructure: every
producer, consumer and client is a fake that notes in a journal when it is closed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from fastapi import FastAPI

from engram import log_pruner, tracking
from services.command.adapters import processor, projection, replies
from services.extractor.adapters import commands

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


class StepFailed(Exception):
    """The startup step a test makes fail."""


class Part:
    """Anything a lifespan opens (a pool, a producer, a consumer, a client, a pruner, a
    follower): it notes in the journal when it is closed, however that is spelled.
    ``fails``: its start raises; ``hangs``: its start never ends (a group that never
    assigns partitions)."""

    consumer = None
    submit = None
    model, dimensions, max_distance = "fake-model", 3, 0.5

    def __init__(
        self, journal: list[str], name: str, *, fails: bool = False, hangs: bool = False
    ) -> None:
        self.journal, self.name, self.fails, self.hangs = journal, name, fails, hangs

    async def start(self) -> None:
        if self.fails:
            raise StepFailed(f"{self.name} does not start")
        if self.hangs:
            await forever()

    async def stop(self) -> None:
        await asyncio.sleep(0)  # as a real close waits on I/O: what was due before runs
        self.journal.append(f"{self.name} closed")

    close = aclose = stop

    async def run(self, *args: object) -> None:
        await forever()

    def subscribe(self, *args: object, **kwargs: object) -> None:
        """As a consumer subscribes before it starts."""


async def forever() -> None:
    await asyncio.Event().wait()


async def nothing(*args: object) -> None:
    return None


async def three(*args: object) -> int:
    return 3


def maker(journal: list[str], name: str, fails: bool = False) -> Callable[..., Part]:
    """In place of a class the lifespan builds its part from."""
    return lambda *args, **kwargs: Part(journal, name, fails=fails)


def opener(journal: list[str], name: str, fails: bool = False) -> Callable[..., Any]:
    """In place of a factory the lifespan awaits (``create_pool``)."""

    async def open_part(*args: object, **kwargs: object) -> Part:
        if fails:
            raise StepFailed(f"{name} does not open")
        return Part(journal, name)

    return open_part


def entered(journal: list[str], name: str, fails: bool = False) -> Callable[..., Any]:
    """In place of a context manager the lifespan enters (``open_provider``)."""

    @asynccontextmanager
    async def enter(*args: object) -> AsyncIterator[Part]:
        if fails:
            raise StepFailed(f"{name} does not open")
        part = Part(journal, name)
        try:
            yield part
        finally:
            await part.stop()

    return enter


def failing(name: str) -> Callable[..., Any]:
    """In place of a step, awaited or not: calling it raises."""

    def step(*args: object) -> Any:
        raise StepFailed(f"{name} fails")

    return step


def supervised(monkeypatch: pytest.MonkeyPatch, module: ModuleType, journal: list[str]) -> None:
    """Background tasks as ``supervise`` makes them, each noting when it is cancelled (and
    none stopping the test process when it fails)."""

    def supervise(coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = asyncio.create_task(coro, name=name)
        task.add_done_callback(
            lambda t: journal.append(f"{name} cancelled") if t.cancelled() else None
        )
        return task

    monkeypatch.setattr(module, "supervise", supervise)


async def start_and_stop(lifespan: Lifespan) -> None:
    async with lifespan(FastAPI()):
        pass


def assert_stopped(journal: list[str], tasks: list[str], parts: list[str]) -> None:
    """Every task cancelled (in whichever order they end) before the parts close, in order."""
    assert sorted(journal[: len(tasks)]) == sorted(f"{t} cancelled" for t in tasks)
    assert journal[len(tasks) :] == [f"{p} closed" for p in parts]


@pytest.fixture
def journal() -> list[str]:
    return []


# --- the parts' own starts -------------------------------------------------------------


@pytest.mark.parametrize("fails", ["consumer", "replies topic"])
async def test_a_gateway_whose_start_fails_stops_its_producer_and_consumer(
    monkeypatch: pytest.MonkeyPatch, journal: list[str], fails: str
) -> None:
    monkeypatch.setattr(replies, "AIOKafkaProducer", maker(journal, "producer"))
    monkeypatch.setattr(replies, "consumer", maker(journal, "consumer", fails == "consumer"))
    monkeypatch.setattr(replies, "partition_count", failing("replies topic"))
    gateway = replies.CommandGateway("kafka:9092")
    with pytest.raises(StepFailed):
        await gateway.start()
    assert journal == ["consumer closed", "producer closed"]
    assert not gateway.healthy  # no reply listener left running


async def test_a_pruner_whose_producer_does_not_start_closes_its_admin_client(
    journal: list[str],
) -> None:
    class Pruner(log_pruner.LogPruner):
        async def committed(self, partitions: list[int]) -> dict[int, int]:
            return {}

    admin, producer = Part(journal, "admin"), Part(journal, "producer", fails=True)
    pruner = Pruner("kafka:9092", "topic", kafka=(admin, producer))
    with pytest.raises(StepFailed):
        await pruner.start()
    assert journal == ["producer closed", "admin closed"]


async def test_a_projection_watch_or_a_publisher_that_fails_to_start_closes_its_client(
    monkeypatch: pytest.MonkeyPatch, journal: list[str]
) -> None:
    monkeypatch.setattr(projection, "consumer", maker(journal, "watch", fails=True))
    monkeypatch.setattr(commands, "producer", maker(journal, "publisher", fails=True))
    with pytest.raises(StepFailed):
        await projection.ProjectionWatch(object(), "kafka:9092", group="g").start()
    with pytest.raises(StepFailed):
        await commands.CommandPublisher("kafka:9092").start()
    assert journal == ["watch closed", "publisher closed"]


async def cancelled_while_starting(run: Coroutine[Any, Any, None]) -> None:
    """Run until the consumer's start waits (for the group to assign), then cancel it."""
    task = asyncio.create_task(run)
    for _ in range(5):
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def hanging(journal: list[str], name: str) -> Callable[..., Part]:
    return lambda *args, **kwargs: Part(journal, name, hangs=True)


async def test_a_follower_stopped_while_its_consumer_starts_closes_both_clients(
    monkeypatch: pytest.MonkeyPatch, journal: list[str]
) -> None:
    monkeypatch.setattr(tracking, "consumer", hanging(journal, "consumer"))
    letters = SimpleNamespace(producer=Part(journal, "letters"))
    monkeypatch.setattr(tracking, "DeadLettering", lambda *args: letters)
    follower = tracking.TrackedFollower(
        bootstrap="kafka:9092",
        topic="t",
        group_id="g",
        pool=object(),
        offsets_table="x.offsets",
        service="test",
        handle=nothing,
    )
    await cancelled_while_starting(follower.run())
    assert journal == ["consumer closed", "letters closed"]


async def test_a_command_processor_stopped_while_its_consumer_starts_closes_it(
    monkeypatch: pytest.MonkeyPatch, journal: list[str]
) -> None:
    monkeypatch.setattr(processor, "consumer", hanging(journal, "consumer"))
    p = processor.CommandProcessor("kafka:9092", "g", object(), object(), object(), 10, 1)  # type: ignore[arg-type]
    await cancelled_while_starting(p.run())
    assert journal == ["consumer closed"]
