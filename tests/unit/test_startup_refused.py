"""A bad setting or a malformed key refuses the start with one clear message."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest
from rich.console import Console

from engram.auth import dev_secret
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


def test_dev_secrets_are_only_their_owners_from_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A security review: the dev master key and JWT secret were written under the umask
    (0644) and only then made 0600, in a folder anyone could enter."""
    monkeypatch.setenv("ENGRAM_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("ENGRAM_MASTER_KEY", raising=False)
    old = os.umask(0o022)
    try:
        key = load_master_key(CommonSettings.model_validate({}))
        secret = dev_secret()
    finally:
        os.umask(old)
    folder = tmp_path / "secrets"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for name in ("master-key", "jwt-hs256"):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600
    # Made once: read back the same.
    assert load_master_key(CommonSettings.model_validate({})) == key and dev_secret() == secret
