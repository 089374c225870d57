"""An indexer with no model reads the log only once a vector is stored (idle.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import asyncpg
import pytest
from prometheus_client import REGISTRY

from services.indexer.idle import Idle


def answers(*replies: bool | Exception) -> tuple[Callable[[], Awaitable[bool]], list[int]]:
    """A vectors question answering ``replies`` in turn; the list counts the looks."""
    looks: list[int] = []

    async def any_vectors() -> bool:
        reply = replies[len(looks)]
        looks.append(1)
        if isinstance(reply, Exception):
            raise reply
        return reply

    return any_vectors, looks


async def test_with_a_model_it_reads_at_once_without_looking() -> None:
    look, looks = answers()
    idle = Idle(True, look, every_s=60)
    assert not idle.idle
    async with asyncio.timeout(1):
        await idle.wait()
    assert looks == []


async def test_without_a_model_it_waits_until_a_vector_is_stored() -> None:
    look, looks = answers(False, False, True)
    idle = Idle(False, look, every_s=0.001)
    assert idle.idle
    async with asyncio.timeout(5):
        await idle.wait()
    assert (len(looks), idle.idle) == (3, False)
    assert REGISTRY.get_sample_value("engram_indexer_idle") == 0


async def test_it_stays_idle_while_nothing_is_stored() -> None:
    look, looks = answers(*[False] * 1000)
    idle = Idle(False, look, every_s=0.001)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.1):
            await idle.wait()
    assert idle.idle
    assert len(looks) > 1  # it looked again, period after period
    assert REGISTRY.get_sample_value("engram_indexer_idle") == 1


async def test_a_fault_of_the_moment_is_a_look_that_found_nothing() -> None:
    starting = asyncpg.CannotConnectNowError("the database system is starting up")
    look, looks = answers(starting, False, True)
    idle = Idle(False, look, every_s=0.001)
    async with asyncio.timeout(5):
        await idle.wait()
    assert (len(looks), idle.idle) == (3, False)


async def test_any_other_error_is_not_swallowed() -> None:
    look, _ = answers(asyncpg.UndefinedTableError('relation "indexer.vectors" does not exist'))
    with pytest.raises(asyncpg.UndefinedTableError):
        await Idle(False, look, every_s=0.001).wait()
