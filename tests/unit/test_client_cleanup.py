"""A Kafka client opened for one task (a partition's restore, a replay's range, a question
to the broker, an operator's command) is closed when its start fails or is cancelled, as
when the task fails later; a replay's two pools are both closed whichever of them fails.
No infrastructure: every client and pool is a fake that notes in a journal when it is
closed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka import TopicPartition

from contracts import topics
from engram import kafka, letters, operate
from services.command.adapters import restore
from services.projector import ranges
from services.projector.adapters import event_log, shadow
from tests.unit.test_startup_cleanup import Breaking, CloseFailed, Part, StepFailed

Task = Callable[[pytest.MonkeyPatch], Awaitable[object]]
BOOTSTRAP = "kafka:9092"


async def no_row(*args: object) -> None:
    return None


def restoring(mp: pytest.MonkeyPatch) -> Awaitable[object]:
    """A partition's restore, as a writer's start (retried after faults) runs it."""
    pool = SimpleNamespace(fetchrow=no_row)  # no checkpoint: replay from the start
    return restore.Restorer(pool, BOOTSTRAP, master=object()).restore(0)  # type: ignore[arg-type]


def applying(mp: pytest.MonkeyPatch) -> Awaitable[object]:
    """A replay's (or a swap's) range of engram.events."""
    return ranges.apply_range(object(), object(), BOOTSTRAP, {0: 0}, None, None, None, None)  # type: ignore[arg-type]


def redriving(mp: pytest.MonkeyPatch) -> Awaitable[object]:
    """A re-drive, once it has read its letter: the producer that publishes it again."""

    @asynccontextmanager
    async def reader(*args: object) -> AsyncIterator[tuple[object, TopicPartition, int, int]]:
        yield object(), TopicPartition("engram.dlq.command", 0), 0, 1

    async def read(*args: object) -> list[letters.Letter]:
        return [letters.Letter("command", 0, {"topic": topics.COMMANDS, "value": "{}"})]

    mp.setattr(letters, "_reader", reader)
    mp.setattr(letters, "_read", read)
    return letters.redrive(BOOTSTRAP, "command", 0)


def measuring_lag(mp: pytest.MonkeyPatch) -> Awaitable[object]:
    """``engram lag``, once it knows the positions: the consumer that reads the ends."""

    async def stored(*args: object) -> tuple[list[Any], set[str]]:
        row = operate._Position("projector.offsets", "g", topics.EVENTS, 0, 0)
        return [row], {"projector.offsets"}

    async def existing(*args: object) -> set[str]:
        return {topics.EVENTS}

    async def none(*args: object) -> list[Any]:
        return []

    mp.setattr(operate, "_postgres_positions", stored)
    mp.setattr(operate, "_command_positions", none)
    mp.setattr(operate, "_topics", existing)
    return operate.consumer_lag(BOOTSTRAP, "postgresql://", groups={})


# Each task, the module and name of the client class (or factory) it opens, and the task.
TASKS: dict[str, tuple[Any, str, Task]] = {
    "restore": (restore, "consumer", restoring),
    "replay range": (event_log, "consumer", applying),
    "partition count": (
        kafka,
        "AIOKafkaAdminClient",
        lambda mp: kafka.partition_count(BOOTSTRAP, topics.EVENTS),
    ),
    "topic set-up": (kafka, "AIOKafkaAdminClient", lambda mp: kafka.ensure_topics(BOOTSTRAP, 3)),
    "publish commands": (
        kafka,
        "AIOKafkaProducer",
        lambda mp: kafka.publish_commands(BOOTSTRAP, []),
    ),
    "dead letters": (
        letters,
        "AIOKafkaConsumer",
        lambda mp: letters.dead_letters(BOOTSTRAP, "command", 5),
    ),
    "redrive": (letters, "AIOKafkaProducer", redriving),
    "lag": (operate, "AIOKafkaConsumer", measuring_lag),
    "lag's topics": (operate, "AIOKafkaAdminClient", lambda mp: operate._topics(BOOTSTRAP)),
    "lag's command group": (
        operate,
        "AIOKafkaAdminClient",
        lambda mp: operate._command_positions(BOOTSTRAP, "engram-command"),
    ),
}


@pytest.fixture
def journal() -> list[str]:
    return []


@pytest.mark.parametrize("task", TASKS)
async def test_a_client_whose_start_fails_is_closed(
    monkeypatch: pytest.MonkeyPatch, journal: list[str], task: str
) -> None:
    module, name, run = TASKS[task]
    monkeypatch.setattr(module, name, lambda *a, **k: Part(journal, "client", fails=True))
    with pytest.raises(StepFailed):
        await run(monkeypatch)
    assert journal == ["client closed"]


@pytest.mark.parametrize("task", TASKS)
async def test_a_client_cancelled_while_it_starts_is_closed(
    monkeypatch: pytest.MonkeyPatch, journal: list[str], task: str
) -> None:
    """As a writer's restore is when its partition is revoked during the start."""
    module, name, run = TASKS[task]
    monkeypatch.setattr(module, name, lambda *a, **k: Part(journal, "client", hangs=True))
    running = asyncio.ensure_future(run(monkeypatch))
    for _ in range(5):  # until the client's start waits
        await asyncio.sleep(0)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert journal == ["client closed"]


# --- a replay's two pools --------------------------------------------------------------


def pools(journal: list[str], *, shadow_fails: bool = False, live_breaks: bool = False) -> Any:
    """In place of ``create_pool``: the live database's pool, then the shadow's."""

    async def create_pool(dsn: str, **kwargs: object) -> Part:
        if dsn == "shadow" and shadow_fails:
            raise StepFailed("the shadow's pool does not open")
        return Breaking(journal, dsn) if live_breaks and dsn == "live" else Part(journal, dsn)

    return create_pool


async def test_a_replay_closes_its_live_pool_then_its_shadow_pool(
    monkeypatch: pytest.MonkeyPatch, journal: list[str]
) -> None:
    monkeypatch.setattr(shadow, "create_pool", pools(journal))
    async with shadow.live_and_shadow("live", "shadow"):
        pass
    assert journal == ["live closed", "shadow closed"]


async def test_a_replay_whose_shadow_pool_does_not_open_closes_its_live_pool(
    monkeypatch: pytest.MonkeyPatch, journal: list[str]
) -> None:
    monkeypatch.setattr(shadow, "create_pool", pools(journal, shadow_fails=True))
    with pytest.raises(StepFailed):
        async with shadow.live_and_shadow("live", "shadow"):
            pass
    assert journal == ["live closed"]


async def test_a_replay_whose_live_pool_fails_to_close_still_closes_its_shadow_pool(
    monkeypatch: pytest.MonkeyPatch, journal: list[str]
) -> None:
    monkeypatch.setattr(shadow, "create_pool", pools(journal, live_breaks=True))
    with pytest.raises(CloseFailed):
        async with shadow.live_and_shadow("live", "shadow"):
            pass
    assert journal == ["live close failed", "shadow closed"]
