"""Seed 004's pricing and holds, as the command service and recall read them.

An org is metered when operators gave it an account (``engram billing``; table
``billing.accounts``): saving a memory costs 1 credit. Its calls are held (refused) while
it is suspended, while its credit is spent, and while the caller has spent the org's
monthly cap. Erasing is never held. An org without an account is never charged nor held.

``Accounts`` reads the holds of the orgs it is asked about at most once per ``ttl``
seconds per org, and counts what this process spends meanwhile (``spend``), so a batch of
commands cannot spend past a balance read once; what other processes spent is seen at
the next read, once the projector has recorded it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Literal, get_args

import asyncpg

from engram.auth import Principal
from engram.logging import get_logger

log = get_logger(__name__)

HoldCode = Literal["org_suspended", "payment_required", "key_spend_limit_exceeded"]
HOLDS: frozenset[str] = frozenset(get_args(HoldCode))
KNOWN_ORGS = 10_000  # orgs whose holds are kept; past it, the least recently read leave


def caller_of(member: str | None, agent: str | None) -> str:
    """Who spends (seed 004's API key): an agent's token spends as the agent, any other
    as its member."""
    return f"agent:{agent}" if agent else f"member:{member}"


def principal_caller(p: Principal) -> str:
    """A principal's caller: a member in person in an agent's scope spends as itself."""
    return caller_of(p.member, p.agent if p.is_agent else None)


@dataclass
class Account:
    """A metered org's holds as last read, with this process's spending since."""

    suspended: bool
    balance: int
    monthly_cap: int | None
    spent: dict[str, int] = field(default_factory=dict)  # caller -> credits this month

    def spend(self, caller: str, credits: int) -> None:
        self.balance -= credits
        self.spent[caller] = self.spent.get(caller, 0) + credits


@dataclass(frozen=True)
class Hold:
    code: HoldCode
    status: int
    title: str
    detail: str


def hold_on(account: Account | None, caller: str, charge: int = 0) -> Hold | None:
    """Why a call of ``caller`` that would charge ``charge`` credits is refused, if it is:
    every call while the org is suspended, its credit spent or the caller at its cap (seed
    004: reads included); a charging one that needs more than is left."""
    if account is None:
        return None
    if account.suspended:
        return Hold(
            "org_suspended",
            403,
            "The organization is suspended",
            "this organization is suspended: every call is refused until an "
            "operator resumes it (erasing memory stays open)",
        )
    if account.balance <= 0 or charge > account.balance:
        need = f"; this call needs {charge}" if charge else ""
        return Hold(
            "payment_required",
            402,
            "Out of credit",
            f"this organization has {max(account.balance, 0)} credits left{need}: "
            "every memory call is refused until credit is added (erasing memory "
            "stays open)",
        )
    spent = account.spent.get(caller, 0)
    cap = account.monthly_cap
    if cap is not None and (spent >= cap or spent + charge > cap):
        return Hold(
            "key_spend_limit_exceeded",
            402,
            "Monthly spend cap reached",
            f"{caller} has spent {spent} of its {cap} credits this month: its calls "
            "are refused until the month rolls over or the cap is raised (erasing "
            "memory stays open)",
        )
    return None


class Accounts:
    def __init__(self, pool: asyncpg.Pool, ttl: float = 5.0) -> None:
        self._pool, self._ttl = pool, ttl
        self._known: dict[str, tuple[Account | None, float]] = {}  # org -> (account, read at)

    async def of(self, orgs: Collection[str], fresh: bool = False) -> dict[str, Account | None]:
        """Each org's account (None: not metered), read again once stale (``fresh``: now)."""
        now = time.monotonic()
        stale = [
            o for o in orgs if fresh or o not in self._known or now - self._known[o][1] >= self._ttl
        ]
        if stale:
            found = await read_accounts(self._pool, stale)
            for org in stale:
                self._known.pop(org, None)  # to the end: the oldest read leave first
                self._known[org] = (found.get(org), now)
            while len(self._known) > KNOWN_ORGS:
                del self._known[next(iter(self._known))]
        return {org: self._known[org][0] for org in orgs}


async def read_accounts(pool: asyncpg.Pool, orgs: list[str]) -> dict[str, Account]:
    """The accounts of those of ``orgs`` that are metered."""
    try:
        rows = await pool.fetch("SELECT * FROM billing.holds($1)", orgs)
    except asyncpg.UndefinedFunctionError:  # the shared migrations have not run yet
        log.warning("billing_missing", detail="no org is metered")
        return {}
    return {r["org"]: _account(r) for r in rows}


def _account(row: asyncpg.Record) -> Account:
    spent = row["spent"]
    spent = json.loads(spent) if isinstance(spent, str) else spent
    return Account(row["suspended"], int(row["balance"]), row["monthly_cap"], dict(spent))
