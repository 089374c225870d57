"""The projector's batch handler: decode (once, ``prepare``) -> guard -> open ->
core.project -> SQL.

A batch of new memories only (the bulk of the log) is applied by one statement with its
offsets, outside a transaction (``apply_new_items``, 009_one_statement_batches.sql): two
round trips with the data keys. Any other batch, or one that does not simply continue
its streams, takes the full path in the follower's transaction (``write``): one
statement for the guard with the streams' heads and the items' statuses, one per kind
of write, and one for the heads, the generations and the term counts at the end; the
data keys are fetched (on another connection) while the guard runs.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
from pydantic import TypeAdapter, ValidationError

from contracts.envelope import EventHeader
from contracts.events import (
    ChangeProposed,
    Event,
    Labels,
    MemoryForgotten,
    MemoryRelabeled,
    MemoryRemembered,
    MemoryRevised,
    Sealed,
    decode_event,
)
from contracts.text import NUL, REPLACEMENT
from engram.crypto import open_sealed
from engram.db import load_queries
from engram.keystore import KeyStore, shred
from engram.logging import get_logger
from engram.tracking import DeadLetter, OffsetRow
from services.projector.core import (
    WRITE_ORDER,
    Opened,
    org_scope,
    project,
    status_after,
    touches_active,
)
from services.projector.marks import marked, record_charges, record_inferences

log = get_logger(__name__)
Q = load_queries(Path(__file__).parent / "sql" / "queries.sql")
Decoded = tuple[Any, EventHeader, Event]
# Writes of a batch that run as one statement over all their rows (an array of a row type),
# not one execution per row: the term index's trigger then indexes the batch in one go.
ONE_STATEMENT = frozenset({"insert_item", "insert_revision"})


class EventProjector:
    def __init__(self, keystore: KeyStore, dead_letter: DeadLetter) -> None:
        self._keys = keystore
        self._dead_letter_one = dead_letter

    async def prepare(self, records: list[Any], dead_letter: DeadLetter) -> list[Decoded]:
        """Decode a fetch once, for whichever path applies it; the undecodable records
        go to the dead-letter topic first."""
        good, bad = _decode(records)
        for record, error in bad:
            await dead_letter(record, error)
        return good

    async def apply_new_items(
        self, conn: asyncpg.Connection, good: list[Decoded], offsets: list[OffsetRow]
    ) -> bool:
        """Apply a batch of new memories and store ``offsets``, in one statement; True when
        done. False, with nothing written, for any other batch: one with an event of
        another kind (or none) or a mark (``marks``), or that does not go on from its streams'
        heads, or that another applier recorded first. The full path (``write``) then
        takes it."""
        if not good or not all(
            isinstance(event, MemoryRemembered) and not marked(event) for _, _, event in good
        ):  # a charge or an inference is marked in the full path's transaction
            return False
        firsts: dict[str, int] = {}
        lasts: dict[str, int] = {}
        for _, env, _ in good:
            if env.stream_id in lasts and env.seq != lasts[env.stream_id] + 1:
                return False
            firsts.setdefault(env.stream_id, env.seq)
            lasts[env.stream_id] = env.seq
        keys = await self._keys.get_many({s.key_id for _, _, ev in good for s in _sealed(ev)})
        writes, bumped, _ = _plan(good, {}, keys)
        streams = list(firsts)
        try:
            applied: bool = await conn.fetchval(
                Q["apply_new_items"],
                [_audit_row(env, event) for _, env, event in good],
                writes["insert_item"],
                writes["insert_revision"],
                streams,
                [firsts[s] for s in streams],
                [lasts[s] for s in streams],
                *_generation_columns(bumped),
                *(list(column) for column in zip(*offsets, strict=True)),
            )
        except asyncpg.UniqueViolationError:  # applied by another, meanwhile
            return False
        return applied

    async def dead_letter(self, record: Any, error: str) -> None:
        """A record that cannot be applied: to whoever this projector reports poison to."""
        await self._dead_letter_one(record, error)

    async def handle_batch(self, conn: asyncpg.Connection, records: list[Any]) -> None:
        """Decode and write a batch in the caller's transaction (a replay does this)."""
        await self.write(conn, await self.prepare(records, self._dead_letter_one))

    async def write(self, conn: asyncpg.Connection, good: list[Decoded]) -> None:
        """The full path, in the caller's transaction: guard, writes, heads and counts."""
        if not good:
            return
        # The keys come on another connection while the guard runs on this one.
        wanted = {s.key_id for _, _, ev in good for s in _sealed(ev)}
        (fresh, heads, status), keys = await asyncio.gather(
            self._guard(conn, good), self._keys.get_many(wanted)
        )
        if fresh:
            before = dict(status)  # _apply updates it
            await self._apply(conn, fresh, heads, status, keys)
            await record_charges(conn, fresh)
            await record_inferences(conn, fresh, before)

    async def _guard(
        self, conn: asyncpg.Connection, batch: list[Decoded]
    ) -> tuple[list[Decoded], dict[str, int], dict[str, str | None]]:
        """Apply each (stream_id, seq) once; report gaps and conflicting duplicates.
        Returns the new events, the streams' heads as they were, and the items' statuses."""
        row = await conn.fetchrow(
            Q["guard"],
            [_audit_row(env, event) for _, env, event in batch],
            list({env.stream_id for _, env, _ in batch}),
            list({ev.item_id for _, _, ev in batch}),
        )
        new = set(row["new"])
        heads: dict[str, int] = json.loads(row["heads"])
        known: dict[str, list[str]] = json.loads(row["statuses"])  # item -> [status, stream]
        status: dict[str, str | None] = {item: s for item, (s, _) in known.items()}
        seen = [(r, env) for r, env, _ in batch if env.event_id not in new]
        if seen:  # already applied (a replayed batch), unless another event holds the seq
            held = {
                (r["stream_id"], r["seq"]): r["event_id"]
                for r in await conn.fetch(
                    Q["audit_at"], [e.stream_id for _, e in seen], [e.seq for _, e in seen]
                )
            }
            for record, env in seen:
                if held.get((env.stream_id, env.seq)) != env.event_id:
                    await self._anomaly(conn, "conflicting_duplicate", record, env, None)
        # Each new event once: the same event twice in one batch is inserted once, and its
        # second copy is no new event (QA: it was applied twice and reported as a gap, so
        # a replay that read both copies in one fetch counted otherwise than the live one).
        fresh, taken = [], set()
        for d in batch:
            if d[1].event_id in new and d[1].event_id not in taken:
                taken.add(d[1].event_id)
                fresh.append(d)
        # An item is its stream's: an event of another stream naming it (ids that came
        # from a caller's key alone, before they were of their stream) changes nothing.
        foreign = [
            d for d in fresh if known.get(d[2].item_id, ("", d[1].stream_id))[1] != d[1].stream_id
        ]
        for record, env, _ in foreign:
            await self._anomaly(conn, "foreign_item", record, env, None)
        for record, env, _ in fresh:
            expected = heads.get(env.stream_id, 0) + 1
            if env.seq != expected:
                await self._anomaly(conn, "gap", record, env, expected)
            heads[env.stream_id] = max(env.seq, heads.get(env.stream_id, 0))
        return ([d for d in fresh if d not in foreign] if foreign else fresh), heads, status

    async def _anomaly(
        self,
        conn: asyncpg.Connection,
        kind: str,
        record: Any,
        env: EventHeader,
        expected: int | None,
    ) -> None:
        log.error(
            "stream_anomaly",
            kind=kind,
            stream_id=env.stream_id,
            seq=env.seq,
            expected=expected,
            event_id=env.event_id,
            topic=record.topic,
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
        self,
        conn: asyncpg.Connection,
        batch: list[Decoded],
        heads: dict[str, int],
        status: dict[str, str | None],
        keys: dict[str, bytes],
    ) -> None:
        writes, bumped, forgotten = _plan(batch, status, keys)
        for query in WRITE_ORDER:
            if not (rows := writes.get(query)):
                continue
            if query in ONE_STATEMENT:
                await conn.execute(Q[query], rows)
            else:
                await conn.executemany(Q[query], rows)
        # The heads of the streams written, the generations, and the term index's counts
        # (once per batch, not per item), in one statement.
        fresh_streams = list({env.stream_id for _, env, _ in batch})
        await conn.execute(
            Q["finish"],
            fresh_streams,
            [heads[s] for s in fresh_streams],
            *_generation_columns(bumped),
        )
        for item_id in forgotten:
            await shred(conn, item_id)
            self._keys.forget_cached(item_id)


