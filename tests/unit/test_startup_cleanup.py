"""A service whose start fails at a later step closes what the earlier steps opened (in
reverse order, background tasks cancelled first) before the error goes on; a normal stop
closes in the same order as before. No infrastructure: every pool, producer, consumer,
client and pruner is a fake that notes in a journal when it is closed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import date
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from fastapi import FastAPI
from structlog.testing import capture_logs

from engram import log_pruner, tracking
from engram.embeddings.settings import EmbeddingSettings
from engram.settings import CommonSettings
from services.command import app as command_app
from services.command.adapters import processor, projection, replies
from services.command.settings import CommandSettings
from services.extractor import app as extractor_app
from services.extractor.adapters import commands
from services.extractor.settings import ExtractorSettings
from services.indexer import app as indexer_app
from services.indexer.settings import IndexerSettings
from services.projector import app as projector_app
from services.projector.settings import ProjectorSettings
from services.recall import app as recall_app
from services.recall.settings import RecallSettings

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


class StepFailed(Exception):
    """The startup step a test makes fail."""


class CloseFailed(Exception):
    """The closing a test makes fail, after a failed step."""


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


class Client(Part):
    """A Kafka client: a second stop does nothing, as aiokafka's."""

    stopped = False

    async def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            await super().stop()

    close = stop


class Breaking(Part):
    """A client whose start fails, and whose stop then fails too."""

    async def stop(self) -> None:
        self.journal.append(f"{self.name} close failed")
        raise CloseFailed(f"{self.name} does not close")

    close = stop


class Processor(Part):
    """The command processor: its consumer is made in its constructor and stopped when its
    run ends."""

    def __init__(self, journal: list[str], name: str) -> None:
        super().__init__(journal, name)
        self._consumer = Client(journal, f"{name}'s consumer")

    async def close(self) -> None:
        await self._consumer.stop()

    async def run(self, *args: object) -> None:
        try:
            await forever()
        finally:
            await self._consumer.stop()


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


# --- command ---------------------------------------------------------------------------


def stub_command(mp: pytest.MonkeyPatch, journal: list[str], fails: str = "") -> Lifespan:
    m = command_app
    mp.setattr(m, "migrate_shared", nothing)
    mp.setattr(m, "migrate", nothing)
    mp.setattr(m, "create_pool", opener(journal, "pool"))
    mp.setattr(m, "load_master_key", lambda common: bytes(32))
    mp.setattr(m, "TokenVerifier", lambda common: object())
    mp.setattr(m, "partition_count", failing("topics") if fails == "topics" else three)
    mp.setattr(m, "ProjectionWatch", maker(journal, "projection", fails == "projection"))
    mp.setattr(m, "CommandProcessor", lambda *args: Processor(journal, "processor"))
    mp.setattr(m, "CommandGateway", maker(journal, "gateway", fails == "gateway"))
    mp.setattr(m, "GroupLogPruner", maker(journal, "pruner", fails == "pruner"))
    supervised(mp, m, journal)
    return m._lifespan(CommandSettings(), CommonSettings())


@pytest.mark.parametrize(
    ("fails", "closed"),
    [
        ("topics", ["pool closed"]),
        ("projection", ["pool closed"]),
        ("gateway", ["processor's consumer closed", "projection closed", "pool closed"]),
        (
            "pruner",
            ["gateway closed", "processor's consumer closed", "projection closed", "pool closed"],
        ),
    ],
)
async def test_the_command_service_closes_what_a_failed_start_opened(
    monkeypatch: pytest.MonkeyPatch, journal: list[str], fails: str, closed: list[str]
) -> None:
    with pytest.raises(StepFailed):
        await start_and_stop(stub_command(monkeypatch, journal, fails))
    assert journal == closed


async def test_the_command_service_stops_in_the_order_it_always_did(
    monkeypatch: pytest.MonkeyPatch, journal: list[str]
) -> None:
    """The processor's run stops its consumer as the tasks end, before the parts close;
    the lifespan's own stop of it then does nothing (no second close)."""
    async with stub_command(monkeypatch, journal)(FastAPI()):
        await asyncio.sleep(0)  # the processor runs
    ended = ["command-pruner cancelled", "command-processor cancelled"]
    assert sorted(journal[:3]) == sorted([*ended, "processor's consumer closed"])
    assert journal[3:] == ["pruner closed", "gateway closed", "projection closed", "pool closed"]


async def test_the_command_service_stopped_before_its_processor_ran_closes_its_consumer(
    monkeypatch: pytest.MonkeyPatch, journal: list[str]
) -> None:
    await start_and_stop(stub_command(monkeypatch, journal))
    assert_stopped(
        journal,
        ["command-pruner", "command-processor"],
        ["pruner", "gateway", "processor's consumer", "projection", "pool"],
    )


