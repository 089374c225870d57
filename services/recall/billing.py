"""Seed 004's holds on reads, and the org's account as its people read it.

Every recall route but ``GET /v1/billing`` is refused while the org is held: suspended
(403 ``org_suspended``), out of credit (402 ``payment_required``), or, for one caller,
at its monthly cap (402 ``key_spend_limit_exceeded``). Reads cost nothing; a hold is
read at most every few seconds per org (``RecallStore.account``)."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request, Security

from contracts.orgs import BillingView
from engram.billing import hold_on, principal_caller
from engram.http import BEARER, PROBLEM_RESPONSES, ProblemError, principal_from


async def not_held(request: Request) -> None:
    """Refuse the call while the org, or its caller, is held (seed 004: reads included)."""
    app = request.app.state
    principal = principal_from(request, app.verifier)
    account = await app.store.account(principal)
    if (hold := hold_on(account, principal_caller(principal))) is not None:
        raise ProblemError(hold.status, hold.title, hold.detail, hold.code)


router = APIRouter(responses=PROBLEM_RESPONSES, dependencies=[Security(BEARER)])


@router.get("/v1/billing")
async def get_billing(request: Request) -> BillingView:
    """The org's account: its balance, cap and this month's spending (the caller's own, or
    every caller's for an admin in person)."""
    app = request.app.state
    principal = principal_from(request, app.verifier)
    month = datetime.now(UTC).strftime("%Y-%m")
    account = await app.store.account(principal, fresh=True)
    if account is None:
        return BillingView(metered=False, month=month, spent={})
    caller = principal_caller(principal)
    admin = "admin" in principal.roles and not principal.is_agent
    spent = dict(account.spent) if admin else {caller: account.spent.get(caller, 0)}
    return BillingView(
        metered=True,
        suspended=account.suspended,
        balance=account.balance,
        monthly_cap=account.monthly_cap,
        month=month,
        spent=spent,
    )
