"""The migration runner on real Postgres: a migration changed after it was applied stops
the start, unless its ``.accepts`` file names the version the database holds."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

import asyncpg
import pytest

from engram.db import apply_migrations
from tests.support import shadow_database

pytestmark = pytest.mark.integration

FIRST = "CREATE TABLE t (a integer);\n"
LATER = "CREATE TABLE IF NOT EXISTS t (a integer);\n"


async def _migrate(dsn: str, sql_dir: Path) -> list[str]:
    conn = await asyncpg.connect(dsn)
    try:
        return await apply_migrations(conn, "scratch", sql_dir)
    finally:
        await conn.close()


async def test_a_changed_migration_is_refused_unless_its_earlier_version_is_accepted(
    stack_settings: dict[str, str], tmp_path: Path
) -> None:
    migration = tmp_path / "001_t.sql"
    migration.write_text(FIRST)
    name = f"migrations_{uuid.uuid4().hex[:8]}"
    async with shadow_database(stack_settings["DATABASE_URL"], name) as dsn:
        assert await _migrate(dsn, tmp_path) == ["001_t.sql"]

        migration.write_text(LATER)
        with pytest.raises(RuntimeError, match=r"001_t\.sql changed after it was applied"):
            await _migrate(dsn, tmp_path)

        first = hashlib.sha256(FIRST.encode()).hexdigest()
        (tmp_path / "001_t.sql.accepts").write_text(
            f"# earlier versions\n{first}  # the first version, without IF NOT EXISTS\n"
        )
        assert await _migrate(dsn, tmp_path) == []  # accepted, nothing to apply again

        (tmp_path / "002_u.sql").write_text("CREATE TABLE u (b integer);\n")
        assert await _migrate(dsn, tmp_path) == ["002_u.sql"]  # and later files still run
