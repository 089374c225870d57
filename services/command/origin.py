"""What made a change, as the change log shows it (seed 002's memory log: "what made it
(consolidation, person or promotion)"). Pure: the command and who sent it decide it."""

from __future__ import annotations

from contracts import commands as c
from contracts.envelope import MadeBy

_BY_TYPE: dict[type[c.Command], MadeBy] = {
    c.PromoteSession: "promotion",
    c.ForkSession: "fork",
    c.MergeProposal: "proposal",
}


def made_by(cmd: c.Command, is_agent: bool) -> MadeBy:
    """Every event of one command is made by the same thing: a promotion's or a fork's
    copies, a merged proposal's change, the extractor's candidate, else its sender."""
    if (by_type := _BY_TYPE.get(type(cmd))) is not None:
        return by_type
    if isinstance(cmd, c.RememberMemory) and cmd.extracted:
        return "extraction"
    return "agent" if is_agent else "person"
