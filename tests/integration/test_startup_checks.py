"""A service or a CLI command whose database or broker does not answer refuses to start
with one line that says which and what to do, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engram.db import with_user
from engram.service import unreachable

pytestmark = pytest.mark.integration
ENGRAM = Path(sys.executable).parent / "engram"


async def test_a_stack_that_answers_passes(stack_settings: dict[str, str]) -> None:
    assert (
        await unreachable(stack_settings["DATABASE_URL"], stack_settings["KAFKA_BOOTSTRAP_SERVERS"])
        is None
    )


async def test_each_part_that_does_not_answer_is_named(
    stack_settings: dict[str, str], unused_port: int
) -> None:
    closed = f"postgresql://postgres:hunter2@127.0.0.1:{unused_port}/engram"
    problem = await unreachable(closed, stack_settings["KAFKA_BOOTSTRAP_SERVERS"])
    assert problem is not None
    assert problem.startswith(f"cannot reach PostgreSQL at 127.0.0.1:{unused_port} (DATABASE_URL)")
    assert "engram up" in problem and "hunter2" not in problem

    database = stack_settings["DATABASE_URL"]
    problem = await unreachable(database, f"127.0.0.1:{unused_port}")
    assert problem is not None
    assert problem.startswith(
        f"cannot reach Kafka (KAFKA_BOOTSTRAP_SERVERS): 127.0.0.1:{unused_port}:"
    )

    problem = await unreachable(with_user(database, "no_such_role"), None)
    assert problem is not None
    assert "(DATABASE_URL) refused the connection" in problem and "no_such_role" in problem


@pytest.mark.parametrize("service", ["command", "projector", "indexer", "extractor", "recall"])
def test_a_service_without_its_database_refuses_to_start_in_one_line(
    service: str, unused_port: int, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "DATABASE_URL": f"postgresql://postgres@127.0.0.1:{unused_port}/engram",
        "ENGRAM_STATE_DIR": str(tmp_path),
        f"ENGRAM_{service.upper()}_PORT": str(unused_port),
    }
    out = subprocess.run(
        [sys.executable, "-m", f"services.{service}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 1
    lines = (out.stdout + out.stderr).strip().splitlines()
    assert len(lines) == 1, lines
    logged = json.loads(lines[0])
    assert logged["event"] == "startup_refused" and logged["service"] == service
    assert logged["error"].startswith("cannot reach PostgreSQL")


def test_a_bad_setting_refuses_the_start_by_name(unused_port: int, tmp_path: Path) -> None:
    env = {**os.environ, "ENGRAM_COMMAND_MAX_BATCH": "many", "ENGRAM_STATE_DIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "services.command"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 1
    assert "Traceback" not in out.stdout + out.stderr
    # One JSON line, as every refusal (QA: refused before the app set logging up, it was
    # the console's format, with no service).
    [line] = (out.stdout + out.stderr).strip().splitlines()
    logged = json.loads(line)
    assert (logged["event"], logged["service"]) == ("startup_refused", "command")
    assert logged["error"].startswith(
        "invalid settings: ENGRAM_COMMAND_MAX_BATCH: Input should be a valid integer"
    )


@pytest.mark.parametrize("command", [["setup"], ["replay"], ["reindex"]])
def test_a_cli_command_without_its_database_says_so_in_one_line(
    command: list[str], unused_port: int, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "DATABASE_URL": f"postgresql://postgres@127.0.0.1:{unused_port}/engram",
        "ENGRAM_STATE_DIR": str(tmp_path),
        "COLUMNS": "400",
    }
    out = subprocess.run(
        [str(ENGRAM), *command], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr.startswith(f"error: cannot reach PostgreSQL at 127.0.0.1:{unused_port}")
    assert len(out.stderr.strip().splitlines()) == 1
