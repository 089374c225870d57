"""The five services as separate processes, started (or reused) once per session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engram.devstack import stack
from engram.devstack.services import SERVICES

COMMAND = "http://127.0.0.1:8081"
RECALL = "http://127.0.0.1:8085"


@pytest.fixture(scope="session")
def services(stack_settings: dict[str, str]) -> Iterator[dict[str, str]]:
    stack.start_services(ensure_infra=False)
    healthy = {p.name for p in stack.status() if p.healthy}
    missing = [s.name for s in SERVICES if s.name not in healthy]
    assert not missing, f"services not healthy: {missing}"
    yield {"command": COMMAND, "recall": RECALL}
