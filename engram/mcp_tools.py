"""Engram as MCP tools (seed 004's surface: ``memory__remember``, ``memory__search`` …) for
agent workers: a thin client of the command and recall services' HTTP APIs
(``engram/mcp_client.py``), acting with one bearer token, so every rule (scopes,
confirmation, proposals, forgetting) is theirs.
While the token's org has its memory off, ``tools/list`` shows only ``memory__delete`` and
``memory__clear_all`` (seed 004 hides the capability's tools; erasing is never refused).

``engram mcp --token T`` (``engram/operate_cli.py``) serves the tools over stdio, as agent
runtimes launch an MCP server; ``build_server`` makes the same server for tests and other
transports. A service's problem+json answer becomes the tool's error: its code, its detail
and each field it refused (``content: String should have at most 4000 characters``); and
arguments that do not fit a tool's schema, or that it does not take, are named in one line
(``engram/mcp_errors.py``).

A line on stdin that is not JSON gets no answer: the SDK's stdio transport hands it to its
dispatcher as an exception, which drops it (mcp 2.3; upstream python-sdk #2751, PR #2766
not merged). The server goes on serving the next line."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import StrictBool

from engram.mcp_client import (
    MAX_ID,
    Engram,
    Run,
    memory_path,
    no_run,
    present,
    proposal_path,
    run_file,
)
from engram.mcp_errors import EngramServer

__all__ = [
    "MAX_ID",
    "Engram",
    "Kind",
    "Run",
    "Scope",
    "build_server",
    "memory_path",
    "no_run",
    "proposal_path",
    "run_file",
]

Scope = Literal["private", "shared", "agent", "session", "project"]
Kind = Literal["fact", "preference", "decision", "procedure", "lesson", "note", "hypothesis"]


def build_server(
    token: str,
    command_url: str = "http://127.0.0.1:8081",
    recall_url: str = "http://127.0.0.1:8085",
    timeout: float = 30.0,
    run: Callable[[], Run] = no_run,
) -> MCPServer:
    """The tools, acting with ``token``; ``run`` gives the run the model acts in (the
    worker's ``run_file``), which the saving tools send with their commands."""
    api = Engram(token, command_url, recall_url, timeout)
    server = EngramServer(
        "engram",
        instructions="Long-term memory: remember durable facts, preferences and decisions; "
        "search before acting; correct or forget what is wrong.",
    )
    server.shown = api.memory_on  # an org whose memory is off: only the erasing tools
    tools = _Tools(server, api, run)
    for add in _TOOLS:
        add(tools)
    return server


@dataclass(frozen=True)
class _Tools:
    """What every tool acts with: the server that lists it, the services called with the
    token, and the run the model acts in."""

    server: EngramServer
    api: Engram
    run: Callable[[], Run]

    def saved(self, body: dict[str, Any]) -> dict[str, Any]:
        """A saving command's body: the fields given, and the run's."""
        return present(body) | self.run().fields()


def _add_remember(tools: _Tools) -> None:
    @tools.server.tool(name="memory__remember")
    async def remember(
        content: str,
        kind: Kind = "note",
        scope: Scope = "private",
        title: str | None = None,
        key: str | None = None,
        pinned: StrictBool = False,
        related_ids: list[str] | None = None,
    ) -> dict[str, Any]:
        """Save one concise fact, preference, or decision (at most 4,000 characters)."""
        body = {
            "content": content,
            "kind": kind,
            "scope": scope,
            "title": title,
            "key": key,
            "pinned": pinned,
            "related_ids": related_ids,
        }
        return dict(await tools.api.command("/v1/memories", tools.saved(body)))


def _add_reading(tools: _Tools) -> None:
    @tools.server.tool(name="memory__search")
    async def search(query: str, limit: int = 10) -> dict[str, Any]:
        """Find memories relevant to the current task. A phrase in double quotes must
        appear in a memory as written."""
        return dict(await tools.api.recall("/v1/search", body={"query": query, "limit": limit}))

    @tools.server.tool(name="memory__get")
    async def get(id: str) -> dict[str, Any]:
        """Read one memory in full by ID."""
        return dict(await tools.api.recall(memory_path(id)))

    @tools.server.tool(name="memory__list")
    async def list_memories(limit: int = 20, cursor: str | None = None) -> dict[str, Any]:
        """List memories newest first, a page at a time (pass the answer's next)."""
        return dict(await tools.api.recall("/v1/memories", {"limit": limit, "cursor": cursor}))


def _add_ingest(tools: _Tools) -> None:
    @tools.server.tool(name="memory__ingest")
    async def ingest(
        messages: list[str], scope: Scope = "private", related_ids: list[str] | None = None
    ) -> dict[str, Any]:
        """Save recent messages as memories, one memory per message."""
        body = {
            "messages": [{"content": m} for m in messages],
            "scope": scope,
            "related_ids": related_ids,
        }
        return dict(await tools.api.command("/v1/memories/ingest", tools.saved(body)))


def _add_update(tools: _Tools) -> None:
    @tools.server.tool(name="memory__update")
    async def update(
        id: str,
        content: str | None = None,
        pinned: StrictBool | None = None,
        reason: str | None = None,
        related_ids: list[str] | None = None,
        kind: Kind | None = None,
        tags: list[str] | None = None,
        scope: Scope | None = None,
    ) -> dict[str, Any]:
        """Correct an existing memory by ID: its text, only its pin, or only its kind and
        tags; for a teammate's, propose the change, with a reason. Only scope moves one of your
        memories into another of your scopes (a person's, not an agent's; it gets a new
        id)."""
        relabel = kind is not None or tags is not None
        _one_change(content, pinned, relabel, scope, reason, related_ids)
        current, revision = await tools.api.scope_of(id)
        if scope is not None:
            move = {"scope": scope, "from_scope": current, "base_revision": revision}
            return dict(await tools.api.command(memory_path(id, "move"), move))
        if relabel:  # on a teammate's memory, a proposal of them
            body = present(
                {"base_revision": revision, "scope": current, "kind": kind, "tags": tags}
            )
            return await tools.api.change_or_propose(id, "relabel", body, reason)
        if pinned is not None:
            change = "pin" if pinned else "unpin"
            return await tools.api.change_or_propose(id, change, {"scope": current}, reason)
        body = {
            "content": content,
            "base_revision": revision,
            "scope": current,
            "related_ids": related_ids,
        }
        return await tools.api.change_or_propose(id, "correct", tools.saved(body), reason)


def _one_change(
    content: str | None,
    pinned: bool | None,
    relabel: bool,
    scope: str | None,
    reason: str | None,
    related_ids: list[str] | None,
) -> None:
    """Refuses an update of more than one change, or with what its change would drop."""
    changes = [content is not None, pinned is not None, relabel, scope is not None]
    if changes.count(True) != 1:
        raise ToolError(
            "give the corrected content, or only pinned, or only kind and tags, or only "
            "scope (to move it): one change a call"
        )
    if scope is not None and reason:  # QA: dropped without a word
        raise ToolError("scope moves one of your own memories: no proposal, no reason")
    if (relabel or scope is not None) and related_ids:  # QA: dropped without a word
        raise ToolError(
            "kind and tags change alone, as scope does: link with memory__link, or give "
            "related_ids with a corrected content"
        )


def _add_erasing(tools: _Tools) -> None:
    @tools.server.tool(name="memory__delete")
    async def delete(id: str, scope: Scope | None = None) -> dict[str, Any]:
        """Remove one of your memories for good (its text leaves every copy). Its scope is
        looked up when not given; while memory is off it cannot be, so give it then."""
        choice = scope if scope is not None else await tools.api.scope_to_forget(id)
        return dict(await tools.api.command(memory_path(id, "forget"), {"scope": choice}))

    @tools.server.tool(name="memory__clear_all")
    async def clear_all(confirm: StrictBool, scope: Scope = "private") -> dict[str, Any]:
        """Delete all memory of one scope; only with confirm=true."""
        return dict(
            await tools.api.command("/v1/memories/clear", {"confirm": confirm, "scope": scope})
        )


def _add_links(tools: _Tools) -> None:
    @tools.server.tool(name="memory__link")
    async def link(
        id: str, target_id: str, kind: str = "related", weight: float | None = None
    ) -> dict[str, Any]:
        """Link one of your memories to another one you can see."""
        scope, _ = await tools.api.scope_of(id)
        body = {"target_id": target_id, "kind": kind, "weight": weight, "scope": scope}
        return dict(await tools.api.command(memory_path(id, "link"), present(body)))

    @tools.server.tool(name="memory__unlink")
    async def unlink(id: str, target_id: str, kind: str = "related") -> dict[str, Any]:
        """Remove one of those links."""
        scope, _ = await tools.api.scope_of(id)
        body = {"target_id": target_id, "kind": kind, "scope": scope}
        return dict(await tools.api.command(memory_path(id, "unlink"), body))

    @tools.server.tool(name="memory__list_links")
    async def list_links(
        id: str, direction: Literal["out", "in", "both"] = "both"
    ) -> dict[str, Any]:
        """List a memory's links, outbound or inbound."""
        return dict(await tools.api.recall(memory_path(id, "links"), {"direction": direction}))


def _add_archiving(tools: _Tools) -> None:
    @tools.server.tool(name="memory__archive")
    async def archive(
        id: str, superseded_by: str | None = None, reason: str | None = None
    ) -> dict[str, Any]:
        """Retire a stale memory, naming the one that supersedes it."""
        scope, _ = await tools.api.scope_of(id)
        body = present({"superseded_by": superseded_by, "scope": scope})
        return await tools.api.change_or_propose(id, "archive", body, reason)

    @tools.server.tool(name="memory__restore")
    async def restore(id: str, reason: str | None = None) -> dict[str, Any]:
        """Bring an archived memory back."""
        scope, _ = await tools.api.scope_of(id)
        return await tools.api.change_or_propose(id, "unarchive", {"scope": scope}, reason)


def _add_proposals(tools: _Tools) -> None:
    @tools.server.tool(name="memory__list_proposals")
    async def list_proposals(view: Literal["review", "mine", "all"] = "all") -> dict[str, Any]:
        """List proposed changes to memories you can see."""
        return dict(await tools.api.recall("/v1/proposals", {"view": view}))

    @tools.server.tool(name="memory__withdraw_proposal")
    async def withdraw_proposal(proposal_id: str) -> dict[str, Any]:
        """Take back a proposal you made."""
        return dict(await tools.api.command(proposal_path(proposal_id, "withdraw"), {}))


# In the order tools/list shows them.
_TOOLS: tuple[Callable[[_Tools], None], ...] = (
    _add_remember,
    _add_reading,
    _add_ingest,
    _add_update,
    _add_erasing,
    _add_links,
    _add_archiving,
    _add_proposals,
)
