"""Re-embedding: give every active item a vector of the configured model.

Runs in the background when the indexer starts (and again every
``reindex_interval_s``), and from ``engram reindex``. It reads the plaintext of
active items from ``memory.items``, embeds it with no transaction open, and
commits each batch's vectors through the same recheck as the event path, with
the job's progress in the same transaction: a crash resumes where it stopped.
When a pass completes, other models' vectors are pruned, so a model change
re-embeds everything once and leaves no vector of the old model behind.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engram.budget import DailyBudget
from engram.db import Pool, migrate, migrate_shared
from engram.embeddings.errors import BudgetExhaustedError, EmbeddingError
from engram.embeddings.providers import EmbeddingProvider, open_provider
from engram.embeddings.settings import EmbeddingSettings
from engram.logging import get_logger
from engram.service import load_settings
from engram.settings import CommonSettings
from services.indexer import metrics
from services.indexer.adapters.jobs import Job, ReindexJobs
from services.indexer.adapters.store import (
    ItemText,
    VectorRow,
    VectorStore,
    create_vector_pool,
)
from services.indexer.embedding import embedded, parts, texts_of
from services.indexer.settings import IndexerSettings

log = get_logger(__name__)
SQL_DIR = Path(__file__).parent / "sql"


@dataclass
class ReindexProgress:
    model: str
    org: str | None
    job_id: int | None = None
    total: int = 0
    embedded: int = 0
    dropped: int = 0
    done: bool = False
    stopped: str | None = None  # why the pass stopped before the end; run it again later


async def reindex(
    pool: Pool,
    provider: EmbeddingProvider,
    *,
    org: str | None = None,
    batch_size: int = 64,
    prune_other_models: bool = True,
    progress: Callable[[ReindexProgress], None] | None = None,
) -> ReindexProgress:
    """Embed every active item (of ``org``, or all) lacking a current vector of the model.

    Resumable and idempotent: call it again after a stop. Returns when the pass is
    done, or stopped (budget used up, provider failing, another process running it).
    """
    state = ReindexProgress(provider.model, org)
    jobs = ReindexJobs(pool)
    await VectorStore(pool).ensure_model(provider.model, provider.dimensions)
    async with jobs.exclusive(provider.model, org) as mine:
        if not mine:
            state.stopped = "another process is re-embedding this model"
            return state
        pending = await jobs.pending(provider.model, org)
        job = await jobs.resume_or_start(provider.model, org, pending)
        if job is None:
            state.done = True
            return state
        await _run(jobs, job, provider, state, batch_size, progress)
        if state.stopped is None:
            await jobs.finish(job, provider.model, org, prune_other_models)
            state.done = True
            log.info(
                "reindex_done",
                model=provider.model,
                org=org,
                embedded=state.embedded,
                dropped=state.dropped,
            )
    return state


async def _run(
    jobs: ReindexJobs,
    job: Job,
    provider: EmbeddingProvider,
    state: ReindexProgress,
    batch_size: int,
    progress: Callable[[ReindexProgress], None] | None,
) -> None:
    model, org = provider.model, state.org
    state.job_id, state.total = job.job_id, job.total
    metrics.REINDEX_RUNNING.labels(model).set(1)
    try:
        while items := await jobs.candidates(model, org, job.cursor, batch_size):
            try:
                rows = await _embed(provider, items)
            except (BudgetExhaustedError, EmbeddingError) as exc:
                state.stopped = f"{type(exc).__name__}: {exc}"
                log.warning(
                    "reindex_stopped", model=model, org=org, reason=state.stopped, cursor=job.cursor
                )
                return
            await jobs.write(job, items[-1].item_id, rows)
            state.embedded, state.dropped = job.embedded, job.dropped
            _report(state, progress)
    finally:
        metrics.REINDEX_RUNNING.labels(model).set(0)


async def _embed(provider: EmbeddingProvider, items: list[ItemText]) -> list[VectorRow]:
    """The items' vectors, a part of at most as many texts as the batch has items a call."""
    texts = await texts_of(provider, [(i.title, i.content) for i in items])
    rows: list[VectorRow] = []
    for part in parts(list(zip(items, texts, strict=True)), len(items)):
        rows += await embedded(provider, part, "reindex")
    return rows


def _report(state: ReindexProgress, progress: Callable[[ReindexProgress], None] | None) -> None:
    metrics.REINDEX_EMBEDDED.labels(state.model).set(state.embedded)
    metrics.REINDEX_PENDING.labels(state.model).set(
        max(0, state.total - state.embedded - state.dropped)
    )
    log.info(
        "reindex_progress",
        model=state.model,
        org=state.org,
        embedded=state.embedded,
        dropped=state.dropped,
        total=state.total,
    )
    if progress is not None:
        progress(state)


async def reindex_loop(pool: Pool, provider: EmbeddingProvider, settings: IndexerSettings) -> None:
    """The background pass: at start, then every ``reindex_interval_s`` (0: only once)."""
    while True:
        await reindex(
            pool,
            provider,
            batch_size=settings.reindex_batch,
            prune_other_models=settings.prune_other_models,
        )
        if settings.reindex_interval_s == 0:
            return
        await asyncio.sleep(settings.reindex_interval_s)


async def run_reindex(
    org: str | None = None,
    progress: Callable[[ReindexProgress], None] | None = None,
    *,
    database_url: str | None = None,
) -> ReindexProgress | None:
    """``engram reindex``: the model configured in the environment (None when it is off)."""
    embedding, indexer = load_settings(EmbeddingSettings), load_settings(IndexerSettings)
    dsn = database_url or load_settings(CommonSettings).database_url
    # Idempotent: the CLI may run before the service (the budget table comes first).
    await migrate_shared(dsn)
    await migrate(dsn, "indexer", SQL_DIR)
    pool = await create_vector_pool(dsn)
    try:
        budget = DailyBudget(pool, embedding.daily_request_limit)
        async with open_provider(embedding, indexer.tuning, budget) as provider:
            if provider is None:
                return None
            return await reindex(
                pool,
                provider,
                org=org,
                batch_size=indexer.reindex_batch,
                prune_other_models=indexer.prune_other_models,
                progress=progress,
            )
    finally:
        await pool.close()
