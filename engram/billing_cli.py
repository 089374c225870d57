"""``engram billing``: an operator's hand on seed 004's pricing and holds.

engram billing show ORG                    the org's account, balance and this month's spending
engram billing set ORG [--add-credits N] [--cap N | --no-cap] [--suspend | --resume]
engram billing off ORG                     stop metering the org (its charges stay recorded)

Setting an org's account meters it (1 credit a saved memory); an org without one is never
charged nor held. The command service and recall see a change within 10 s.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from typing import Any

import asyncpg
import typer
from rich.console import Console

from engram.billing_store import account_of
from engram.db import connect, migrate_shared
from engram.service import StartupRefused, ready_settings

console = Console()
err = Console(stderr=True)
billing_app = typer.Typer(
    help="Seed 004's pricing and holds: an org's credits, cap and suspension.",
    no_args_is_help=True,
)

MAX_CREDITS = 1_000_000_000_000  # credits one grant may add
MAX_CAP = 1_000_000_000

# An org metered anew starts from its grant: what it spent while metered before counts
# as granted too (QA: `off` then `set` left it owing its old spending).
SET_ACCOUNT = """
INSERT INTO billing.accounts AS a (org, credits, monthly_cap, suspended)
VALUES ($1, $2 + (SELECT coalesce(sum(credits), 0) FROM billing.usage WHERE org = $1), $3,
        coalesce($4, false))
ON CONFLICT (org) DO UPDATE SET
    credits = a.credits + $2,
    monthly_cap = CASE WHEN $5 THEN $3 ELSE a.monthly_cap END,
    suspended = coalesce($4, a.suspended),
    updated_at = now()
"""


def register(app: typer.Typer) -> None:
    app.add_typer(billing_app, name="billing")


def _org(org: str) -> str:
    if not org or "/" in org or len(org) > 200 or any(ord(ch) < 32 for ch in org):
        raise typer.BadParameter("an org is 1 to 200 characters, without '/' or control characters")
    return org


@billing_app.command("show")
def show(org: str = typer.Argument(..., callback=_org)) -> None:
    """The org's account: metered or not, suspended, balance, cap, this month's spending."""
    view = _run(lambda url: _show(url, org))
    if not view["metered"]:
        console.print(f"{org}: not metered (no account): nothing is charged nor held")
        return
    console.print_json(json.dumps(view))


@billing_app.command("set")
def set_account(
    org: str = typer.Argument(..., callback=_org),
    add_credits: int = typer.Option(0, min=0, max=MAX_CREDITS, help="Credits to add."),
    cap: int | None = typer.Option(
        None, min=1, max=MAX_CAP, help="Credits one caller may spend a month."
    ),
    no_cap: bool = typer.Option(False, "--no-cap", help="Lift the monthly cap."),
    suspend: bool = typer.Option(False, "--suspend", help="Refuse the org everything."),
    resume: bool = typer.Option(False, "--resume", help="Serve a suspended org again."),
) -> None:
    """Meter the org (an account with no credit refuses its calls), add credits, set or
    lift the monthly cap per caller, suspend or resume it."""
    if cap is not None and no_cap:
        raise typer.BadParameter("give --cap or --no-cap, not both")
    if suspend and resume:
        raise typer.BadParameter("give --suspend or --resume, not both")
    held = True if suspend else False if resume else None
    view = _run(lambda url: _set(url, org, add_credits, cap, cap is not None or no_cap, held))
    console.print_json(json.dumps(view))


@billing_app.command("off")
def off(org: str = typer.Argument(..., callback=_org)) -> None:
    """Stop metering the org: no charge, no hold. Its recorded charges stay."""
    removed = _run(lambda url: _off(url, org))
    console.print(f"{org}: {'no longer metered' if removed else 'was not metered'}")


def _run(work: Callable[[str], Coroutine[Any, Any, Any]]) -> Any:
    """Run ``work`` with the database's address, once PostgreSQL answers."""
    try:
        database_url = ready_settings(kafka=False).database_url
    except StartupRefused as exc:
        err.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from exc
    return asyncio.run(work(database_url))


async def _connect(database_url: str) -> asyncpg.Connection:
    await migrate_shared(database_url)
    return await connect(database_url)


async def _show(database_url: str, org: str) -> dict[str, Any]:
    conn = await _connect(database_url)
    try:
        return await _view(conn, org)
    finally:
        await conn.close()


async def _set(
    database_url: str, org: str, credits: int, cap: int | None, set_cap: bool, suspend: bool | None
) -> dict[str, Any]:
    conn = await _connect(database_url)
    try:
        await conn.execute(SET_ACCOUNT, org, credits, cap, suspend, set_cap)
        return await _view(conn, org)
    finally:
        await conn.close()


async def _off(database_url: str, org: str) -> bool:
    conn = await _connect(database_url)
    try:
        return await conn.execute("DELETE FROM billing.accounts WHERE org = $1", org) != "DELETE 0"
    finally:
        await conn.close()


async def _view(conn: asyncpg.Connection, org: str) -> dict[str, Any]:
    row = await conn.fetchrow("SELECT * FROM billing.holds(ARRAY[$1])", org)
    if row is None:
        return {"org": org, "metered": False}
    account = account_of(row)
    return {
        "org": org,
        "metered": True,
        "suspended": account.suspended,
        "balance": account.balance,
        "monthly_cap": account.monthly_cap,
        "spent_this_month": account.spent,
    }
