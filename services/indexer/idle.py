"""When the indexer reads the log: not while it has nothing to index.

With no embedding model configured (the default) and no vector stored, nothing the
indexer could fold from an event would ever be used: it writes no vector, and has none to
void or relabel. Folding its view of every item anyway cost about 0.15 ms of CPU a
command, an eighth of the whole stack's (benchmark, indexer stopped against running).
So it does not read the log then: it holds its stored offsets where they are, and looks
again every ``ENGRAM_INDEXER_IDLE_CHECK_S``. Deferred, not skipped: once a vector exists
(``engram reindex`` run with a model) or the service starts with one, it reads on from
those offsets, as after any stop, and folds every event since (a forget among them voids
its item's vectors).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from engram.faults import of_the_moment
from engram.logging import get_logger
from services.indexer import metrics

log = get_logger(__name__)
# What /health says of an idle indexer, and its log line.
WHY = (
    "no embedding model and no vector stored: nothing to index; the log is read from the "
    "stored offsets once there is"
)


class Idle:
    """Whether the indexer waits for something to index; ``wait`` returns once it has."""

    def __init__(
        self, model_on: bool, any_vectors: Callable[[], Awaitable[bool]], every_s: float
    ) -> None:
        self._any_vectors, self._every_s = any_vectors, every_s
        self.idle = not model_on  # until the first look says otherwise

    async def look(self) -> bool:
        """Whether a vector is stored now (health asks it too: the database is what an
        idle indexer needs)."""
        return await self._any_vectors()

    async def wait(self) -> None:
        """Return when there is something to index: at once with a model, else once a
        vector exists. A fault of the moment (the database restarting) is a look that
        found nothing: the next one comes after the period, as any other."""
        told = False
        metrics.IDLE.set(1 if self.idle else 0)
        while self.idle:
            try:
                self.idle = not await self.look()
            except Exception as exc:
                if not of_the_moment(exc):
                    raise
                log.warning("idle_check_failed", error=repr(exc)[:300])
            if self.idle:
                if not told:
                    log.info("indexer_idle", why=WHY, check_every_s=self._every_s)
                    told = True
                await asyncio.sleep(self._every_s)
        metrics.IDLE.set(0)
        if told:
            log.info("indexer_woken", why="a vector is stored: reading on from the offsets")