# --- extractor -------------------------------------------------------------------------


def stub_extractor(mp: pytest.MonkeyPatch, journal: list[str], fails: str = "") -> Lifespan:
    m = extractor_app
    mp.setattr(m, "migrate_shared", nothing)
    mp.setattr(m, "migrate", nothing)
    mp.setattr(m, "create_pool", opener(journal, "pool"))
    mp.setattr(m, "CommandPublisher", maker(journal, "publisher", fails == "publisher"))
    mp.setattr(m, "httpx", SimpleNamespace(AsyncClient=maker(journal, "client")))
    key = failing("master key") if fails == "master key" else (lambda common: bytes(32))
    mp.setattr(m, "load_master_key", key)
    mp.setattr(m, "rehash_sources", failing("sources") if fails == "sources" else nothing)
    mp.setattr(m, "TokenVerifier", lambda common: object())
    mp.setattr(m, "TrackedFollower", maker(journal, "follower"))
    mp.setattr(m, "TableLogPruner", maker(journal, "pruner", fails == "pruner"))
    supervised(mp, m, journal)
    return m._lifespan(ExtractorSettings(), CommonSettings(), lambda: date(2026, 1, 1))


OPENED_BY_THE_EXTRACTOR = ["client closed", "publisher closed", "pool closed"]
FOLLOWERS_CANCELLED = ["extractor-turns cancelled", "extractor-events cancelled"]


@pytest.mark.parametrize(
    ("fails", "closed"),
    [
        ("publisher", ["pool closed"]),
        ("master key", OPENED_BY_THE_EXTRACTOR),
        ("sources", OPENED_BY_THE_EXTRACTOR),
        ("pruner", FOLLOWERS_CANCELLED + OPENED_BY_THE_EXTRACTOR),
    ],
)
async def test_the_extractor_closes_what_a_failed_start_opened(
    monkeypatch: pytest.MonkeyPatch, journal: list[str], fails: str, closed: list[str]
) -> None:
    with pytest.raises(StepFailed):
        await start_and_stop(stub_extractor(monkeypatch, journal, fails))
    assert journal == closed


async def test_the_extractor_stops_in_the_order_it_always_did(
    monkeypatch: pytest.MonkeyPatch, journal: list[str]
) -> None:
    """Every task (the followers' and the pruning) before the pruner, as before."""
    await start_and_stop(stub_extractor(monkeypatch, journal))
    assert_stopped(
        journal,
        ["extractor-turns", "extractor-events", "extractor-pruner"],
        ["pruner", "client", "publisher", "pool"],
    )


# --- projector -------------------------------------------------------------------------


def stub_projector(mp: pytest.MonkeyPatch, journal: list[str], fails: str = "") -> Lifespan:
    m = projector_app
    mp.setattr(m, "migrate_shared", nothing)
    mp.setattr(m, "migrate", nothing)
    mp.setattr(m, "create_pool", opener(journal, "pool"))
    key = failing("master key") if fails == "master key" else (lambda common: bytes(32))
    mp.setattr(m, "load_master_key", key)
    mp.setattr(m, "PreparingFollower", maker(journal, "follower"))
    mp.setattr(m, "vacuum_deltas", lambda *args: forever())
    supervised(mp, m, journal)
    return m._lifespan(ProjectorSettings(), CommonSettings())


async def test_the_projector_closes_its_pool_when_its_master_key_is_missing(
    monkeypatch: pytest.MonkeyPatch, journal: list[str]
) -> None:
    with pytest.raises(StepFailed):
        await start_and_stop(stub_projector(monkeypatch, journal, "master key"))
    assert journal == ["pool closed"]


async def test_the_projector_stops_in_the_order_it_always_did(
    monkeypatch: pytest.MonkeyPatch, journal: list[str]
) -> None:
    await start_and_stop(stub_projector(monkeypatch, journal))
    assert_stopped(journal, ["projector-follower", "projector-deltas-vacuum"], ["pool"])


# --- indexer ---------------------------------------------------------------------------


def stub_indexer(mp: pytest.MonkeyPatch, journal: list[str], fails: str = "") -> Lifespan:
    m = indexer_app
    mp.setattr(m, "migrate_shared", nothing)
    mp.setattr(m, "migrate", nothing)
    mp.setattr(m, "create_vector_pool", opener(journal, "pool"))
    mp.setattr(m, "open_provider", entered(journal, "provider", fails == "provider"))
    mp.setattr(m, "_ensure_model", failing("model") if fails == "model" else nothing)
    key = failing("master key") if fails == "master key" else (lambda common: bytes(32))
    mp.setattr(m, "load_master_key", key)
    mp.setattr(m, "PreparingFollower", maker(journal, "follower"))
    mp.setattr(m, "reindex_loop", lambda *args: forever())
    supervised(mp, m, journal)
    settings = IndexerSettings(reindex_on_start=True)
    return m._lifespan(settings, CommonSettings(), EmbeddingSettings())


