"""Crash safety: in the middle of a stream of 10,000 commands, kill -9 the command
service and the projector (and restart them), or one of Postgres's sessions (the database
recovers on its own), or the Kafka broker (and restart it); every accepted command's
events appear exactly once, each stream's seq is gapless, and the read model equals a
replay."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import uuid
from collections import Counter, defaultdict
from pathlib import Path

import asyncpg
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from contracts import topics
from contracts.envelope import CommandEnvelope, EventEnvelope
from engram.crypto import MasterKey, load_master_key
from engram.devstack import KAFKA_CONTROLLER_PORT, KAFKA_PORT, resolve_state, stack
from engram.devstack import kafka as devkafka
from engram.devstack import postgres as devpostgres
from engram.devstack import services as devservices
from engram.devstack.processes import port_open, process_alive
from engram.kafka import partition_count
from engram.settings import CommonSettings
from services.command.core import new_item_id
from services.projector.replay import replay
from tests.conftest import caller
from tests.support import eventually, read_replies, send_commands, shadow_database

pytestmark = pytest.mark.e2e
TOTAL = 10_000
STREAMS = 32


def commands(org: str) -> list[CommandEnvelope]:
    """Remembers, and every fifth command corrects an item remembered earlier."""
    people = [caller(org, member=f"m{i}") for i in range(STREAMS)]
    made: list[tuple[int, str]] = []
    out: list[CommandEnvelope] = []
    for n in range(TOTAL):
        i = n % STREAMS
        command_id = f"crash-{org}-{n}"
        if n % 5 == 4 and made:
            who, item = made.pop(0)
            payload = {"item_id": item, "base_revision": 1, "content": f"corrected {n}"}
            i, kind = who, "CorrectMemory"
        else:
            payload, kind = {"content": f"fact {n} of m{i}", "kind": "fact"}, "RememberMemory"
            made.append((i, new_item_id(f"{org}/member:m{i}", command_id)))
        out.append(
            CommandEnvelope(
                command_id=command_id,
                type=kind,
                token=people[i].token,
                stream_id=f"{org}/member:m{i}",
                payload=payload,
            )
        )
    return out


async def kill9(name: str) -> None:
    spec = devservices.SERVICES_BY_NAME[name]
    pid = devservices.find_pid(resolve_state(), spec)
    assert pid, f"{name} is not running"
    os.kill(pid, signal.SIGKILL)

    async def dead() -> bool:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reap it if this process started it
        return not process_alive(pid)

    await eventually(dead, deadline=10, what=f"{name} (pid {pid}) gone")


async def org_events(bootstrap: str, org: str) -> list[EventEnvelope]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False
    )
    await consumer.start()
    found: list[EventEnvelope] = []
    try:
        tps = [
            TopicPartition(topics.EVENTS, p)
            for p in range(await partition_count(bootstrap, topics.EVENTS))
        ]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        prefix = f"{org}/".encode()
        for tp in tps:
            while await consumer.position(tp) < ends[tp]:
                for r in (await consumer.getmany(tp, timeout_ms=500, max_records=5000)).get(tp, []):
                    if (r.key or b"").startswith(prefix):
                        found.append(EventEnvelope.model_validate_json(r.value or b""))
        return found
    finally:
        await consumer.stop()


async def crash_services() -> None:
    """kill -9 the command service and the projector, then start them again."""
    await kill9("command")
    await kill9("projector")
    await asyncio.to_thread(
        stack.start_services, None, ["command", "projector"], ensure_infra=False
    )


async def crash_postgres(dsn: str) -> None:
    """kill -9 one of the database's sessions: the postmaster then ends every session and
    recovers from its WAL, as after a crash. Nothing is restarted by hand; every service
    must find its way back on its own."""
    conn = await asyncpg.connect(dsn)
    try:
        pid = await conn.fetchval(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' "
            "AND datname = current_database() AND pid <> pg_backend_pid() "
            "ORDER BY backend_start LIMIT 1"
        )
    finally:
        await conn.close()
    assert pid, "no other session to kill"
    # The session's pid is a pid of this machine only when the database is the dev stack's
    # (not a container's, nor another host's): the postmaster must be its parent.
    postmaster = devpostgres.find_pid(resolve_state())
    assert postmaster is not None and _parent(pid) == postmaster, (
        f"session {pid} is not the dev stack's Postgres's: this crash needs the dev stack"
    )
    os.kill(pid, signal.SIGKILL)
    await eventually(lambda: _answers(dsn), deadline=60, what="Postgres back after its crash")


async def crash_kafka() -> None:
    """kill -9 the broker and start it again on the same log folder."""
    paths = resolve_state()
    pid = devkafka.find_pid(paths)
    assert pid, "the broker is not running"
    os.kill(pid, signal.SIGKILL)
    # Gone once its ports are closed too: a start meanwhile would take them for another
    # program's and refuse.
    await eventually(lambda: _gone(pid), deadline=30, what=f"broker (pid {pid}) gone")
    await devkafka.start(paths, timeout=180, progress=lambda _: None)


@pytest.mark.parametrize("crash", ["services", "postgres", "kafka"])
async def test_kill_9_mid_stream_loses_and_duplicates_nothing(
    crash: str, services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    bootstrap, dsn = stack_settings["KAFKA_BOOTSTRAP_SERVERS"], stack_settings["DATABASE_URL"]
    org = f"crash-{uuid.uuid4().hex[:8]}"
    envelopes = commands(org)
    publishing = asyncio.create_task(send_commands(bootstrap, envelopes))
    if crash == "services":  # twice, at different points, while commands still arrive
        for fraction in (0.15, 0.55):
            await _until_applied(dsn, org, int(TOTAL * 0.8 * fraction))
            await crash_services()
        await publishing
    else:  # the commands are in the log before the broker or the database goes down
        await publishing
        await _until_applied(dsn, org, int(TOTAL * 0.8 * 0.3))
        await (crash_postgres(dsn) if crash == "postgres" else crash_kafka())
    replies = await read_replies(bootstrap, {e.command_id for e in envelopes}, deadline=300)

    answered = {cid: r for cid, r in replies.items() if r}
    assert len(answered) == TOTAL, f"{TOTAL - len(answered)} commands got no answer"
    accepted = {cid for cid, r in answered.items() if r[0].ok}
    rejected = [r[0].rejection for r in answered.values() if not r[0].ok]
    assert not rejected, rejected[:3]

    events = await org_events(bootstrap, org)
    per_command = Counter(e.command_id for e in events)
    assert set(per_command) == accepted
    assert all(n == 1 for n in per_command.values()), per_command.most_common(3)
    seqs: dict[str, list[int]] = defaultdict(list)
    for e in events:
        seqs[e.stream_id].append(e.seq)
    for stream, got in seqs.items():
        assert sorted(got) == list(range(1, len(got) + 1)), f"{stream} is not gapless"

    await _until_applied(dsn, org, len(events), deadline=120, what="the projector caught up")
    common = CommonSettings()
    async with shadow_database(common.database_url, f"engram_crash_{org[-8:]}") as shadow:
        report = await replay(
            common.database_url,
            shadow,
            bootstrap,
            MasterKey(load_master_key(common)),
            org_pattern=org,
        )
    assert report.events == len(events)
    assert report.matches, "the read model differs from a fresh replay of the log"


async def _until_applied(dsn: str, org: str, n: int, deadline: float = 180, what: str = "") -> None:
    await eventually(
        functools.partial(_applied_at_least, dsn, org, n),
        deadline=deadline,
        interval=0.02,
        what=what or f"{n} events applied",
    )


async def _applied_at_least(dsn: str, org: str, n: int) -> bool:
    return (await _applied(dsn, org) or 0) >= n


async def _applied(dsn: str, org: str) -> int | None:
    """How many of the org's events are applied; None while the database cannot answer
    (it is recovering from a crash)."""
    try:
        conn = await asyncpg.connect(dsn, timeout=5)
    except (TimeoutError, OSError, asyncpg.PostgresError):
        return None
    try:
        return int(await conn.fetchval("SELECT count(*) FROM memory.audit WHERE org = $1", org))
    except (OSError, asyncpg.PostgresError):
        return None
    finally:
        with contextlib.suppress(Exception):
            await conn.close()


async def _answers(dsn: str) -> bool:
    return await _applied(dsn, "") is not None


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rpartition(")")[2].split()[1])  # the field after the state


async def _gone(pid: int) -> bool:
    if process_alive(pid):
        return False
    return not any([await port_open(p) for p in (KAFKA_PORT, KAFKA_CONTROLLER_PORT)])
