"""How Engram's MCP tools say no: a service's problem+json as the tool's error (its code,
its detail and each field it refused), and arguments that do not fit a tool's schema, or
that it does not take, named in one line."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, InputRequiredResult
from mcp.types import Tool as MCPTool
from pydantic import ValidationError

# The tools an agent still has while its org's memory is off: the services refuse an
# agent every other command and read then, but never an erasure of what it holds.
ERASING = frozenset({"memory__delete", "memory__clear_all"})


class EngramProblem(ToolError):
    """A service refused the call: its problem's code, detail and field errors."""

    def __init__(self, response: httpx.Response) -> None:
        try:
            problem = response.json()
        except ValueError:
            problem = None
        if not isinstance(problem, dict):
            problem = {"code": str(response.status_code), "detail": response.text[:300]}
        self.code = str(problem.get("code", response.status_code))
        self.problem = problem
        super().__init__(problem_text(self.code, problem))

    @property
    def detail_line(self) -> str:
        """The problem's detail before its ": propose …": what it says of the memory."""
        return str(self.problem.get("detail", self.code)).split(": propose", 1)[0]


def problem_text(code: str, problem: dict[str, Any]) -> str:
    """``invalid: the command is invalid: content: String should have at least 1
    character (title: ...)``: what the HTTP caller reads in the problem+json, on one line."""
    text = f"{code}: {problem.get('detail', '')}"
    errors = problem.get("errors")
    if not isinstance(errors, list) or not errors:
        return text
    # Each field error the detail does not already state (the command service's names
    # the first: QA, the line said it twice).
    said = [_field_error(e) for e in errors if isinstance(e, dict)]
    fields = "; ".join(f for f in said if f not in text)
    return f"{text} ({fields})" if fields else text


def _field_error(error: dict[str, Any]) -> str:
    loc = [str(part) for part in error.get("loc") or []]
    if len(loc) > 1 and loc[0] in ("body", "query", "path"):
        loc = loc[1:]  # FastAPI's request part: the tool's caller knows fields only
    return f"{'.'.join(loc) or 'request'}: {error.get('msg', 'invalid')}"


class EngramServer(MCPServer):
    """The SDK's server, with arguments that fail a tool's schema named in one line, and
    arguments a tool does not take refused (the SDK would drop them silently).

    ``shown`` (when set) says, at each ``tools/list``, whether the caller's memory is on;
    while it is off only the tools named in ``ERASING`` are listed (seed 004: turning the
    capability off hides its tools; erasing is never refused)."""

    _takes: dict[str, set[str]] | None = None
    shown: Callable[[], Awaitable[bool]] | None = None

    async def list_tools(self) -> list[MCPTool]:
        tools = await super().list_tools()
        if self.shown is None or await self.shown():
            return tools
        return [t for t in tools if t.name in ERASING]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        if self._takes is None:
            self._takes = {  # every tool's, a hidden one's too: a call to it still answers
                t.name: set(t.input_schema.get("properties", {}))
                for t in await super().list_tools()
            }
        if name in self._takes and (unknown := sorted(set(arguments) - self._takes[name])):
            raise ToolError(
                f"Error executing tool {name}: unknown argument(s) {', '.join(unknown)}; it "
                f"takes {', '.join(sorted(self._takes[name])) or 'none'}"
            )
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            # A tool's own pydantic error is a crash (UnexpectedToolError), not bad arguments.
            if isinstance(exc, UnexpectedToolError) or not isinstance(
                exc.__cause__, ValidationError
            ):
                raise
            # Chained to the pydantic error still: the SDK logs the refused fields' names.
            raise ToolError(arguments_refused(name, exc.__cause__)) from exc.__cause__


def arguments_refused(tool: str, error: ValidationError) -> str:
    """``Error executing tool memory__remember: missing required argument content``."""
    refused = []
    for e in error.errors():
        name = ".".join(str(part) for part in e["loc"]) or "arguments"
        if e["type"] == "missing":
            refused.append(f"missing required argument {name}")
        else:
            refused.append(f"argument {name}: {e['msg']}")
    return f"Error executing tool {tool}: {'; '.join(refused)}"
