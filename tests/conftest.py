"""Session fixtures: the real stack, and clients for its services.

Connection settings come from KAFKA_BOOTSTRAP_SERVERS / DATABASE_URL when given;
otherwise testcontainers when a Docker engine answers; otherwise the launcher
starts (or reuses) Kafka and Postgres. If the stack cannot start, the run fails
with the reason; it never skips.
"""

from __future__ import annotations

import asyncio
import copy
import os
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from engram.auth import dev_secret, mint_token
from engram.embeddings import providers
from engram.embeddings.providers import LocalProvider
from engram.settings import CommonSettings
from engram.setup import setup


def _docker_reachable() -> bool:
    try:
        import docker

        docker.from_env(timeout=2).ping()
    except Exception:
        return False
    return True


def _containers() -> Iterator[dict[str, str]]:
    """The Docker path (untested on machines without an engine)."""
    from testcontainers.kafka import KafkaContainer
    from testcontainers.postgres import PostgresContainer

    with (
        KafkaContainer("apache/kafka:4.1.1").with_kraft() as kafka,
        PostgresContainer(
            "pgvector/pgvector:pg17", username="postgres", password="postgres", dbname="engram"
        ) as pg,
    ):
        yield {
            "KAFKA_BOOTSTRAP_SERVERS": kafka.get_bootstrap_server(),
            "DATABASE_URL": pg.get_connection_url(driver=None),
        }


@pytest.fixture
def unused_port() -> int:
    """A local TCP port nothing listens on (bound once, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def stack_settings() -> Iterator[dict[str, str]]:
    given = {
        k: os.environ[k] for k in ("KAFKA_BOOTSTRAP_SERVERS", "DATABASE_URL") if os.environ.get(k)
    }
    if len(given) == 2:
        settings, source = given, "given settings"
    elif _docker_reachable():
        gen = _containers()
        settings, source = next(gen), "testcontainers"
    else:
        from engram.devstack import stack

        settings, source = stack.up_infra(), "engram dev stack"
    os.environ.update(settings)
    asyncio.run(setup(CommonSettings()))
    print(f"\nstack ({source}): {settings}")
    yield settings


@pytest.fixture(scope="session")
def local_model() -> LocalProvider:
    """The local embedding model, loaded once a session: each load hashes 34 MB and builds
    an ONNX session. Its vectors depend only on the texts of one run, never on earlier
    runs, so the tests that read it can share it."""
    return LocalProvider()


@pytest.fixture
def opened_local_model(local_model: LocalProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    """``open_provider`` (a service's or the CLI's way to the model) hands out the session's
    model, with the batch size it asks for, instead of loading one of its own."""

    def loaded(batch_size: int = 32) -> LocalProvider:
        if batch_size == local_model._batch:
            return local_model
        twin = copy.copy(local_model)  # the same session and lock: still one run at a time
        twin._batch = batch_size
        return twin

    monkeypatch.setattr(providers, "LocalProvider", loaded)


@dataclass(frozen=True)
class Caller:
    org: str
    member: str
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def caller(
    org: str | None = None,
    member: str = "ana",
    roles: tuple[str, ...] = (),
    agent: str | None = None,
    session: str | None = None,
    project: str | None = None,
    fork_of: str | None = None,
    person: bool = False,
) -> Caller:
    org = org or f"org-{uuid.uuid4().hex[:8]}"
    return Caller(
        org,
        member,
        mint_token(
            dev_secret(),
            org=org,
            member=member,
            roles=roles,
            agent=agent,
            session=session,
            project=project,
            fork_of=fork_of,
            person=person,
        ),
    )


@pytest.fixture
def new_caller() -> type[Caller] | object:
    return caller
