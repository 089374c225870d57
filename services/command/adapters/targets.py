"""Where a link may point outside its own stream: the read model's view of the targets.

A link goes from a memory of the caller's stream to any memory the caller can see
(seed 004). A memory of another stream is not in this writer's state, so the writer asks
the projector's read model before it decides, and passes what it found into ``decide``
(``Context.targets``; a forgotten one in a scope the caller sees, ``forgotten_targets``,
answers 410 as in its own stream). The read model trails the log: a target not found is
looked for again once the projector holds what the log held (``adapters/lookups.py``).
Whoever reads the links later sees only those whose two memories they can see
(row-level security on memory.links).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import asyncpg

from engram.auth import Principal

# The statuses a caller can read a memory in (recall's get_item): not forgotten.
VISIBLE = frozenset({"active", "disabled", "archived", "candidate"})


@dataclass(frozen=True)
class Target:
    org: str
    scope: str
    status: str

    def visible_to(self, principal: Principal) -> bool:
        return self._in_sight(principal) and self.status in VISIBLE

    def forgotten_for(self, principal: Principal) -> bool:
        """A forgotten memory of a scope the caller sees (it may know it was forgotten)."""
        return self._in_sight(principal) and self.status == "forgotten"

    def _in_sight(self, principal: Principal) -> bool:
        return self.org == principal.org and self.scope in principal.visible_scopes()


class LinkTargets:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def find(self, item_ids: Collection[str]) -> dict[str, Target]:
        """The memories of these ids in the read model, in one round trip."""
        if not item_ids:
            return {}
        rows = await self._pool.fetch(
            "SELECT item_id, org, scope, status FROM memory.items WHERE item_id = ANY($1)",
            list(item_ids),
        )
        return {r["item_id"]: Target(r["org"], r["scope"], r["status"]) for r in rows}
