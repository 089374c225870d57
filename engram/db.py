"""Postgres plumbing: pool factory and the versioned migration runner.

Each service owns one schema and ships ``NNN_name.sql`` files in its ``sql/``
folder. Migrations run at start under an advisory lock, so replicas starting
together apply each file exactly once.

A file's checksum is recorded when it is applied, and a file that changed since
stops the start. An ``NNN_name.sql.accepts`` file beside it lists the checksums of
earlier published versions that a database may hold instead (one sha256 per line,
then why): versions that the migrations after it bring to the same schema.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import TypeAlias
from urllib.parse import parse_qs, urlsplit, urlunsplit

import asyncpg

from engram.logging import get_logger, process_service

log = get_logger(__name__)
# The handles a service's adapters give out and take back: the handlers and steps that
# pass them along name these and need not know the driver.
Connection: TypeAlias = asyncpg.Connection
Pool: TypeAlias = asyncpg.Pool
MIGRATION = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")
SHARED_SQL_DIR = Path(__file__).parent / "sql"


async def create_pool(
    dsn: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    reset: bool = False,
    settings: dict[str, str] | None = None,
) -> asyncpg.Pool:
    """A connection pool whose connections go back without asyncpg's reset statement
    (RESET ALL, UNLISTEN *, CLOSE ALL, advisory unlocks: one more round trip per use):
    Engram keeps no state in a session (every setting is local to a transaction, no
    LISTEN, no cursors or locks outside one). An open transaction is still rolled back.
    Pass ``reset=True`` for users that do keep session state. ``settings`` are the
    sessions' server settings; ``application_name`` names the service, so an operator
    sees in ``pg_stat_activity`` which service holds a session."""
    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        reset=None if reset else _keep_session,
        server_settings=named(dsn, settings),
    )
    assert pool is not None
    return pool


async def connect(dsn: str, *, timeout: float = 60) -> asyncpg.Connection:
    """One session, named as a pool's are (``named``)."""
    return await asyncpg.connect(dsn, timeout=timeout, server_settings=named(dsn))


def named(dsn: str, settings: dict[str, str] | None = None) -> dict[str, str]:
    """``settings`` with the session's ``application_name`` (``application_name()``),
    unless ``dsn`` names it: an operator's own name wins."""
    if "application_name" in parse_qs(urlsplit(dsn).query):
        return dict(settings or {})
    return {"application_name": application_name(), **(settings or {})}


def application_name() -> str:
    """``engram-<service>`` for a service's sessions, ``engram`` for the CLI's."""
    service = process_service()
    return service if service == "engram" else f"engram-{service}"


async def _keep_session(conn: asyncpg.Connection) -> None:
    """asyncpg has already rolled back an open transaction; nothing else to undo."""


def with_user(dsn: str, user: str) -> str:
    """The same database as ``dsn``, as another role (its password, if any, dropped)."""
    parts = urlsplit(dsn)
    host = parts.hostname or ""
    netloc = f"{user}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def migration_files(sql_dir: Path) -> list[Path]:
    return sorted(p for p in sql_dir.iterdir() if MIGRATION.match(p.name))


def accepted_checksums(path: Path) -> set[str]:
    """The earlier versions of a migration a database may have applied instead."""
    accepts = path.with_name(path.name + ".accepts")
    if not accepts.exists():
        return set()
    lines = (line.split("#", 1)[0].split() for line in accepts.read_text().splitlines())
    return {words[0] for words in lines if words}


async def apply_migrations(conn: asyncpg.Connection, owner: str, sql_dir: Path) -> list[str]:
    """Apply the owner's pending migrations in order; return the names applied."""
    applied: list[str] = []
    async with conn.transaction():
        # One lock for all owners: schemas may reference each other's roles.
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('engram.migrations'))")
        await conn.execute(
            """CREATE TABLE IF NOT EXISTS public.engram_migrations (
                 owner text NOT NULL, name text NOT NULL, checksum text NOT NULL,
                 applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (owner, name))"""
        )
        done = {
            r["name"]: r["checksum"]
            for r in await conn.fetch(
                "SELECT name, checksum FROM public.engram_migrations WHERE owner = $1", owner
            )
        }
        for path in migration_files(sql_dir):
            sql = path.read_text()
            checksum = hashlib.sha256(sql.encode()).hexdigest()
            if path.name in done:
                if done[path.name] not in {checksum, *accepted_checksums(path)}:
                    raise RuntimeError(
                        f"migration {owner}/{path.name} changed after it was applied"
                    )
                continue
            await conn.execute(sql)
            await conn.execute(
                "INSERT INTO public.engram_migrations (owner, name, checksum) VALUES ($1, $2, $3)",
                owner,
                path.name,
                checksum,
            )
            applied.append(path.name)
    if applied:
        log.info("migrations_applied", owner=owner, files=applied)
    return applied


async def migrate(dsn: str, owner: str, sql_dir: Path) -> list[str]:
    conn = await connect(dsn)
    try:
        return await apply_migrations(conn, owner, sql_dir)
    finally:
        await conn.close()


async def migrate_shared(dsn: str) -> list[str]:
    """The shared package's tables (key store, AI budget), which every service's come after."""
    return await migrate(dsn, "engram", SHARED_SQL_DIR)


def load_queries(path: Path) -> dict[str, str]:
    """Named queries from a ``.sql`` file: each starts with a ``-- name: <name>`` line."""
    queries: dict[str, str] = {}
    name: str | None = None
    lines: list[str] = []
    for line in [*path.read_text().splitlines(), "-- name: <end>"]:
        if line.startswith("-- name:"):
            if name:
                queries[name] = "\n".join(lines).strip()
            name, lines = line.split(":", 1)[1].strip(), []
        elif name:
            lines.append(line)
    return queries
