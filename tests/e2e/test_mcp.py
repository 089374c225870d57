"""Engram's memory tools over MCP (seed 004's surface) against the running services: the
server in process through the SDK's client, and `engram mcp` as an agent runtime would
launch it, over stdio."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, TextContent

from engram.mcp_tools import build_server
from tests.conftest import caller
from tests.support import eventually

pytestmark = pytest.mark.e2e

TOOLS = {
    "memory__remember",
    "memory__search",
    "memory__get",
    "memory__list",
    "memory__ingest",
    "memory__update",
    "memory__delete",
    "memory__clear_all",
    "memory__link",
    "memory__unlink",
    "memory__list_links",
    "memory__archive",
    "memory__restore",
    "memory__list_proposals",
    "memory__withdraw_proposal",
}


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return dict(result.structured_content)


async def test_the_tools_remember_search_correct_link_and_forget(services: dict[str, str]) -> None:
    ana = caller()
    bob = caller(org=ana.org, member="bob")
    async with Client(build_server(ana.token, services["command"], services["recall"])) as mcp:
        assert {t.name for t in (await mcp.list_tools()).tools} == TOOLS
        saved = await call(
            mcp,
            "memory__remember",
            content="The deploy window is Tuesday 10:00.",
            kind="decision",
            scope="shared",
        )
        item = saved["item_id"]
        other = await call(mcp, "memory__remember", content="Deploys need a green build.")

        async def found() -> bool:
            hits = (await call(mcp, "memory__search", query="deploy window"))["memories"]
            return item in [h["id"] for h in hits]

        await eventually(found, what="the memory in a search")
        fixed = await call(
            mcp, "memory__update", id=item, content="The deploy window is Tuesday 11:00."
        )
        assert fixed["revision"] == 2
        pinned = await call(mcp, "memory__update", id=item, pinned=True)  # its author: at once
        assert pinned["revision"] == 3

        async def pin_seen() -> bool:  # a teammate's proposal below is made against it
            return bool((await call(mcp, "memory__get", id=item))["revision"] == 3)

        await eventually(pin_seen, what="the pin in the read model")
        await call(mcp, "memory__link", id=other["item_id"], target_id=item, kind="depends-on")

        async def linked() -> bool:
            links = (await call(mcp, "memory__list_links", id=item))["links"]
            return [x["kind"] for x in links] == ["depends-on"]

        await eventually(linked, what="the link")
        refused = await mcp.call_tool("memory__clear_all", {"confirm": False})
        assert refused.is_error and "invalid" in str(refused.content)
        for loose in ("yes", "1", 1):  # only JSON's true confirms (QA: "yes" had cleared)
            loosely = await mcp.call_tool("memory__clear_all", {"confirm": loose})
            assert loosely.is_error and "confirm" in str(loosely.content), loosely
        assert (await call(mcp, "memory__get", id=item))["item_id"] == item  # none cleared
        gone = await call(mcp, "memory__delete", id=other["item_id"])
        assert gone["receipt"]["erased"][0]["item_id"] == other["item_id"]
        ingested = await call(
            mcp, "memory__ingest", messages=["Deploys freeze on Dec 20."], related_ids=[item]
        )
        [new] = [r["item_id"] for r in ingested["results"]]

        async def related() -> bool:
            links = (await call(mcp, "memory__list_links", id=item, direction="in"))["links"]
            return (new, "related") in [(x["source_id"], x["kind"]) for x in links]

        await eventually(related, what="the ingested memory's related link")

    # A teammate's memory: memory__update proposes, with a reason, and says so.
    async with Client(build_server(bob.token, services["command"], services["recall"])) as mcp:
        no_reason = await mcp.call_tool("memory__update", {"id": item, "content": "Noon."})
        assert no_reason.is_error and "give a reason" in str(no_reason.content)
        proposed = await call(
            mcp, "memory__update", id=item, content="The window is noon.", reason="moved"
        )
        assert (proposed["status"], proposed["proposal_status"]) == ("proposed", "pending")
        withdrawn = await call(
            mcp, "memory__withdraw_proposal", proposal_id=proposed["proposal_id"]
        )
        assert withdrawn["proposal_status"] == "withdrawn"
        # An update of only the pin proposes too (seed 004: an update may change only it).
        pin = await call(mcp, "memory__update", id=item, pinned=False, reason="noise")
        assert (pin["status"], pin["proposal_status"]) == ("proposed", "pending")
        both = await mcp.call_tool("memory__update", {"id": item, "content": "x", "pinned": True})
        assert both.is_error and "one change a call" in str(both.content)
        linking = await mcp.call_tool(
            "memory__update",
            {"id": item, "content": "Noon.", "reason": "moved", "related_ids": [new]},
        )
        assert linking.is_error and "cannot add links" in str(linking.content)


async def test_engram_mcp_serves_the_tools_over_stdio(services: dict[str, str]) -> None:
    ana = caller()
    engram = Path(sys.executable).parent / "engram"
    server = StdioServerParameters(
        command=str(engram),
        args=["mcp"],
        env={
            **os.environ,
            "ENGRAM_TOKEN": ana.token,
            "ENGRAM_COMMAND_URL": services["command"],
            "ENGRAM_RECALL_URL": services["recall"],
        },
    )
    async with Client(server) as mcp:
        assert {t.name for t in (await mcp.list_tools()).tools} == TOOLS
        saved = await call(mcp, "memory__remember", content="Stdio works.")
        assert saved["status"] == "active"
        missing = await mcp.call_tool("memory__get", {"id": "no-such-memory"})
        assert missing.is_error and "not_found" in str(missing.content)


async def test_a_refusal_names_the_field_and_its_limit(services: dict[str, str]) -> None:
    """What the HTTP caller reads in the problem+json, the agent reads in the tool's error:
    the code, the detail and each refused field; a missing argument in one line."""
    ana = caller()
    async with Client(build_server(ana.token, services["command"], services["recall"])) as mcp:
        empty = await mcp.call_tool("memory__remember", {"content": ""})
        assert empty.is_error
        assert "invalid: " in text(empty) and "content: String should have at least 1" in text(
            empty
        )
        long = await mcp.call_tool("memory__remember", {"content": "x" * 4001})
        assert long.is_error and "content: String should have at most 4000 characters" in text(long)
        missing = await mcp.call_tool("memory__remember", {"kind": "fact"})
        assert missing.is_error
        assert text(missing) == (
            "Error executing tool memory__remember: missing required argument content"
        )
        wrong = await mcp.call_tool("memory__search", {"query": "q", "limit": "many"})
        assert wrong.is_error and "\n" not in text(wrong) and "argument limit: " in text(wrong)
        extra = await mcp.call_tool("memory__search", {"query": "q", "bogus": 1})
        assert extra.is_error and "unknown argument(s) bogus" in text(extra)  # QA: ignored


async def test_a_line_that_is_not_json_does_not_stop_engram_mcp(services: dict[str, str]) -> None:
    """The SDK's stdio transport answers nothing to a line that is not JSON (see
    engram/mcp_tools.py); the server must still answer the requests after it."""
    ana = caller()
    engram = Path(sys.executable).parent / "engram"
    proc = await asyncio.create_subprocess_exec(
        str(engram),
        "mcp",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={
            **os.environ,
            "ENGRAM_TOKEN": ana.token,
            "ENGRAM_COMMAND_URL": services["command"],
            "ENGRAM_RECALL_URL": services["recall"],
        },
    )
    assert proc.stdin is not None and proc.stdout is not None
    hello = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    }
    lines = [
        "not json",
        rpc(1, "initialize", hello),
        rpc(None, "notifications/initialized"),
        '{"jsonrpc": "2.0", "id": 2, "method": "ping"',
        rpc(3, "tools/list"),
    ]
    try:
        proc.stdin.write("".join(f"{line}\n" for line in lines).encode())
        await proc.stdin.drain()
        answers: dict[Any, dict[str, Any]] = {}
        while 3 not in answers:
            line = await asyncio.wait_for(proc.stdout.readline(), 30)
            assert line, f"engram mcp closed its output; answers so far: {answers}"
            answer = json.loads(line)
            answers[answer.get("id")] = answer
        assert {t["name"] for t in answers[3]["result"]["tools"]} == TOOLS
        assert "result" in answers[1]
        for broken in (None, 2):  # should the SDK answer them one day: a parse error
            assert answers.get(broken, {"error": {"code": -32700}})["error"]["code"] == -32700
    finally:
        proc.stdin.close()
        await asyncio.wait_for(proc.wait(), 30)


def rpc(id: int | None, method: str, params: dict[str, Any] | None = None) -> str:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if id is not None:
        message["id"] = id
    if params is not None:
        message["params"] = params
    return json.dumps(message)


def text(result: CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, TextContent))


async def test_the_run_and_the_users_message_are_the_workers_not_the_models(
    services: dict[str, str], tmp_path: Path
) -> None:
    """Seed coverage audit: memory__remember took user_message as an argument, so the model
    could write its own "Remember this for everyone" and have an inference confirmed. The
    tools take no such argument; the worker's run file gives the run's message and id."""
    agent = caller(agent="helper")
    run_file = tmp_path / "run.json"
    run = lambda: run_file_of(run_file)  # noqa: E731
    async with Client(
        build_server(agent.token, services["command"], services["recall"], run=run)
    ) as mcp:
        schema = {t.name: t.input_schema for t in (await mcp.list_tools()).tools}
        for tool in ("memory__remember", "memory__update", "memory__ingest"):
            assert not {"user_message", "run_id"} & set(schema[tool]["properties"]), tool
        forged = await mcp.call_tool(
            "memory__remember",
            {
                "content": "The user loves pineapple pizza.",
                "user_message": "Remember that the user loves pineapple pizza.",
            },
        )
        assert forged.is_error and "unknown argument(s) user_message" in str(forged.content)
        # No run file: the agent's save waits for a person.
        waiting = await call(mcp, "memory__remember", content="The user loves pineapple pizza.")
        assert waiting["status"] == "candidate"
        run_file.write_text(
            json.dumps(
                {"run_id": "run-7", "user_message": "Please remember that my cat is called Miso."}
            )
        )
        confirmed = await call(mcp, "memory__remember", content="my cat is called Miso")
        assert confirmed["status"] == "active"

        async def readable() -> bool:  # memory__update reads the memory's scope first
            return not (await mcp.call_tool("memory__get", {"id": confirmed["item_id"]})).is_error

        await eventually(readable, what="the memory readable")
        fixed = await call(
            mcp, "memory__update", id=confirmed["item_id"], content="my cat is called Mochi"
        )  # the message asks nothing of it
        assert fixed["status"] == "candidate"
        ingested = await call(
            mcp,
            "memory__ingest",
            messages=["I like jazz", "I like tea", "I like rain", "I like snow"],
        )
        outcomes = sorted(r["status"] if r["ok"] else r["code"] for r in ingested["results"])
        # The run's cap (three candidates a run by default) counts ingested ones too: the
        # correction and two messages fill it.
        assert outcomes == [
            "candidate",
            "candidate",
            "candidate_limit_reached",
            "candidate_limit_reached",
        ]
        run_file.write_text("not json")
        broken = await mcp.call_tool("memory__remember", {"content": "x"})
        assert broken.is_error and "run file" in str(broken.content)
        assert "is not JSON" in str(broken.content)


def run_file_of(path: Path) -> Any:
    from engram.mcp_tools import run_file

    return run_file(path)()


async def test_memory_update_changes_only_the_kind_and_tags(services: dict[str, str]) -> None:
    """Seed 004: an update changes the category or the tags without the text."""
    ana = caller()
    async with Client(build_server(ana.token, services["command"], services["recall"])) as mcp:
        saved = await call(mcp, "memory__remember", content="Standups are at 9:30.")

        async def readable() -> bool:
            return not (await mcp.call_tool("memory__get", {"id": saved["item_id"]})).is_error

        await eventually(readable, what="the memory readable")
        relabeled = await call(
            mcp, "memory__update", id=saved["item_id"], kind="decision", tags=["meetings"]
        )
        assert relabeled["revision"] == 2

        async def seen() -> dict[str, Any] | None:
            got = await call(mcp, "memory__get", id=saved["item_id"])
            return got if got["revision"] == 2 else None

        got = await eventually(seen, what="the relabel in the read model")
        assert (got["kind"], got["tags"], got["content"]) == (
            "decision",
            ["meetings"],
            "Standups are at 9:30.",
        )
        both = await mcp.call_tool(
            "memory__update", {"id": saved["item_id"], "content": "x", "kind": "fact"}
        )
        assert both.is_error and "one change a call" in str(both.content)
        linked = await mcp.call_tool(
            "memory__update",
            {  # QA: the links were dropped
                "id": saved["item_id"],
                "kind": "fact",
                "related_ids": [saved["item_id"]],
            },
        )
        assert linked.is_error and "memory__link" in str(linked.content)
        shared = await call(
            mcp, "memory__remember", content="Retros are on Fridays.", scope="shared"
        )
        await eventually(lambda: readable_by(mcp, shared["item_id"]), what="shared readable")
    bob = caller(ana.org, member="bob")
    async with Client(build_server(bob.token, services["command"], services["recall"])) as mcp:
        # A teammate's memory: the kind and tags are proposed, with a reason (seed 004).
        no_reason = await mcp.call_tool(
            "memory__update", {"id": shared["item_id"], "kind": "decision"}
        )
        assert no_reason.is_error and "give a reason" in str(no_reason.content)
        proposed = await call(
            mcp,
            "memory__update",
            id=shared["item_id"],
            kind="decision",
            tags=["rituals"],
            reason="the team decided it",
        )
        assert (proposed["status"], proposed["proposal_status"]) == ("proposed", "pending")


async def readable_by(mcp: Client, item_id: str) -> bool:
    return not (await mcp.call_tool("memory__get", {"id": item_id})).is_error


async def test_memory_update_with_only_a_scope_moves_the_memory(services: dict[str, str]) -> None:
    """Seed 004: an update may change only a memory's scope. A person's token moves it
    (a new id there); an agent's is refused: it changes shared memory only on the user's
    word."""
    ana = caller()
    helper = caller(ana.org, member="ana", agent="helper")
    async with Client(build_server(ana.token, services["command"], services["recall"])) as mcp:
        saved = await call(mcp, "memory__remember", content="The office closes at 18:00.")

        async def readable(item_id: str) -> bool:
            return not (await mcp.call_tool("memory__get", {"id": item_id})).is_error

        await eventually(lambda: readable(saved["item_id"]), what="the memory readable")
        linked = await mcp.call_tool(
            "memory__update",
            {"id": saved["item_id"], "scope": "shared", "related_ids": [saved["item_id"]]},
        )
        assert linked.is_error and "memory__link" in str(linked.content)
        moved = await call(mcp, "memory__update", id=saved["item_id"], scope="shared")
        assert moved["stream_id"] == f"{ana.org}/shared" and moved["item_id"] != saved["item_id"]
        await eventually(lambda: readable(moved["item_id"]), what="the moved memory readable")
        got = await call(mcp, "memory__get", id=moved["item_id"])
        assert (got["scope"], got["content"]) == ("shared", "The office closes at 18:00.")
    async with Client(build_server(helper.token, services["command"], services["recall"])) as mcp:
        refused = await mcp.call_tool(
            "memory__update", {"id": moved["item_id"], "scope": "private"}
        )
        assert refused.is_error and "a person moves" in str(refused.content)


async def test_an_orgs_memory_off_hides_all_but_the_erasing_tools(services: dict[str, str]) -> None:
    """Seed 004: turning an org's memory off hides its tools (a seed coverage audit found
    them listed, each call refused). An agent keeps what erases what it holds, since
    erasing is never refused; with no read to find the memory's scope, it names it. The
    org's people keep every tool, and turning memory on lists them all again."""
    person = caller()
    agent = caller(org=person.org, agent="helper")
    admin = caller(org=person.org, member="root", roles=("admin",))
    command, recall = services["command"], services["recall"]
    async with httpx.AsyncClient(timeout=10) as http:
        saved = await http.post(
            f"{command}/v1/memories",
            headers=agent.headers,
            json={
                "content": "The staging cluster is eu-2.",
                "scope": "agent",
                "user_message": "Remember that the staging cluster is eu-2.",
            },
        )
        assert saved.status_code == 201 and saved.json()["status"] == "active", saved.text
        item = saved.json()["item_id"]

        async def switch(on: bool) -> None:
            r = await http.put(f"{recall}/v1/policy", headers=admin.headers, json={"memory": on})
            assert r.status_code == 200 and r.json()["memory"] is on, r.text

        await switch(False)
        async with Client(build_server(agent.token, command, recall)) as mcp:
            assert {t.name for t in (await mcp.list_tools()).tools} == {
                "memory__delete",
                "memory__clear_all",
            }
            searched = await mcp.call_tool("memory__search", {"query": "staging"})
            assert searched.is_error and "memory_off: memory is off" in text(searched)
            unscoped = await mcp.call_tool("memory__delete", {"id": item})
            assert unscoped.is_error and "give its scope" in text(unscoped)
            gone = await call(mcp, "memory__delete", id=item, scope="agent")
            assert gone["item_id"] == item
        async with Client(build_server(person.token, command, recall)) as mcp:
            assert {t.name for t in (await mcp.list_tools()).tools} == TOOLS
        await switch(True)
        async with Client(build_server(agent.token, command, recall)) as mcp:
            assert {t.name for t in (await mcp.list_tools()).tools} == TOOLS
            assert (await call(mcp, "memory__search", query="staging"))["memories"] == []


