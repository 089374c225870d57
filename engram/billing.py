"""Seed 004's pricing and holds, pure: who spends, and which calls a hold refuses.

An org is metered when operators gave it an account (``engram billing``; table
``billing.accounts``): saving a memory costs 1 credit. Its calls are held (refused) while
it is suspended, while its credit is spent, and while the caller has spent the org's
monthly cap. Erasing is never held. An org without an account is never charged nor held.
The command service's writer reads accounts with the org's other limits
(``services.command.adapters.policies``) and spends from them as it decides; recall
reads its caller's org's (``RecallStore.account``). Both read ``billing_store``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

from engram.auth import Principal

HoldCode = Literal["org_suspended", "payment_required", "key_spend_limit_exceeded"]
HOLDS: frozenset[str] = frozenset(get_args(HoldCode))
# Refusals that leave a caller only erasing: its org's memory off (an agent's), or a hold.
ERASING_ONLY: frozenset[str] = frozenset({"memory_off", *HOLDS})


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