# The writes WRITE_ORDER places, for a membership test a write.
ORDERED = frozenset(WRITE_ORDER)


def _decode(records: list[Any]) -> tuple[list[Decoded], list[tuple[Any, str]]]:
    """The decoded events, and the undecodable records with their errors."""
    good: list[Decoded] = []
    bad: list[tuple[Any, str]] = []
    for record in records:
        try:
            env, event = decode_event(record.value or b"")
            good.append((record, env, event))
        except (ValidationError, KeyError, ValueError) as exc:
            bad.append((record, f"undecodable event: {exc}"))
    return good, bad


def _plan(
    batch: list[Decoded], status: dict[str, str | None], keys: dict[str, bytes]
) -> tuple[defaultdict[str, list[tuple[Any, ...]]], Counter[tuple[str, str]], list[str]]:
    """The batch's writes by query, the generations it bumps per (org, scope), and the
    items it forgets; ``status`` (the items' statuses before the batch) is updated."""
    writes: defaultdict[str, list[tuple[Any, ...]]] = defaultdict(list)
    generations: Counter[tuple[str, str]] = Counter()
    forgotten: list[str] = []
    for _, env, event in batch:
        before = status.get(event.item_id)
        if touches_active(event, before):
            generations[org_scope(env.stream_id)] += 1
        status[event.item_id] = status_after(event, before)
        for write in project(env, event, _open(event, keys)):
            if write.query not in ORDERED:  # it would never run: a write of no order
                raise TypeError(f"{write.query} has no place in WRITE_ORDER")
            writes[write.query].append(write.args)
        if isinstance(event, MemoryForgotten):
            forgotten.append(event.item_id)
    return writes, generations, forgotten