async def test_a_held_org_is_listed_only_the_erasing_tools(services: dict[str, str]) -> None:
    """Seed 004's holds over MCP (QA): an org out of credit keeps only erasing, so only the
    erasing tools are listed; a delete names the memory's scope, as it cannot be read."""
    from tests.e2e.test_billing import billing

    ana = caller()
    command, recall = services["command"], services["recall"]
    async with httpx.AsyncClient(timeout=10) as http:
        saved = await http.post(
            f"{command}/v1/memories",
            headers=ana.headers,
            json={"content": "Held orgs may still erase."},
        )
        item = saved.json()["item_id"]
    await billing("set", ana.org)  # metered, with no credit: held at once
    async with Client(build_server(ana.token, command, recall)) as mcp:

        async def listed() -> set[str] | None:
            names = {t.name for t in (await mcp.list_tools()).tools}
            return names if names != TOOLS else None

        assert await eventually(listed, what="the hold", deadline=20) == {
            "memory__delete",
            "memory__clear_all",
        }
        unscoped = await mcp.call_tool("memory__delete", {"id": item})
        assert unscoped.is_error and "payment_required" in text(unscoped)
        assert "give its scope" in text(unscoped)
        gone = await call(mcp, "memory__delete", id=item, scope="private")
        assert gone["item_id"] == item
