"""Seed 004's accounts as Postgres holds them (``billing.holds``): read by the command
service's writer, with the org's other limits, and by ``engram billing``."""

from __future__ import annotations

import json

import asyncpg

from engram.billing import Account
from engram.logging import get_logger

log = get_logger(__name__)


async def read_accounts(pool: asyncpg.Pool, orgs: list[str]) -> dict[str, Account]:
    """The accounts of those of ``orgs`` that are metered."""
    try:
        rows = await pool.fetch("SELECT * FROM billing.holds($1)", orgs)
    except asyncpg.UndefinedFunctionError:  # the shared migrations have not run yet
        log.warning("billing_missing", detail="no org is metered")
        return {}
    return {r["org"]: account_of(r) for r in rows}


def account_of(row: asyncpg.Record) -> Account:
    """An account from a ``billing.holds`` row (or ``billing.org_holds``)."""
    spent = row["spent"]
    spent = json.loads(spent) if isinstance(spent, str) else spent
    return Account(row["suspended"], int(row["balance"]), row["monthly_cap"], dict(spent))
