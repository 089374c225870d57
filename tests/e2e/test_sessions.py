"""An operator sees in pg_stat_activity which service holds each Postgres session."""

from __future__ import annotations

import asyncpg
import pytest

from engram.db import application_name, named
from engram.devstack.services import SERVICES
from tests.support import eventually

pytestmark = pytest.mark.e2e


async def test_each_service_names_its_postgres_sessions(
    services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    expected = {f"engram-{s.name}" for s in SERVICES}

    async def named() -> set[str] | None:
        conn = await asyncpg.connect(stack_settings["DATABASE_URL"])
        try:
            rows = await conn.fetch("SELECT DISTINCT application_name FROM pg_stat_activity")
        finally:
            await conn.close()
        names = {r["application_name"] for r in rows}
        return names if expected <= names else None

    assert expected <= await eventually(named, what="a session named by each service")


def test_a_process_that_is_no_service_names_its_sessions_engram() -> None:
    assert application_name() == "engram"


def test_a_name_the_database_url_gives_wins() -> None:
    assert named("postgresql://u@h/db", {"timezone": "UTC"}) == {
        "application_name": "engram",
        "timezone": "UTC",
    }
    assert named("postgresql://u@h/db?application_name=ops", {"timezone": "UTC"}) == {
        "timezone": "UTC"
    }
