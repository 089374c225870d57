"""A bad setting or a malformed key refuses the start with one clear message."""

from __future__ import annotations

import base64

import pytest
from rich.console import Console

from engram.crypto import load_master_key
from engram.demo import run_demo
from engram.embeddings.settings import EmbeddingSettings
from engram.service import StartupRefused, load_settings, unreachable
from engram.settings import CommonSettings
from services.command.settings import CommandSettings


def test_a_bad_setting_names_its_variable_and_never_its_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ENGRAM_COMMAND_CHECKPOINT_EVERY", "0")
    with pytest.raises(StartupRefused) as refused:
        load_settings(CommandSettings)  # a field under the service's prefix
    assert str(refused.value) == (
        "invalid settings: ENGRAM_COMMAND_CHECKPOINT_EVERY: "
        "Input should be greater than or equal to 1"
    )
    monkeypatch.setenv("ENGRAM_PARTITIONS", "secret-looking-value")
    with pytest.raises(StartupRefused, match="ENGRAM_PARTITIONS: Input should be a valid integer"):
        load_settings(CommonSettings)  # a field read under its alias
    with pytest.raises(StartupRefused) as refused:
        load_settings(CommonSettings)
    assert "secret-looking-value" not in str(refused.value)


def test_a_check_of_several_variables_is_its_own_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """QA: a check over the whole model (no field of its own) read ": Value error, ..."."""
    monkeypatch.setenv("MEMORY_EMBEDDING_PROVIDER", "openai")
    monkeypatch.delenv("MEMORY_EMBEDDING_URL", raising=False)
    with pytest.raises(StartupRefused) as refused:
        load_settings(EmbeddingSettings)
    assert str(refused.value).startswith(
        "invalid settings: MEMORY_EMBEDDING_PROVIDER=openai needs MEMORY_EMBEDDING_URL"
    )


def test_a_good_environment_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_COMMAND_CHECKPOINT_EVERY", "7")
    assert load_settings(CommandSettings).checkpoint_every == 7


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("not base64!", "ENGRAM_MASTER_KEY is not valid base64"),
        (base64.b64encode(b"short").decode(), "must be 32 bytes, base64-encoded \\(it holds 5\\)"),
    ],
)
def test_a_malformed_master_key_refuses_the_start(given: str, message: str) -> None:
    with pytest.raises(StartupRefused, match=message):
        load_master_key(CommonSettings.model_validate({"ENGRAM_MASTER_KEY": given}))


def test_production_without_a_master_key_refuses_the_start() -> None:
    with pytest.raises(StartupRefused, match="production refuses to start without"):
        load_master_key(CommonSettings.model_validate({"ENGRAM_ENV": "production"}))


async def test_the_demo_without_services_says_so_in_one_line(unused_port: int) -> None:
    console = Console(record=True, width=200)
    url = f"http://127.0.0.1:{unused_port}"
    assert await run_demo(url, url, console, deadline_seconds=1) == 1
    printed = console.export_text()
    assert printed.startswith(f"no answer from {url}/ (ConnectError)")
    assert "Traceback" not in printed


@pytest.mark.parametrize("url", ["garbage", "mysql://ana@db/engram", "postgresql://db:port/x"])
async def test_a_database_url_that_is_no_url_is_named(url: str) -> None:
    problem = await unreachable(url, None)
    assert problem is not None
    assert problem.startswith("DATABASE_URL is not a PostgreSQL URL")
