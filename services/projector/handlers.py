"""The projector's batch handler: decode -> guard -> open -> core.project -> SQL."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
from aiokafka import TopicPartition
from pydantic import ValidationError

from contracts.envelope import EventEnvelope
from contracts.events import Event, MemoryForgotten, Sealed, parse_event
from engram.crypto import open_sealed
from engram.db import load_queries
from engram.keystore import KeyStore, shred
from engram.logging import get_logger
from services.projector.core import Opened, org_scope, project, revision_of, touches_active

log = get_logger(__name__)
Q = load_queries(Path(__file__).parent / "sql" / "queries.sql")


DeadLetter = Callable[[Any, str], Awaitable[None]]


class EventProjector:
    def __init__(self, keystore: KeyStore, dead_letter: DeadLetter) -> None:
        self._keys = keystore
        self._dead_letter_one = dead_letter
        self.anomalies = 0

    async def handle_batch(
        self, conn: asyncpg.Connection, tp: TopicPartition, records: list[Any]
    ) -> None:
        decoded = [(r, *self._decode(r)) for r in records]
        await self._dead_letter([(r, err) for r, _, _, err in decoded if err])
        good = [(r, env, ev) for r, env, ev, err in decoded if not err]
        keys = await self._keys.get_many({s.key_id for _, _, ev in good for s in _sealed(ev)})
        heads = {
            r["stream_id"]: r["seq"]
            for r in await conn.fetch(Q["heads"], list({env.stream_id for _, env, _ in good}))
        }
        for record, env, event in good:
            if await self._guard(conn, record, env, heads):
                await self._apply(conn, env, event, keys)
        for stream, seq in heads.items():
            await conn.execute(Q["set_head"], stream, seq)

    def _decode(self, record: Any) -> tuple[EventEnvelope | None, Event | None, str | None]:
        try:
            env = EventEnvelope.model_validate_json(record.value or b"")
            return env, parse_event(env.type, env.schema_version, env.payload), None
        except (ValidationError, KeyError, ValueError) as exc:
            return None, None, f"undecodable event: {exc}"

    async def _dead_letter(self, poison: list[tuple[Any, str | None]]) -> None:
        for record, error in poison:
            await self._dead_letter_one(record, error or "poison")

    async def _guard(
        self, conn: asyncpg.Connection, record: Any, env: EventEnvelope, heads: dict[str, int]
    ) -> bool:
        """Apply each (stream_id, seq) once; report gaps and conflicting duplicates."""
        org, scope = org_scope(env.stream_id)
        inserted = await conn.fetchval(
            Q["audit"],
            env.stream_id,
            env.seq,
            env.event_id,
            env.type,
            env.payload.get("item_id", ""),
            org,
            scope,
            env.payload.get("revision"),
            env.actor.model_dump_json(),
            env.command_id,
            env.occurred_at,
        )
        if inserted is None:
            if await conn.fetchval(Q["audit_at"], env.stream_id, env.seq) != env.event_id:
                await self._anomaly(conn, "conflicting_duplicate", record, env, None)
            return False  # already applied: a replayed batch converges
        expected = heads.get(env.stream_id, 0) + 1
        if env.seq != expected:
            await self._anomaly(conn, "gap", record, env, expected)
        heads[env.stream_id] = max(env.seq, heads.get(env.stream_id, 0))
        return True

    async def _anomaly(
        self,
        conn: asyncpg.Connection,
        kind: str,
        record: Any,
        env: EventEnvelope,
        expected: int | None,
    ) -> None:
        self.anomalies += 1
        log.error(
            "stream_anomaly",
            kind=kind,
            stream_id=env.stream_id,
            seq=env.seq,
            expected=expected,
            event_id=env.event_id,
            partition=record.partition,
            offset=record.offset,
        )
        await conn.execute(
            Q["anomaly"],
            kind,
            env.stream_id,
            expected,
            env.seq,
            env.event_id,
            record.topic,
            record.partition,
            record.offset,
        )

    async def _apply(
        self, conn: asyncpg.Connection, env: EventEnvelope, event: Event, keys: dict[str, bytes]
    ) -> None:
        before = await conn.fetchval(Q["status_of"], event.item_id)
        if touches_active(event, before):
            await conn.execute(Q["bump_generation"], *org_scope(env.stream_id))
        for write in project(env, event, _open(event, keys)):
            await conn.execute(Q[write.query], *write.args)
        if isinstance(event, MemoryForgotten):
            await shred(conn, event.item_id)
            self._keys.forget_cached(event.item_id)
        log.debug(
            "event_projected",
            stream_id=env.stream_id,
            seq=env.seq,
            type=env.type,
            revision=revision_of(event),
        )


def _sealed(event: Event | None) -> list[Sealed]:
    fields = (getattr(event, "content", None), getattr(event, "title", None))
    return [f for f in fields if isinstance(f, Sealed)]


def _open(event: Event, keys: dict[str, bytes]) -> Opened:
    """Decrypt what can be; a shredded key means forgotten text, which stays NULL."""

    def one(sealed: Sealed | None) -> str | None:
        if sealed is None or sealed.key_id not in keys:
            return None
        return open_sealed(sealed, keys[sealed.key_id])

    return Opened(
        content=one(getattr(event, "content", None)), title=one(getattr(event, "title", None))
    )
