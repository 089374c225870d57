"""A run's cap on candidates (seed 001: a task makes at most three proposals): counted per
scope from the log's candidates, set by the org's policy, None for no cap."""

from __future__ import annotations

import pickle

import pytest

from contracts import commands as c
from contracts.events import MemoryRemembered
from services.command import state as state_module
from services.command.core import Context, decide
from services.command.errors import CandidateLimitReached
from services.command.fold import evolve
from services.command.state import StreamState
from tests.unit.conftest import make_context, run

ASKED = "Please remember this: the VPN rotates on Fridays."


def agent(cap: int | None = c.MAX_CANDIDATES_PER_RUN) -> Context:
    return make_context(is_agent=True, max_candidates_per_run=cap)


def propose(state: StreamState, run_id: str | None, ctx: Context, n: int = 1) -> None:
    for i in range(n):
        [saved] = run(state, c.RememberMemory(content=f"guess {state.seq} {i}", run_id=run_id), ctx)
        assert isinstance(saved, MemoryRemembered) and saved.status == "candidate"


def test_a_run_proposes_at_most_three_candidates_by_default() -> None:
    state = StreamState("acme/member:ana")
    propose(state, "run-1", agent(), n=3)
    with pytest.raises(CandidateLimitReached) as err:
        propose(state, "run-1", agent())
    assert err.value.status == 429
    assert err.value.extra == {"run_id": "run-1", "max_candidates_per_run": 3}
    # Another run, a save from no run, and a save the user asked for are not held back.
    propose(state, "run-2", agent())
    propose(state, None, agent(), n=4)
    [confirmed] = run(
        state,
        c.RememberMemory(content="the VPN rotates on Fridays", user_message=ASKED, run_id="run-1"),
        agent(),
    )
    assert isinstance(confirmed, MemoryRemembered) and confirmed.status == "active"
    assert confirmed.run_id is None and state.candidates_of("run-1") == 3


def test_the_orgs_policy_sets_the_cap_or_lifts_it() -> None:
    state = StreamState("acme/member:ana")
    propose(state, "run-1", agent(cap=1))
    with pytest.raises(CandidateLimitReached):
        propose(state, "run-1", agent(cap=1))
    propose(state, "run-1", agent(cap=None), n=5)
    assert state.candidates_of("run-1") == 6


def test_an_inferred_correction_is_a_candidate_of_its_run_too() -> None:
    state = StreamState("acme/member:ana")
    [fact] = run(state, c.RememberMemory(content="The budget is 1500 EUR."), make_context())
    propose(state, "run-1", agent(cap=1))
    correction = c.CorrectMemory(
        item_id=fact.item_id, base_revision=1, content="The budget is 2000 EUR.", run_id="run-1"
    )
    with pytest.raises(CandidateLimitReached):
        run(state, correction, agent(cap=1))
    [candidate] = run(state, correction, agent(cap=2))
    assert isinstance(candidate, MemoryRemembered) and candidate.run_id == "run-1"
    assert state.candidates_of("run-1") == 2


def test_the_counts_come_from_the_log_and_keep_the_last_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(state_module, "RUNS_KEPT", 2)
    state, replayed = StreamState("acme/member:ana"), StreamState("acme/member:ana")
    for run_id in ("a", "b", "a", "c"):
        for event in decide(
            state, c.RememberMemory(content=f"x {state.seq}", run_id=run_id), agent()
        ):
            evolve(state, state.seq + 1, f"cmd-{state.seq + 1}", event)
            evolve(replayed, replayed.seq + 1, f"cmd-{replayed.seq + 1}", event)
    # "b" was the run used longest ago: it left the count.
    assert state.run_candidates == replayed.run_candidates == {"a": 2, "c": 1}
    assert pickle.loads(pickle.dumps(state)).run_candidates == {"a": 2, "c": 1}
