"""Postgres adapter of the indexer: item views, vectors and models.

Every vector write goes through ``write_vectors``: in one short transaction it
locks the items (advisory locks, in key order), reads both views of each item
(the indexer's own and the projector's) and commits only what ``core.verdict``
allows. The embedding itself is computed before, outside any transaction.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
from pgvector.asyncpg import register_vector

from contracts.events import Sealed
from engram.db import load_queries, named
from services.indexer.core import Plan, Seen, Text, Tracked, Verdict, verdict
from services.indexer.errors import ModelMismatchError

Q = load_queries(Path(__file__).parent.parent / "sql" / "queries.sql")


@dataclass(frozen=True)
class VectorRow:
    """An embedding of an item's text, computed for one revision of it."""

    item_id: str
    revision: int
    model: str
    embedding: list[float]
    org: str
    scope: str
    passage: int = 0  # which of the item's passages (engram.passages) it stands for
    piece: int = 0  # which slice of the passage (EmbeddingProvider.pieces)


def vector_rows(
    item_id: str,
    revision: int,
    model: str,
    org: str,
    scope: str,
    vectors: Iterator[list[float]],
    texts: list[Text],
) -> list[VectorRow]:
    """An item's vectors, the next of a batch's, one for each of its texts."""
    return [
        VectorRow(item_id, revision, model, next(vectors), org, scope, t.passage, t.piece)
        for t in texts
    ]


@dataclass(frozen=True)
class ItemText:
    """An active item's current text, as the projector holds it (for re-embedding)."""

    item_id: str
    org: str
    scope: str
    revision: int
    title: str | None
    content: str


@dataclass
class WriteResult:
    written: int = 0
    dropped: Counter[Verdict] = field(default_factory=Counter)


async def create_vector_pool(dsn: str, *, max_size: int = 4) -> asyncpg.Pool:
    """A pool whose connections send and receive pgvector values in binary."""
    pool = await asyncpg.create_pool(
        dsn,
        min_size=1,
        max_size=max_size,
        init=register_vector,
        server_settings=named(dsn),
    )
    assert pool is not None
    return pool


async def lock_items(conn: asyncpg.Connection, item_ids: Iterable[str]) -> None:
    await conn.execute(Q["lock_items"], sorted(set(item_ids)))


async def write_vectors(conn: asyncpg.Connection, rows: list[VectorRow]) -> WriteResult:
    """Recheck and insert, in the caller's transaction: only active items at that revision.
    ``written`` and ``dropped`` count items (an item's passages share their verdict)."""
    result = WriteResult()
    if not rows:
        return result
    ids = sorted({r.item_id for r in rows})
    await lock_items(conn, ids)
    views = {v["item_id"]: v for v in await conn.fetch(Q["views"], ids)}
    # Once an item: its slices share one revision (one text, embedded together).
    decisions = {
        item_id: verdict(revision, _views(views[item_id]))
        for item_id, revision in {(r.item_id, r.revision) for r in rows}
    }
    allowed = [r for r in rows if decisions[r.item_id] == "write"]
    await conn.executemany(
        Q["upsert_vector"],
        [
            (r.item_id, r.model, r.revision, r.org, r.scope, r.embedding, r.passage, r.piece)
            for r in allowed
        ],
    )
    result.written = sum(1 for d in decisions.values() if d == "write")
    result.dropped.update(d for d in decisions.values() if d != "write")
    return result


def _views(row: asyncpg.Record) -> tuple[Seen | None, Seen | None]:
    own = None if row["own_revision"] is None else Seen(row["own_status"], row["own_revision"])
    projected = (
        None
        if row["projected_revision"] is None
        else Seen(row["projected_status"], row["projected_revision"])
    )
    return own, projected


async def apply_plans(conn: asyncpg.Connection, states: list[Tracked], plans: list[Plan]) -> None:
    """Changed item views and the void/relabel work of one batch, in the follower's transaction."""
    await lock_items(conn, [p.item_id for p in plans])
    await conn.execute(Q["save_tracked"], *_columns(states))
    await conn.execute(Q["void_vectors"], [p.item_id for p in plans], [p.keep_from for p in plans])
    moved = [p for p in plans if p.relabel_to is not None]
    await conn.execute(
        Q["relabel_vectors"],
        [p.item_id for p in moved],
        [p.keep_from for p in moved],
        [p.relabel_to for p in moved],
    )


def _columns(states: list[Tracked]) -> list[list[object]]:
    def sealed(value: Sealed | None) -> str | None:
        return None if value is None else value.model_dump_json()

    return [
        [s.item_id for s in states],
        [s.org for s in states],
        [s.scope for s in states],
        [s.status for s in states],
        [s.revision for s in states],
        [s.text_revision for s in states],
        [sealed(s.content) for s in states],
        [sealed(s.title) for s in states],
    ]


class VectorStore:
    """The queries that run on their own connection (outside the follower's transaction)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def tracked(self, item_ids: list[str]) -> dict[str, Tracked]:
        rows = await self.pool.fetch(Q["tracked"], item_ids)
        return {r["item_id"]: _tracked(r) for r in rows}

    async def any_vectors(self) -> bool:
        """Whether any vector of any model is stored (an idle indexer's question)."""
        return bool(await self.pool.fetchval(Q["any_vectors"]))

    async def plan_revisions(
        self, item_ids: list[str], model: str
    ) -> dict[str, tuple[int | None, int | None]]:
        """Each item's (revision of its vectors of ``model``, revision of its row in the
        projector's read model), None where it has none."""
        rows = await self.pool.fetch(Q["plan_revisions"], item_ids, model)
        return {r["item_id"]: (r["vector_revision"], r["projected_revision"]) for r in rows}

    async def write_vectors(self, rows: list[VectorRow]) -> WriteResult:
        async with self.pool.acquire() as conn, conn.transaction():
            return await write_vectors(conn, rows)

    async def ensure_model(self, model: str, dimensions: int) -> None:
        """Register a model and create its partial HNSW cosine index, once."""
        async with self.pool.acquire() as conn, conn.transaction():
            # Replicas starting together must not both create the index.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('indexer.models'))")
            known = await conn.fetchrow(Q["model"], model)
            if known is not None:
                if known["dimensions"] != dimensions:
                    raise ModelMismatchError(
                        f"model {model} has {known['dimensions']} dimensions, not {dimensions}"
                    )
                return
            name = "vectors_hnsw_" + hashlib.sha256(model.encode()).hexdigest()[:16]
            ddl = await conn.fetchval(
                "SELECT format('CREATE INDEX %I ON indexer.vectors USING hnsw "
                "((embedding::vector(%s)) vector_cosine_ops) WHERE model = %L', "
                "$1::text, $2::int, $3::text)",
                name,
                dimensions,
                model,
            )
            await conn.execute(ddl)
            await conn.execute(Q["add_model"], model, dimensions, name)

    async def nearest(
        self,
        org: str,
        scopes: list[str],
        model: str,
        query: list[float],
        max_distance: float,
        limit: int,
    ) -> list[tuple[str, float]]:
        rows = await self.pool.fetch(Q["nearest"], org, scopes, model, query, max_distance, limit)
        return [(r["item_id"], r["distance"]) for r in rows]


def _tracked(row: asyncpg.Record) -> Tracked:
    def sealed(value: str | None) -> Sealed | None:
        return None if value is None else Sealed.model_validate(json.loads(value))

    return Tracked(
        item_id=row["item_id"],
        org=row["org"],
        scope=row["scope"],
        status=row["status"],
        revision=row["revision"],
        text_revision=row["text_revision"],
        content=sealed(row["content"]),
        title=sealed(row["title"]),
    )
