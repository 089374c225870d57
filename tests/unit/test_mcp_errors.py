"""The MCP tools' errors: a service's problem+json, and arguments a tool's schema refuses,
as the one line an agent reads."""

from __future__ import annotations

import httpx
import pytest
from mcp import Client
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent

from engram.mcp_errors import EngramProblem
from engram.mcp_tools import build_server, memory_path, proposal_path


def test_a_problem_names_its_code_detail_and_every_refused_field() -> None:
    body = {
        "code": "invalid",
        "detail": "the request body or parameters are invalid",
        "errors": [
            {"loc": ["body", "content"], "msg": "String should have at most 4000 characters"},
            {"loc": ["query", "limit"], "msg": "Input should be less than or equal to 100"},
        ],
    }
    problem = EngramProblem(httpx.Response(422, json=body))
    assert problem.code == "invalid"
    assert str(problem) == (
        "invalid: the request body or parameters are invalid (content: String should have at "
        "most 4000 characters; limit: Input should be less than or equal to 100)"
    )


def test_a_field_error_the_detail_states_is_not_said_twice() -> None:
    body = {
        "code": "invalid",
        "detail": "the command is invalid: content: String should have at most 4000 characters",
        "errors": [
            {"loc": ["content"], "msg": "String should have at most 4000 characters"},
            {"loc": ["title"], "msg": "String should have at most 200 characters"},
        ],
    }
    assert str(EngramProblem(httpx.Response(422, json=body))) == (
        "invalid: the command is invalid: content: String should have at most 4000 characters "
        "(title: String should have at most 200 characters)"
    )


def test_a_problem_without_errors_or_json_is_its_code_and_detail() -> None:
    conflict = {"code": "stale_revision", "detail": "the memory is at revision 3"}
    assert str(EngramProblem(httpx.Response(409, json=conflict))) == (
        "stale_revision: the memory is at revision 3"
    )
    assert str(EngramProblem(httpx.Response(502, text="Bad gateway"))) == "502: Bad gateway"


async def test_arguments_a_tool_refuses_are_named_in_one_line() -> None:
    server = build_server("token", "http://127.0.0.1:9", "http://127.0.0.1:9")
    async with Client(server) as mcp:
        missing = await mcp.call_tool("memory__update", {})
        wrong = await mcp.call_tool("memory__remember", {"content": "x", "kind": "rumour"})
    assert missing.is_error and wrong.is_error
    assert text(missing) == "Error executing tool memory__update: missing required argument id"
    assert text(wrong).startswith(
        "Error executing tool memory__remember: argument kind: Input should be 'fact'"
    )
    assert "\n" not in text(wrong) and "pydantic" not in text(wrong)


def text(result: CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, TextContent))


def test_a_memory_id_is_one_escaped_segment_of_its_path() -> None:
    assert memory_path("0f8e-1") == "/v1/memories/0f8e-1"
    assert memory_path("0f8e-1", "links") == "/v1/memories/0f8e-1/links"
    assert memory_path("a?x=1", "pin") == "/v1/memories/a%3Fx%3D1/pin"
    # An HTTP client resolves "." and ".." segments, and the services route on the path with
    # "%2F" decoded: "<id>/revisions" read the revisions.
    for bad in ("", "x" * 65, ".", "..", "../../v1/policy", "m-1/revisions", "./"):
        with pytest.raises(ToolError, match="1 to 64 characters"):
            memory_path(bad)


def test_a_proposal_id_is_one_escaped_segment_of_its_path() -> None:
    """QA: "../memories/<id>/disable?x=" as a proposal id disabled the memory."""
    assert proposal_path("p-1", "withdraw") == "/v1/proposals/p-1/withdraw"
    assert proposal_path("p?x=1", "withdraw") == "/v1/proposals/p%3Fx%3D1/withdraw"
    for bad in ("", ".", "..", "../memories/m/disable?x="):
        with pytest.raises(ToolError, match="proposal_id"):
            proposal_path(bad, "withdraw")