def _generation_columns(bumped: Counter[tuple[str, str]]) -> tuple[list[Any], ...]:
    """Orgs, scopes and bumps, as the statements take them."""
    return (
        [org for org, _ in bumped],
        [scope for _, scope in bumped],
        list(bumped.values()),
    )


def _audit_row(env: EventHeader, event: Event) -> tuple[Any, ...]:
    org, scope = org_scope(env.stream_id)
    return (
        env.stream_id,
        env.seq,
        env.event_id,
        env.type,
        event.item_id,
        org,
        scope,
        getattr(event, "revision", None),
        env.actor.model_dump_json(),
        env.command_id,
        env.occurred_at,
        env.made_by,
    )


def _sealed(event: Event) -> list[Sealed]:
    fields = (
        getattr(event, "content", None),
        getattr(event, "title", None),
        getattr(event, "reason_sealed", None),
        getattr(event, "labels", None),
        getattr(event, "tags", None),
    )
    return [f for f in fields if isinstance(f, Sealed)]


def _open(event: Event, keys: dict[str, bytes]) -> Opened:
    """Decrypt what can be; a shredded key means forgotten text, which stays NULL."""

    def one(sealed: Sealed | None) -> str | None:
        if sealed is None or sealed.key_id not in keys:
            return None
        try:
            text = open_sealed(sealed, keys[sealed.key_id])
        except ValueError as exc:  # damaged ciphertext: its text stays NULL, the log says so
            log.error("sealed_text_unreadable", item_id=event.item_id, error=str(exc))
            return None
        # Saved before commands refused NUL: Postgres's text cannot hold one.
        return text.replace(NUL, REPLACEMENT) if NUL in text else text

    return Opened(
        content=one(getattr(event, "content", None)),
        title=one(getattr(event, "title", None)),
        reason=one(getattr(event, "reason_sealed", None)),
        labels=_labels(event, one),
        tags=_proposed_tags(event, one),
    )


def _proposed_tags(
    event: Event, one: Callable[[Sealed | None], str | None]
) -> tuple[str, ...] | None:
    """A relabel proposal's tags, opened; None where there are none, they are shredded, or
    they do not read as a list of tags (the log says so)."""
    if not isinstance(event, ChangeProposed) or (text := one(event.tags)) is None:
        return None
    try:
        return tuple(TypeAdapter(list[str]).validate_json(text))
    except ValidationError as exc:
        log.error("sealed_tags_unreadable", item_id=event.item_id, error=_faults(exc))
        return None


def _labels(event: Event, one: Callable[[Sealed | None], str | None]) -> Labels | None:
    """A new memory's labels: opened, or in plain in an event written before they were
    sealed. None where they are shredded, or do not read as labels (the log says so)."""
    if not isinstance(event, MemoryRemembered | MemoryRevised | MemoryRelabeled):
        return None
    if event.labels is None:
        return event.plain_labels() if isinstance(event, MemoryRemembered) else None
    if (text := one(event.labels)) is None:
        return None
    try:
        return Labels.model_validate_json(text)
    except ValidationError as exc:
        log.error("sealed_labels_unreadable", item_id=event.item_id, error=_faults(exc))
        return None


def _faults(exc: ValidationError) -> str:
    """What does not read, by field: never the opened text itself (pydantic's own message
    quotes it, and a log outlives a forget)."""
    return "; ".join(
        f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
        for e in exc.errors(include_url=False, include_input=False)[:5]
    )
