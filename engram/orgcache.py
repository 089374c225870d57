"""What a service reads per org and keeps a while: each value read again once ``ttl``
seconds old, and past ``most`` orgs the least recently read leave (the command writer's
org limits, recall's holds and entity aliases)."""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Generic, TypeVar

T = TypeVar("T")
KNOWN_ORGS = 10_000  # orgs kept; orgs of refused requests count too


class OrgCache(Generic[T]):
    def __init__(self, ttl: float, most: int = KNOWN_ORGS) -> None:
        self._ttl, self._most = ttl, most
        self._known: dict[str, tuple[T, float]] = {}  # org -> (value, read at)

    def stale(self, orgs: Collection[str]) -> list[str]:
        """The orgs not kept, or kept too long."""
        now = time.monotonic()
        return [o for o in orgs if o not in self._known or now - self._known[o][1] >= self._ttl]

    def get(self, org: str) -> T:
        """A kept value (``stale`` says which are)."""
        return self._known[org][0]

    def keep(self, org: str, value: T) -> None:
        self._known.pop(org, None)  # to the end: the oldest read leave first
        self._known[org] = (value, time.monotonic())
        while len(self._known) > self._most:
            del self._known[next(iter(self._known))]

    def forget(self, org: str) -> None:
        """Read the org's value again at its next use (it was changed here)."""
        self._known.pop(org, None)
