"""What made a change (seed 002's memory log: consolidation, person or promotion)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from contracts import commands as c
from services.command.origin import made_by


def test_a_sender_makes_its_own_changes() -> None:
    save = c.RememberMemory(content="Prefers tea.")
    assert made_by(save, is_agent=False) == "person"
    assert made_by(save, is_agent=True) == "agent"
    # A candidate an agent suggests is still the agent's; a person's confirm is the person's.
    assert made_by(c.RememberMemory(content="Prefers tea.", candidate=True), True) == "agent"
    assert made_by(c.ConfirmCandidate(item_id="m1"), is_agent=False) == "person"


def test_extraction_promotion_fork_and_merge_name_themselves() -> None:
    extracted = c.RememberMemory(content="Prefers tea.", candidate=True, extracted=True)
    assert made_by(extracted, is_agent=False) == "extraction"
    assert made_by(c.PromoteSession(), is_agent=True) == "promotion"
    assert made_by(c.ForkSession(), is_agent=True) == "fork"
    assert made_by(c.MergeProposal(proposal_id="p1"), is_agent=False) == "proposal"
    # Proposing, rejecting and withdrawing are their sender's own acts.
    assert made_by(c.RejectProposal(proposal_id="p1"), is_agent=False) == "person"


def test_an_extracted_save_is_only_ever_a_candidate() -> None:
    with pytest.raises(ValidationError, match="only ever a candidate"):
        c.RememberMemory(content="Prefers tea.", extracted=True)
