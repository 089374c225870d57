"""A legacy MEMORY.md is imported once, as a pinned note (seed 000): the CLI reads the
file, the command service saves it under one command id per scope, so a second import
gets the first answer and saves nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from engram.cli import app
from tests.conftest import caller
from tests.support import eventually

pytestmark = pytest.mark.e2e


async def test_memory_md_is_imported_once_as_a_pinned_note(
    services: dict[str, str], tmp_path: Path
) -> None:
    ana, cli = caller(), CliRunner()
    legacy = tmp_path / "MEMORY.md"
    legacy.write_text("# Notes\n- Ana prefers short answers.\n- Deploys on Tuesdays.\n")
    args = [
        "import-memory-md",
        str(legacy),
        "--token",
        ana.token,
        "--command-url",
        services["command"],
    ]

    first = cli.invoke(app, args)
    assert first.exit_code == 0, first.output
    said = " ".join(first.output.split())  # as the console wrapped it (the path is long)
    assert "imported as pinned note" in said and "(active)" in said
    item_id = said.split("pinned note ")[1].split()[0]
    again = cli.invoke(app, args)
    assert again.exit_code == 0, again.output
    assert f"imported before, as memory {item_id}" in " ".join(again.output.split())

    async with httpx.AsyncClient(timeout=10) as http:

        async def found() -> dict[str, Any] | None:
            r = await http.get(f"{services['recall']}/v1/memories/{item_id}", headers=ana.headers)
            return r.json() if r.status_code == 200 else None

        item = await eventually(found, what="the imported note in recall")
        listed = await http.get(f"{services['recall']}/v1/memories", headers=ana.headers)
    assert (item["kind"], item["pinned"], item["revision"]) == ("note", True, 1)
    assert item["content"] == legacy.read_text().strip()  # as every command's text is
    assert [m["item_id"] for m in listed.json()["memories"]] == [item_id]  # saved once


async def test_a_file_too_long_or_unreadable_is_refused_and_nothing_is_saved(
    services: dict[str, str], tmp_path: Path
) -> None:
    ana, cli = caller(), CliRunner()
    long = tmp_path / "MEMORY.md"
    long.write_text("x" * 4001)
    refused = cli.invoke(
        app,
        ["import-memory-md", str(long), "--token", ana.token, "--command-url", services["command"]],
    )
    assert refused.exit_code == 1
    refusal = " ".join(refused.output.split())
    assert "4001 characters" in refusal and "4000" in refusal
    missing = cli.invoke(
        app,
        [
            "import-memory-md",
            str(tmp_path / "nope.md"),
            "--token",
            ana.token,
            "--command-url",
            services["command"],
        ],
    )
    assert missing.exit_code == 1 and "cannot read" in " ".join(missing.output.split())
    route = f"{services['command']}/v1/memories/import-memory-md"
    async with httpx.AsyncClient(timeout=10) as http:
        empty = await http.post(route, headers=ana.headers, json={"content": "  "})
        no_agent = await http.post(
            route, headers=ana.headers, json={"content": "notes", "scope": "agent"}
        )
        listed = await http.get(f"{services['recall']}/v1/memories", headers=ana.headers)
    assert empty.status_code == 422 and "not empty" in empty.json()["detail"]
    assert no_agent.status_code == 403  # the token names no agent
    assert listed.status_code == 200 and listed.json()["memories"] == []
