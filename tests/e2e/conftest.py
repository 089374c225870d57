"""The five services as separate processes, started (or reused) once per session."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from engram.devstack import stack
from engram.devstack.services import SERVICES

COMMAND = "http://127.0.0.1:8081"
RECALL = "http://127.0.0.1:8085"


@pytest.fixture(scope="session")
def services(stack_settings: dict[str, str]) -> Iterator[dict[str, str]]:
    # A command service the tests start checkpoints often and keeps few streams in
    # memory, so the crash, restore and every command also run through the checkpoint
    # rows and the streams loaded back from them. (A running stack is reused as it is.)
    os.environ.setdefault("ENGRAM_COMMAND_CHECKPOINT_EVERY", "300")
    os.environ.setdefault("ENGRAM_COMMAND_CACHED_ITEMS", "50")
    stack.start_services(ensure_infra=False)
    healthy = {p.name for p in stack.status() if p.healthy}
    missing = [s.name for s in SERVICES if s.name not in healthy]
    assert not missing, f"services not healthy: {missing}"
    yield {"command": COMMAND, "recall": RECALL}
