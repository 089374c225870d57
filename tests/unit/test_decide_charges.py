"""Seed 004's pricing and holds in the decision core: what a command costs (1 credit a
saved memory or a new text; the rest is free) and which calls a held org or caller is
refused."""

from __future__ import annotations

from dataclasses import replace

import pytest

from contracts import commands as c
from contracts.events import MemoryRemembered, MemoryRevised
from engram.billing import Account, caller_of, hold_on
from services.command.charges import cost
from services.command.context import Context
from services.command.errors import Held
from services.command.state import StreamState
from tests.unit.conftest import make_context, run

ANA = caller_of("ana", None)


def metered(account: Account, **kw: object) -> Context:
    return replace(make_context(**kw), account=account, caller=ANA)  # type: ignore[arg-type]


def test_an_org_without_an_account_is_never_charged() -> None:
    [saved] = run(StreamState("acme/member:ana"), c.RememberMemory(content="Tea, no sugar."))
    assert isinstance(saved, MemoryRemembered) and saved.charged == 0


def test_a_save_costs_one_credit_and_a_correction_only_for_a_new_text() -> None:
    state, account = StreamState("acme/member:ana"), Account(False, 10, None)
    [saved] = run(state, c.RememberMemory(content="Tea, no sugar."), metered(account))
    assert isinstance(saved, MemoryRemembered) and saved.charged == 1
    correct = c.CorrectMemory(item_id=saved.item_id, base_revision=1, content="Tea, honey.")
    [new_text] = run(state, correct, metered(account))
    assert isinstance(new_text, MemoryRevised) and new_text.charged == 1
    # Back to a text the memory had: "an update that repeats text already saved is not
    # charged again".
    back = c.CorrectMemory(item_id=saved.item_id, base_revision=2, content="Tea, no sugar.")
    [repeated] = run(state, back, metered(account))
    assert isinstance(repeated, MemoryRevised) and repeated.charged == 0
    free = [
        c.PinMemory(item_id=saved.item_id),
        c.RelabelMemory(item_id=saved.item_id, base_revision=4, kind="preference"),
        c.DisableMemory(item_id=saved.item_id),
        c.ForgetMemory(item_id=saved.item_id),
    ]
    for command in free:
        assert cost(run(state, command, metered(account))) == 0, command


def test_the_extractors_candidates_are_free() -> None:
    learned = c.RememberMemory(content="Ana likes tea.", candidate=True, extracted=True)
    [candidate] = run(StreamState("acme/member:ana"), learned, metered(Account(False, 5, None)))
    assert isinstance(candidate, MemoryRemembered) and candidate.charged == 0


@pytest.mark.parametrize(
    ("account", "code", "status"),
    [
        (Account(True, 100, None), "org_suspended", 403),
        (Account(False, 0, None), "payment_required", 402),
        (Account(False, -3, None), "payment_required", 402),
        (Account(False, 100, 5, {ANA: 5}), "key_spend_limit_exceeded", 402),
    ],
)
def test_a_held_org_or_caller_is_refused_every_call_but_an_erasure(
    account: Account, code: str, status: int
) -> None:
    state = StreamState("acme/member:ana")
    [saved] = run(state, c.RememberMemory(content="Tea."), make_context())
    for command in (c.RememberMemory(content="Coffee."), c.PinMemory(item_id=saved.item_id)):
        with pytest.raises(Held) as held:
            run(state, command, metered(account))
        assert (held.value.code, held.value.status) == (code, status)
    [forgotten] = run(state, c.ForgetMemory(item_id=saved.item_id), metered(account))
    assert forgotten.item_id == saved.item_id


def test_a_command_needing_more_than_is_left_is_refused_whole() -> None:
    state = StreamState("acme/member:ana")
    for account, code in (
        (Account(False, 1, None), "payment_required"),
        (Account(False, 50, 3, {ANA: 2}), "key_spend_limit_exceeded"),
    ):
        [saved] = run(state, c.RememberMemory(content=f"Fact {code}."), metered(account))
        assert saved.charged == 1  # type: ignore[attr-defined]
        account.spend(ANA, 1)  # as the writer does
        with pytest.raises(Held) as held:
            run(state, c.RememberMemory(content=f"Another {code}."), metered(account))
        assert held.value.code == code


def test_holds_name_the_caller_and_what_is_left() -> None:
    assert hold_on(None, ANA) is None
    assert hold_on(Account(False, 3, 10, {ANA: 4}), ANA, charge=2) is None
    short = hold_on(Account(False, 3, None), ANA, charge=5)
    assert short is not None and "3 credits left; this call needs 5" in short.detail
    capped = hold_on(Account(False, 50, 10, {ANA: 10}), ANA)
    assert capped is not None and "member:ana has spent 10 of its 10" in capped.detail
    assert hold_on(Account(False, 50, 10, {ANA: 10}), caller_of("ana", "bot")) is None


def test_a_candidate_of_a_memorys_earlier_text_is_free() -> None:
    """QA: an agent's unasked correction back to a text the memory had waited as a
    candidate, and was charged."""
    state, account = StreamState("acme/member:ana"), Account(False, 10, None)
    asked = "Remember: Deploy on Mondays."
    agent = replace(metered(account), is_agent=True)
    [saved] = run(state, c.RememberMemory(content="Deploy on Mondays.", user_message=asked), agent)
    fridays = c.CorrectMemory(
        item_id=saved.item_id,
        base_revision=1,
        content="Deploy on Fridays.",
        user_message="Remember: Deploy on Fridays.",
    )
    assert cost(run(state, fridays, agent)) == 1
    back = c.CorrectMemory(item_id=saved.item_id, base_revision=2, content="Deploy on Mondays.")
    [waits] = run(state, back, agent)
    assert isinstance(waits, MemoryRemembered) and waits.status == "candidate"
    assert waits.charged == 0


def test_a_charge_names_who_spent_it() -> None:
    state = StreamState("acme/agent:bot")
    ctx = replace(
        make_context(scope="agent:bot"), account=Account(False, 5, None), caller="member:ana"
    )  # a member in person in the agent's scope
    [saved] = run(state, c.RememberMemory(scope="agent", content="Fact."), ctx)
    assert isinstance(saved, MemoryRemembered)
    assert (saved.charged, saved.charged_to) == (1, "member:ana")


async def test_the_writers_of_one_process_spend_from_one_account() -> None:
    """QA: two partitions' writers read a stale org at once, each got an account of its
    own, and together spent past the balance."""
    import asyncio

    from services.command.adapters.policies import OrgPolicies

    class Pool:
        reads = 0

        async def fetch(self, query: str, orgs: list[str]) -> list[dict[str, object]]:
            await asyncio.sleep(0)  # the other writer asks meanwhile
            if "billing.holds" not in query:
                return []
            Pool.reads += 1
            return [
                {
                    "org": "acme",
                    "suspended": False,
                    "balance": 5,
                    "monthly_cap": None,
                    "spent": "{}",
                }
            ]

    policies = OrgPolicies(Pool())
    first, second = await asyncio.gather(policies.limits({"acme"}), policies.limits({"acme"}))
    assert first["acme"].account is second["acme"].account and Pool.reads == 1
