"""A replay's shadow database: made anew under a name it checks, and only a shadow an
earlier replay made is dropped to make it (a QA pass found `--into` dropping any
database of that name, the live one included)."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from services.projector.replay import ShadowError, recreate_database

pytestmark = pytest.mark.integration


async def test_only_a_replays_own_shadow_is_dropped(stack_settings: dict[str, str]) -> None:
    live = stack_settings["DATABASE_URL"]
    owner = await asyncpg.connect(live)
    theirs = f"not_a_shadow_{uuid.uuid4().hex[:8]}"
    ours = f"shadow_{uuid.uuid4().hex[:8]}"
    try:
        await owner.execute(f'CREATE DATABASE "{theirs}"')
        with pytest.raises(ShadowError, match="no replay made it"):
            await recreate_database(live, theirs)
        assert (
            await owner.fetchval("SELECT count(*) FROM pg_database WHERE datname = $1", theirs) == 1
        )  # still there
        live_name = await owner.fetchval("SELECT current_database()")
        with pytest.raises(ShadowError, match="no replay made it"):
            await recreate_database(live, live_name)
        for bad in ("", "Engram", "a-b", "x" * 64, "db?x=1"):
            with pytest.raises(ShadowError, match="lowercase letters"):
                await recreate_database(live, bad)
        await recreate_database(live, ours)
        await recreate_database(live, ours)  # its own shadow: made anew
    finally:
        for name in (theirs, ours):
            await owner.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await owner.close()
