"""What Engram's MCP tools (``engram/mcp_tools.py``) stand on: the command and recall
services called with one bearer token, the escaped paths of their memory and proposal
routes, and the run the agent worker says the model acts in. ``engram.mcp_tools``
re-exports these."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from mcp.server.mcpserver.exceptions import ToolError

from engram.billing import ERASING_ONLY
from engram.mcp_errors import EngramProblem

MAX_ID = 64  # as the commands take an item id
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

    async def scope_to_forget(self, item_id: str) -> str:
        """The scope choice of a memory to delete; while the org's memory is off it cannot
        be read, and the error asks for it."""
        try:
            choice, _ = await self.scope_of(item_id)
        except EngramProblem as problem:
            if problem.code not in ERASING_ONLY:
                raise
            why = "memory is off" if problem.code == "memory_off" else problem.code
            raise ToolError(
                f"{why} for this org, so the memory cannot be read to find its scope "
                "(erasing stays open): give its scope (private, shared, agent, session "
                "or project)"
            ) from problem
        return choice

    async def change_or_propose(
        self, item_id: str, change: str, body: dict[str, Any], reason: str | None
    ) -> dict[str, Any]:
        """Change the memory at once, or, when it is a teammate's, propose the change with
        the reason: the answer then says ``status: proposed`` (seed 004)."""
        try:  # the change's name is its route's action
            return dict(await self.command(memory_path(item_id, change), body))
        except EngramProblem as refused:
            if refused.code != "proposal_required":
                raise
            problem = refused
        _check_proposable(problem, body, reason)
        _, revision = await self.scope_of(item_id)
        proposal = _proposal(change, revision, reason, body)
        answer = await self.command(memory_path(item_id, "propose"), proposal)
        return {**answer, "status": "proposed"}  # the memory itself is unchanged

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


def _check_proposable(problem: EngramProblem, body: dict[str, Any], reason: str | None) -> None:
    """A proposal takes a reason and adds no links: else the tool's error says so."""
    if not reason:  # a teammate's memory, or a shared fact the user's message left alone
        raise ToolError(f"{problem.detail_line}: give a reason to propose the change")
    if body.get("related_ids"):
        raise ToolError(
            f"{problem.detail_line}: a proposal cannot add links; propose without "
            "related_ids, or link from one of your own memories"
        )


def _proposal(
    change: str, revision: int, reason: str | None, body: dict[str, Any]
) -> dict[str, Any]:
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
    return present(proposal)


@dataclass(frozen=True)
class Run:
    """What the agent worker says of the run the model acts in: its id (the org's cap on
    candidates counts per run) and the user's message (an agent's save is confirmed only
    when it asks for it). Never the model's to say: a tool argument would let the model
    write its own "Remember this for everyone" (a seed coverage audit)."""

    run_id: str | None = None
    user_message: str | None = None

    def fields(self) -> dict[str, str]:
        return present({"run_id": self.run_id, "user_message": self.user_message})


def no_run() -> Run:
    return Run()


def run_file(path: Path) -> Callable[[], Run]:
    """The run as the worker last wrote it to ``path`` (JSON: ``run_id``, ``user_message``),
    read at each call that saves; no file, or an empty one, is no run (an agent's saves
    then wait as candidates)."""

    def read() -> Run:
        text = _run_text(path)
        if not text.strip():
            return Run()
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ToolError(f"the agent's run file {path} is not JSON: {exc}") from exc
        if not _is_run(data):
            raise ToolError(
                f"the agent's run file {path} must be a JSON object of run_id and "
                "user_message, each a string or null"
            )
        return Run(data.get("run_id"), data.get("user_message"))

    return read


def _run_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolError(f"the agent's run file {path} cannot be read: {exc}") from exc


def _is_run(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and not set(data) - {"run_id", "user_message"}
        and all(v is None or isinstance(v, str) for v in data.values())
    )


def present(body: dict[str, Any]) -> dict[str, Any]:
    """The body without the fields not given (``None``)."""
    return {k: v for k, v in body.items() if v is not None}
