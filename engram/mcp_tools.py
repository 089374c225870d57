"""Engram as MCP tools (seed 004's surface: ``memory__remember``, ``memory__search`` …) for
agent workers: a thin client of the command and recall services' HTTP APIs, acting with
one bearer token, so every rule (scopes, confirmation, proposals, forgetting) is theirs.
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

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import httpx
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import StrictBool

from engram.billing import ERASING_ONLY
from engram.mcp_errors import EngramProblem, EngramServer

Scope = Literal["private", "shared", "agent", "session", "project"]
MAX_ID = 64  # as the commands take an item id
Kind = Literal["fact", "preference", "decision", "procedure", "lesson", "note", "hypothesis"]
# A memory's scope as stored (``member:ana``) -> the choice a command names.
_CHOICE = {
    "member": "private",
    "shared": "shared",
    "agent": "agent",
    "session": "session",
    "project": "project",
}


def memory_path(item_id: str, action: str = "") -> str:
    """``/v1/memories/<id>[/<action>]``, the id one escaped path segment: an id holding
    ``/``, ``?`` or ``..`` names no other route."""
    return _path("/v1/memories", item_id, "id", "a memory's id", action)


def proposal_path(proposal_id: str, action: str) -> str:
    """``/v1/proposals/<id>/<action>``, escaped as ``memory_path`` escapes."""
    return _path("/v1/proposals", proposal_id, "proposal_id", "a proposal's id", action)


def _path(collection: str, value: str, field: str, what: str, action: str) -> str:
    # "." and ".." stay as they are when escaped, and an HTTP client resolves them (QA:
    # "." read the list of memories, "../memories/<id>/disable" disabled one).
    # And no "/": the services decode an escaped one before they route (QA: "<id>/revisions"
    # read the memory's revisions). No memory or proposal id holds one.
    if not value or len(value) > MAX_ID or value in (".", "..") or "/" in value:
        raise ToolError(f"{field}: {what}, 1 to {MAX_ID} characters, no '/', not '.' or '..'")
    return f"{collection}/{quote(value, safe='')}" + (f"/{action}" if action else "")


class Engram:
    """The two services, called with the token; their problems raised as tool errors."""

    def __init__(self, token: str, command_url: str, recall_url: str, timeout: float) -> None:
        self._http = httpx.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, timeout=timeout
        )
        self._command, self._recall = command_url.rstrip("/"), recall_url.rstrip("/")

    async def command(self, path: str, body: dict[str, Any], method: str = "POST") -> Any:
        return await self._call(method, f"{self._command}{path}", json=body)

    async def recall(
        self, path: str, params: dict[str, Any] | None = None, body: dict[str, Any] | None = None
    ) -> Any:
        method = "POST" if body is not None else "GET"
        return await self._call(method, f"{self._recall}{path}", params=params, json=body)

    async def memory_on(self) -> bool:
        """Whether the services serve this token its memory: false only when they refuse a
        read as ``memory_off`` (an agent of an org whose memory is off) or hold the org or
        the caller (seed 004: only erasing stays open; QA: every tool was listed). A
        service that cannot be reached says nothing either way: the tools stay listed and
        their calls say what is wrong."""
        try:
            await self.recall("/v1/memories", {"limit": 1})
        except EngramProblem as problem:
            return problem.code not in ERASING_ONLY
        except ToolError:
            return True
        return True

    async def scope_of(self, item_id: str) -> tuple[str, int]:
        """The scope choice and the current revision of a memory the caller can see."""
        item = await self.recall(memory_path(item_id))
        return _CHOICE[item["scope"].split(":", 1)[0]], int(item["revision"])

    async def _call(self, method: str, url: str, **kw: Any) -> Any:
        kw = {k: v for k, v in kw.items() if v is not None}
        try:
            r = await self._http.request(method, url, **kw)
        except httpx.HTTPError as exc:
            raise ToolError(f"Engram is not reachable at {url}: {exc}") from exc
        if r.status_code >= 400:
            raise EngramProblem(r)
        return r.json()

    async def aclose(self) -> None:
        await self._http.aclose()


@dataclass(frozen=True)
class Run:
    """What the agent worker says of the run the model acts in: its id (the org's cap on
    candidates counts per run) and the user's message (an agent's save is confirmed only
    when it asks for it). Never the model's to say: a tool argument would let the model
    write its own "Remember this for everyone" (a seed coverage audit)."""

    run_id: str | None = None
    user_message: str | None = None

    def fields(self) -> dict[str, str]:
        return _present({"run_id": self.run_id, "user_message": self.user_message})


def no_run() -> Run:
    return Run()


def run_file(path: Path) -> Callable[[], Run]:
    """The run as the worker last wrote it to ``path`` (JSON: ``run_id``, ``user_message``),
    read at each call that saves; no file, or an empty one, is no run (an agent's saves
    then wait as candidates)."""

    def read() -> Run:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return Run()
        except (OSError, UnicodeDecodeError) as exc:
            raise ToolError(f"the agent's run file {path} cannot be read: {exc}") from exc
        if not text.strip():
            return Run()
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ToolError(f"the agent's run file {path} is not JSON: {exc}") from exc
        if (
            not isinstance(data, dict)
            or set(data) - {"run_id", "user_message"}
            or not all(v is None or isinstance(v, str) for v in data.values())
        ):
            raise ToolError(
                f"the agent's run file {path} must be a JSON object of run_id and "
                "user_message, each a string or null"
            )
        return Run(data.get("run_id"), data.get("user_message"))

    return read


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

    @server.tool(name="memory__remember")
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
        return dict(await api.command("/v1/memories", _present(body) | run().fields()))

    @server.tool(name="memory__search")
    async def search(query: str, limit: int = 10) -> dict[str, Any]:
        """Find memories relevant to the current task. A phrase in double quotes must
        appear in a memory as written."""
        return dict(await api.recall("/v1/search", body={"query": query, "limit": limit}))

    @server.tool(name="memory__get")
    async def get(id: str) -> dict[str, Any]:
        """Read one memory in full by ID."""
        return dict(await api.recall(memory_path(id)))

    @server.tool(name="memory__list")
    async def list_memories(limit: int = 20, cursor: str | None = None) -> dict[str, Any]:
        """List memories newest first, a page at a time (pass the answer's next)."""
        return dict(await api.recall("/v1/memories", {"limit": limit, "cursor": cursor}))

    @server.tool(name="memory__ingest")
    async def ingest(
        messages: list[str], scope: Scope = "private", related_ids: list[str] | None = None
    ) -> dict[str, Any]:
        """Save recent messages as memories, one memory per message."""
        body = {
            "messages": [{"content": m} for m in messages],
            "scope": scope,
            "related_ids": related_ids,
        }
        return dict(await api.command("/v1/memories/ingest", _present(body) | run().fields()))

    @server.tool(name="memory__update")
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
        current, revision = await api.scope_of(id)
        if scope is not None:
            move = {"scope": scope, "from_scope": current, "base_revision": revision}
            return dict(await api.command(memory_path(id, "move"), move))
        if relabel:  # on a teammate's memory, a proposal of them
            body = _present(
                {"base_revision": revision, "scope": current, "kind": kind, "tags": tags}
            )
            return await _or_propose(api, id, "relabel", body, reason)
        if pinned is not None:
            change = "pin" if pinned else "unpin"
            return await _or_propose(api, id, change, {"scope": current}, reason)
        body = {
            "content": content,
            "base_revision": revision,
            "scope": current,
            "related_ids": related_ids,
        }
        return await _or_propose(api, id, "correct", _present(body) | run().fields(), reason)

    @server.tool(name="memory__delete")
    async def delete(id: str, scope: Scope | None = None) -> dict[str, Any]:
        """Remove one of your memories for good (its text leaves every copy). Its scope is
        looked up when not given; while memory is off it cannot be, so give it then."""
        choice: str | None = scope
        if choice is None:
            try:
                choice, _ = await api.scope_of(id)
            except EngramProblem as problem:
                if problem.code not in ERASING_ONLY:
                    raise
                why = "memory is off" if problem.code == "memory_off" else problem.code
                raise ToolError(
                    f"{why} for this org, so the memory cannot be read to find its scope "
                    "(erasing stays open): give its scope (private, shared, agent, session "
                    "or project)"
                ) from problem
        return dict(await api.command(memory_path(id, "forget"), {"scope": choice}))

    @server.tool(name="memory__clear_all")
    async def clear_all(confirm: StrictBool, scope: Scope = "private") -> dict[str, Any]:
        """Delete all memory of one scope; only with confirm=true."""
        return dict(await api.command("/v1/memories/clear", {"confirm": confirm, "scope": scope}))

    @server.tool(name="memory__link")
    async def link(
        id: str, target_id: str, kind: str = "related", weight: float | None = None
    ) -> dict[str, Any]:
        """Link one of your memories to another one you can see."""
        scope, _ = await api.scope_of(id)
        body = {"target_id": target_id, "kind": kind, "weight": weight, "scope": scope}
        return dict(await api.command(memory_path(id, "link"), _present(body)))

    @server.tool(name="memory__unlink")
    async def unlink(id: str, target_id: str, kind: str = "related") -> dict[str, Any]:
        """Remove one of those links."""
        scope, _ = await api.scope_of(id)
        body = {"target_id": target_id, "kind": kind, "scope": scope}
        return dict(await api.command(memory_path(id, "unlink"), body))

    @server.tool(name="memory__list_links")
    async def list_links(
        id: str, direction: Literal["out", "in", "both"] = "both"
    ) -> dict[str, Any]:
        """List a memory's links, outbound or inbound."""
        return dict(await api.recall(memory_path(id, "links"), {"direction": direction}))

    @server.tool(name="memory__archive")
    async def archive(
        id: str, superseded_by: str | None = None, reason: str | None = None
    ) -> dict[str, Any]:
        """Retire a stale memory, naming the one that supersedes it."""
        scope, _ = await api.scope_of(id)
        body = _present({"superseded_by": superseded_by, "scope": scope})
        return await _or_propose(api, id, "archive", body, reason)

    @server.tool(name="memory__restore")
    async def restore(id: str, reason: str | None = None) -> dict[str, Any]:
        """Bring an archived memory back."""
        scope, _ = await api.scope_of(id)
        return await _or_propose(api, id, "unarchive", {"scope": scope}, reason)

    @server.tool(name="memory__list_proposals")
    async def list_proposals(view: Literal["review", "mine", "all"] = "all") -> dict[str, Any]:
        """List proposed changes to memories you can see."""
        return dict(await api.recall("/v1/proposals", {"view": view}))

    @server.tool(name="memory__withdraw_proposal")
    async def withdraw_proposal(proposal_id: str) -> dict[str, Any]:
        """Take back a proposal you made."""
        return dict(await api.command(proposal_path(proposal_id, "withdraw"), {}))

    return server


async def _or_propose(
    api: Engram, item_id: str, change: str, body: dict[str, Any], reason: str | None
) -> dict[str, Any]:
    """Change the memory at once, or, when it is a teammate's, propose the change with the
    reason: the answer then says ``status: proposed`` (seed 004)."""
    try:  # the change's name is its route's action
        return dict(await api.command(memory_path(item_id, change), body))
    except EngramProblem as refused:
        if refused.code != "proposal_required":
            raise
        problem = refused
    if not reason:  # a teammate's memory, or a shared fact the user's message left alone
        raise ToolError(f"{problem.detail_line}: give a reason to propose the change")
    if body.get("related_ids"):
        raise ToolError(
            f"{problem.detail_line}: a proposal cannot add links; propose without "
            "related_ids, or link from one of your own memories"
        )
    _, revision = await api.scope_of(item_id)
    proposal = {
        "change": change,
        "base_revision": revision,
        "reason": reason,
        "scope": "shared",
        "content": body.get("content"),
        "superseded_by": body.get("superseded_by"),
        "kind": body.get("kind"),
        "tags": body.get("tags"),
    }
    answer = await api.command(memory_path(item_id, "propose"), _present(proposal))
    return {**answer, "status": "proposed"}  # the memory itself is unchanged


def _present(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if v is not None}
