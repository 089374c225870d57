"""JSON Schema of every message, checked in under ``contracts/schemas/``.

Regenerate with ``python -m contracts.schemas``; a test fails when the checked-in
files are stale, so the schemas other teams read always match the code.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import BaseModel

from contracts import envelope, orgs, recall
from contracts.commands import COMMANDS
from contracts.conversations import ConversationTurn
from contracts.events import EVENTS, Labels

SCHEMA_DIR = Path(__file__).parent / "schemas"


def messages() -> dict[str, type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {
        "CommandEnvelope": envelope.CommandEnvelope,
        "EventEnvelope": envelope.EventEnvelope,
        "CommandReply": envelope.CommandReply,
        "RecallRequest": recall.RecallRequest,
        "RecallResponse": recall.RecallResponse,
        "ContextResponse": recall.ContextResponse,
        "GenerationResponse": recall.GenerationResponse,
        "SearchRequest": recall.SearchRequest,
        "OrgPolicy": orgs.OrgPolicy,
        "BillingView": orgs.BillingView,
        "AliasesRequest": orgs.AliasesRequest,
        "AliasesResponse": orgs.AliasesResponse,
        "SearchResponse": recall.SearchResponse,
        "LinksResponse": recall.LinksResponse,
        "ProposalsResponse": recall.ProposalsResponse,
        "RevisionsResponse": recall.RevisionsResponse,
        "ChangesResponse": recall.ChangesResponse,
        "SessionResponse": recall.SessionResponse,
        "ContextsResponse": recall.ContextsResponse,
        "SessionSwitchesRequest": recall.SessionSwitchesRequest,
    }
    found |= {f"commands.{name}": model for name, model in COMMANDS.items()}
    found |= {f"events.{name}": model for name, model in EVENTS.items()}
    found["events.Labels"] = Labels  # what MemoryRemembered.labels holds, sealed
    found["ConversationTurn"] = ConversationTurn
    return found


def rendered() -> dict[str, str]:
    return {
        f"{name}.json": json.dumps(model.model_json_schema(), indent=2, sort_keys=True) + "\n"
        for name, model in sorted(messages().items())
    }


def write(directory: Path = SCHEMA_DIR) -> list[str]:
    directory.mkdir(exist_ok=True)
    files = rendered()
    for stale in set(p.name for p in directory.glob("*.json")) - set(files):
        (directory / stale).unlink()
    for name, text in files.items():
        (directory / name).write_text(text)
    return sorted(files)


if __name__ == "__main__":
    written = write()
    sys.stdout.write(f"wrote {len(written)} schemas to {SCHEMA_DIR}\n")
