"""The indexer's batch handler: decode -> fold -> plan -> open -> embed, then write.

``prepare`` runs with no transaction open (it embeds); ``write`` runs inside the
follower's transaction with the offsets: the item views, voided and relabelled
vectors, and the new vectors that pass the recheck.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from contracts.envelope import EventHeader
from contracts.events import Event, MemoryForgotten, Sealed, decode_event
from engram.crypto import open_sealed
from engram.db import Connection
from engram.embeddings.errors import BudgetExhaustedError, EmbeddingError
from engram.embeddings.providers import EmbeddingProvider
from engram.keystore import KeyStore
from engram.logging import get_logger
from engram.tracking import DeadLetter
from services.indexer import metrics
from services.indexer.adapters.store import (
    VectorRow,
    VectorStore,
    apply_plans,
    write_vectors,
)
from services.indexer.core import (
    Plan,
    Tracked,
    fold,
    org_scope,
    plan,
)
from services.indexer.embedding import embedded, parts, texts_of

log = get_logger(__name__)


@dataclass
class Prepared:
    """One batch, ready to write: changed item views, a plan per touched item, new vectors."""

    states: list[Tracked] = field(default_factory=list)
    plans: list[Plan] = field(default_factory=list)
    vectors: list[VectorRow] = field(default_factory=list)


@dataclass(frozen=True)
class Decoded:
    record: Any
    env: EventHeader
    event: Event


class EventIndexer:
    def __init__(
        self,
        store: VectorStore,
        keys: KeyStore,
        provider: EmbeddingProvider | None,
        embed_batch: int = 64,
    ) -> None:
        self._store, self._keys, self._provider = store, keys, provider
        self._embed_batch = embed_batch

    async def prepare(self, records: list[Any], dead_letter: DeadLetter) -> Prepared:
        good = await self._decode(records, dead_letter)
        if not good:
            return Prepared()
        before = await self._store.tracked(sorted({d.event.item_id for d in good}))
        after, last = dict(before), {}
        for d in good:
            org, scope = org_scope(d.env.stream_id)
            after[d.event.item_id] = fold(after.get(d.event.item_id), d.event, org, scope)
            last[d.event.item_id] = d.record
            if isinstance(d.event, MemoryForgotten):
                self._keys.forget_cached(d.event.item_id)  # the key is being shredded
        touched = [after[item_id] for item_id in sorted(last)]
        changed = [s for s in touched if s != before.get(s.item_id)]
        # Every touched item is planned, not only changed ones: a replayed batch (or one
        # another replica folded first) still embeds an active item that lacks its vector.
        plans = await self._plan(touched)
        wanted = [s for s, p in zip(touched, plans, strict=True) if p.embed]
        return Prepared(changed, plans, await self._embed(wanted, last, dead_letter))

    async def write(self, conn: Connection, prepared: Prepared) -> None:
        if prepared.plans:
            await apply_plans(conn, prepared.states, prepared.plans)
        result = await write_vectors(conn, prepared.vectors)
        metrics.WRITTEN.labels("events").inc(result.written)
        for reason, count in result.dropped.items():
            metrics.DROPPED.labels(reason).inc(count)
            log.info("vectors_dropped", reason=reason, count=count)

    async def _decode(self, records: list[Any], dead_letter: DeadLetter) -> list[Decoded]:
        good = []
        for record in records:
            try:
                env, event = decode_event(record.value or b"")
            except (ValidationError, KeyError, ValueError) as exc:
                metrics.DEAD_LETTERED.labels("undecodable").inc()
                await dead_letter(record, f"undecodable event: {exc}")
                continue
            good.append(Decoded(record, env, event))
        return good

    async def _plan(self, states: list[Tracked]) -> list[Plan]:
        provider = self._provider
        if provider is None or not states:
            return [plan(s, None, False) for s in states]
        known = await self._store.plan_revisions([s.item_id for s in states], provider.model)
        plans = []
        for s in states:
            vector_at, projected_at = known.get(s.item_id, (None, None))
            plans.append(plan(s, vector_at, True, projected_at))
        return plans

    async def _embed(
        self, states: list[Tracked], records: dict[str, Any], dead_letter: DeadLetter
    ) -> list[VectorRow]:
        if not states or self._provider is None:  # plan() asks for none without a model
            return []
        provider = self._provider
        opened = await self._open(states, records, dead_letter)
        by_id = {s.item_id: s for s in states}
        texts = await texts_of(provider, list(opened.values()))
        pending = [(by_id[item_id], its) for item_id, its in zip(opened, texts, strict=True)]
        rows: list[VectorRow] = []
        done = 0
        for part in parts(pending, self._embed_batch):
            try:
                rows += await embedded(provider, part, "events")
                done += len(part)
            except BudgetExhaustedError as exc:
                # Not poison: the periodic re-embed pass picks these up when budget is back.
                metrics.BUDGET_EXHAUSTED.inc()
                log.warning("embedding_put_off", reason=str(exc), items=len(pending) - done)
                break
            except EmbeddingError as exc:
                # Retries are spent (or the request can never succeed): dead-letter, go on.
                for state, _ in part:
                    metrics.DEAD_LETTERED.labels("embedding_failed").inc()
                    await dead_letter(records[state.item_id], f"embedding failed: {exc}")
        return rows

    async def _open(
        self, states: list[Tracked], records: dict[str, Any], dead_letter: DeadLetter
    ) -> dict[str, tuple[str | None, str]]:
        """Title and content per item; a missing key means forgotten, and the item is
        skipped."""
        keys = await self._keys.get_many({s.key_id for st in states for s in _sealed(st)})
        plain: dict[str, tuple[str | None, str]] = {}
        for state in states:
            if not all(s.key_id in keys for s in _sealed(state)):
                continue
            try:
                title = open_sealed(state.title, keys[state.title.key_id]) if state.title else None
                assert state.content is not None  # plan() embeds only items with text
                plain[state.item_id] = (
                    title,
                    open_sealed(state.content, keys[state.content.key_id]),
                )
            except ValueError as exc:
                metrics.DEAD_LETTERED.labels("unreadable").inc()
                await dead_letter(records[state.item_id], str(exc))
        return plain


def _sealed(state: Tracked) -> list[Sealed]:
    return [s for s in (state.content, state.title) if s is not None]
