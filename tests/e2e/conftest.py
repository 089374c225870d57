"""The five services as separate processes, started (or reused) once per session."""

from __future__ import annotations

import os
from collections.abc import Iterator

import psutil
import pytest

from engram.devstack import resolve_state, stack
from engram.devstack.services import SERVICES, SERVICES_BY_NAME, find_pid

COMMAND = "http://127.0.0.1:8081"
RECALL = "http://127.0.0.1:8085"


@pytest.fixture(scope="session")
def services(stack_settings: dict[str, str]) -> Iterator[dict[str, str]]:
    # A command service the tests start checkpoints often and keeps few streams in
    # memory, so the crash, restore and every command also run through the checkpoint
    # rows and the streams loaded back from them. (A running stack is reused as it is.)
    ours = {k: v for k, v in TEST_ONLY.items() if k not in os.environ}
    os.environ.update(ours)
    stack.start_services(ensure_infra=False)
    healthy = {p.name for p in stack.status() if p.healthy}
    missing = [s.name for s in SERVICES if s.name not in healthy]
    assert not missing, f"services not healthy: {missing}"
    yield {"command": COMMAND, "recall": RECALL}
    _drop_test_settings(ours)


# Settings only the tests want. The crash test restarts the command service with them,
# even on a stack that was running before; at the end that service is restarted without
# them, so a stack that outlives the tests does not keep checkpointing every 300 events.
TEST_ONLY = {"ENGRAM_COMMAND_CHECKPOINT_EVERY": "300", "ENGRAM_COMMAND_CACHED_ITEMS": "50"}


def _drop_test_settings(ours: dict[str, str]) -> None:
    for key in ours:
        del os.environ[key]
    pid = find_pid(resolve_state(), SERVICES_BY_NAME["command"])
    if pid is None:
        return
    try:
        running = psutil.Process(pid).environ()
    except psutil.Error:
        return
    if any(running.get(k) == v for k, v in ours.items()):
        stack.stop_services(None, ["command"])
        stack.start_services(None, ["command"], ensure_infra=False)
