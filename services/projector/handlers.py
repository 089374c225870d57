"""The projector's batch handler: decode (once, ``prepare``) -> guard (``guard``) -> open
(``opening``) -> core.project -> the statements (``adapters/store.py``).

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
from collections import Counter, defaultdict
from typing import Any

from pydantic import ValidationError

from contracts.events import MemoryForgotten, MemoryRemembered, decode_event
from engram.db import Connection
from engram.keystore import KeyStore, shred
from engram.tracking import DeadLetter, OffsetRow
from services.projector.adapters import store
from services.projector.adapters.guard import guard
from services.projector.adapters.marks import marked, record_charges, record_inferences
from services.projector.adapters.store import Writes
from services.projector.core import (
    WRITE_ORDER,
    Decoded,
    org_scope,
    project,
    status_after,
    touches_active,
)
from services.projector.opening import key_ids, open_event


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
        self, conn: Connection, good: list[Decoded], offsets: list[OffsetRow]
    ) -> bool:
        """Apply a batch of new memories and store ``offsets``, in one statement; True when
        done. False, with nothing written, for any other batch: one with an event of
        another kind (or none) or a mark (``marks``), or that does not go on from its streams'
        heads, or that another applier recorded first. The full path (``write``) then
        takes it."""
        if not _new_items_only(good) or (spans := _stream_spans(good)) is None:
            return False
        writes, bumped, _ = _plan(good, {}, await self._keys.get_many(key_ids(good)))
        return await store.apply_new_items(conn, good, writes, spans, bumped, offsets)

    async def dead_letter(self, record: Any, error: str) -> None:
        """A record that cannot be applied: to whoever this projector reports poison to."""
        await self._dead_letter_one(record, error)

    async def handle_batch(self, conn: Connection, records: list[Any]) -> None:
        """Decode and write a batch in the caller's transaction (a replay does this)."""
        await self.write(conn, await self.prepare(records, self._dead_letter_one))

    async def write(self, conn: Connection, good: list[Decoded]) -> None:
        """The full path, in the caller's transaction: guard, writes, heads and counts."""
        if not good:
            return
        # The keys come on another connection while the guard runs on this one.
        (fresh, heads, status), keys = await asyncio.gather(
            guard(conn, good), self._keys.get_many(key_ids(good))
        )
        if fresh:
            before = dict(status)  # _apply updates it
            await self._apply(conn, fresh, heads, status, keys)
            await record_charges(conn, fresh)
            await record_inferences(conn, fresh, before)

    async def _apply(
        self,
        conn: Connection,
        batch: list[Decoded],
        heads: dict[str, int],
        status: dict[str, str | None],
        keys: dict[str, bytes],
    ) -> None:
        writes, bumped, forgotten = _plan(batch, status, keys)
        await store.write_rows(conn, writes)
        await store.finish(conn, batch, heads, bumped)
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


def _new_items_only(good: list[Decoded]) -> bool:
    """Whether the batch is new memories only, none marked: a charge or an inference is
    marked in the full path's transaction."""
    return bool(good) and all(
        isinstance(event, MemoryRemembered) and not marked(event) for _, _, event in good
    )


def _stream_spans(good: list[Decoded]) -> tuple[dict[str, int], dict[str, int]] | None:
    """Each stream's first and last seq in the batch; None where a stream skips one."""
    firsts: dict[str, int] = {}
    lasts: dict[str, int] = {}
    for _, env, _ in good:
        if env.stream_id in lasts and env.seq != lasts[env.stream_id] + 1:
            return None
        firsts.setdefault(env.stream_id, env.seq)
        lasts[env.stream_id] = env.seq
    return firsts, lasts


def _plan(
    batch: list[Decoded], status: dict[str, str | None], keys: dict[str, bytes]
) -> tuple[Writes, Counter[tuple[str, str]], list[str]]:
    """The batch's writes by query, the generations it bumps per (org, scope), and the
    items it forgets; ``status`` (the items' statuses before the batch) is updated."""
    writes: Writes = defaultdict(list)
    generations: Counter[tuple[str, str]] = Counter()
    forgotten: list[str] = []
    for _, env, event in batch:
        before = status.get(event.item_id)
        if touches_active(event, before):
            generations[org_scope(env.stream_id)] += 1
        status[event.item_id] = status_after(event, before)
        for write in project(env, event, open_event(event, keys)):
            if write.query not in ORDERED:  # it would never run: a write of no order
                raise TypeError(f"{write.query} has no place in WRITE_ORDER")
            writes[write.query].append(write.args)
        if isinstance(event, MemoryForgotten):
            forgotten.append(event.item_id)
    return writes, generations, forgotten