@pytest.mark.parametrize(
    ("fails", "closed"),
    [
        ("provider", ["pool closed"]),
        ("model", ["provider closed", "pool closed"]),
        ("master key", ["provider closed", "pool closed"]),
    ],
)
async def test_the_indexer_closes_what_a_failed_start_opened(
    monkeypatch: pytest.MonkeyPatch, journal: list[str], fails: str, closed: list[str]
) -> None:
    with pytest.raises(StepFailed):
        await start_and_stop(stub_indexer(monkeypatch, journal, fails))
    assert journal == closed


async def test_the_indexer_stops_in_the_order_it_always_did(
    monkeypatch: pytest.MonkeyPatch, journal: list[str]
) -> None:
    await start_and_stop(stub_indexer(monkeypatch, journal))
    assert_stopped(journal, ["indexer-follower", "indexer-reindex"], ["provider", "pool"])


# --- recall ----------------------------------------------------------------------------


def stub_recall(mp: pytest.MonkeyPatch, journal: list[str], fails: str = "") -> Lifespan:
    m = recall_app
    mp.setattr(m, "_migrate", nothing)
    mp.setattr(m, "create_pool", opener(journal, "pool"))
    mp.setattr(m, "open_embedder", entered(journal, "embedder", fails == "embedder"))
    verifier = failing("tokens") if fails == "tokens" else (lambda common: object())
    mp.setattr(m, "TokenVerifier", verifier)
    return m._lifespan(RecallSettings(), CommonSettings(), EmbeddingSettings())


@pytest.mark.parametrize(
    ("fails", "closed"),
    [("embedder", ["pool closed"]), ("tokens", ["embedder closed", "pool closed"])],
)
async def test_recall_closes_what_a_failed_start_opened(
    monkeypatch: pytest.MonkeyPatch, journal: list[str], fails: str, closed: list[str]
) -> None:
    with pytest.raises(StepFailed):
        await start_and_stop(stub_recall(monkeypatch, journal, fails))
    assert journal == closed


async def test_recall_stops_in_the_order_it_always_did(
    monkeypatch: pytest.MonkeyPatch, journal: list[str]
) -> None:
    await start_and_stop(stub_recall(monkeypatch, journal))
    assert_stopped(journal, [], ["embedder", "pool"])


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


def assert_cleanup_logged(logs: Sequence[Mapping[str, Any]], part: str) -> None:
    [logged] = [entry for entry in logs if entry["event"] == "cleanup_failed"]
    assert logged["part"] == part and "CloseFailed" in logged["error"]


async def test_a_gateway_whose_cleanup_fails_too_raises_why_its_start_failed(
    monkeypatch: pytest.MonkeyPatch, journal: list[str]
) -> None:
    """The consumer's failed close is logged; the producer is closed all the same."""
    monkeypatch.setattr(replies, "AIOKafkaProducer", maker(journal, "producer"))
    monkeypatch.setattr(
        replies, "consumer", lambda *args: Breaking(journal, "consumer", fails=True)
    )
    with capture_logs() as logs, pytest.raises(StepFailed):
        await replies.CommandGateway("kafka:9092").start()
    assert journal == ["consumer close failed", "producer closed"]
    assert_cleanup_logged(logs, "command_gateway")


async def test_a_pruner_whose_cleanup_fails_too_raises_why_its_start_failed(
    journal: list[str],
) -> None:
    """The producer's failed close is logged; the admin client is closed all the same."""

    class Pruner(log_pruner.LogPruner):
        async def committed(self, partitions: list[int]) -> dict[int, int]:
            return {}

    admin, producer = Part(journal, "admin"), Breaking(journal, "producer", fails=True)
    with capture_logs() as logs, pytest.raises(StepFailed):
        await Pruner("kafka:9092", "topic", kafka=(admin, producer)).start()
    assert journal == ["producer close failed", "admin closed"]
    assert_cleanup_logged(logs, "log_pruner")


async def test_a_projection_watch_whose_cleanup_fails_too_raises_why_its_start_failed(
    monkeypatch: pytest.MonkeyPatch, journal: list[str]
) -> None:
    monkeypatch.setattr(projection, "consumer", lambda *a, **k: Breaking(journal, "w", fails=True))
    with capture_logs() as logs, pytest.raises(StepFailed):
        await projection.ProjectionWatch(object(), "kafka:9092", group="g").start()
    assert journal == ["w close failed"]
    assert_cleanup_logged(logs, "projection_watch")


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
