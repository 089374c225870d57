"""Running a service: background tasks that stop the process when they fail.

A consumer loop that dies must not leave a process that answers health checks
while doing nothing: the failure is logged and the server shuts down, so a
supervisor (or the e2e test) sees it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Coroutine
from typing import Any

from engram.logging import get_logger

log = get_logger(__name__)


class StartupRefused(Exception):
    """A service cannot start, for a reason its operator can fix (a model not fetched)."""


def supervise(coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
    task = asyncio.create_task(coro, name=name)
    task.add_done_callback(_on_done)
    return task


def _on_done(task: asyncio.Task[None]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.error("background_task_failed", task=task.get_name(), error=repr(exc), exc_info=exc)
        os.kill(os.getpid(), signal.SIGTERM)


async def cancel(*tasks: asyncio.Task[Any] | None) -> None:
    for task in tasks:
        if task and not task.done():
            task.cancel()
    for task in tasks:
        if task:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
