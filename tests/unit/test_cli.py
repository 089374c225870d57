"""The operator CLI's verdicts: a re-embedding pass, the stack's status, and the
arguments it refuses before doing anything."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import jwt
import pytest
from typer.testing import CliRunner

from engram.cli import app
from engram.devstack import PartStatus, stack
from engram.rebuild_cli import _reindex_summary
from services.indexer.reindex import ReindexProgress


def test_a_stopped_reindex_exits_1_and_says_why_and_what_is_done(
    capsys: pytest.CaptureFixture[str],
) -> None:
    stopped = ReindexProgress(
        "m@3", None, total=5, embedded=2, stopped="BudgetExhaustedError: used up"
    )
    assert _reindex_summary(stopped) == 1
    out = capsys.readouterr().out
    assert "stopped (BudgetExhaustedError: used up)" in out and "2 embedded" in out


def test_a_finished_or_empty_pass_exits_0() -> None:
    assert _reindex_summary(ReindexProgress("m@3", "acme", total=3, embedded=3, done=True)) == 0
    assert _reindex_summary(ReindexProgress("m@3", None, done=True)) == 0
    assert _reindex_summary(None) == 0


def part(name: str, running: bool = True, healthy: bool = True) -> PartStatus:
    return PartStatus(name, running, healthy, 1 if running else None, "")


STACK = ["kafka", "postgres", "command", "projector", "indexer", "extractor", "recall"]


@pytest.mark.parametrize(
    ("down", "unhealthy", "code"),
    [
        ((), (), 0),
        (("projector",), (), 3),  # a service died: not a healthy stack
        (("kafka",), (), 3),
        ((), ("recall",), 1),
        (("projector",), ("recall",), 1),  # what runs badly is said first
    ],
)
def test_status_exits_0_healthy_1_unhealthy_3_not_running(
    down: tuple[str, ...], unhealthy: tuple[str, ...], code: int
) -> None:
    parts = [part(n, running=n not in down, healthy=n not in down + unhealthy) for n in STACK]
    assert stack.status_code(parts) == code


def test_infra_only_is_a_healthy_dev_stack_when_the_services_are_not_expected() -> None:
    parts = [
        part("kafka"),
        part("postgres"),
        *(part(n, running=False, healthy=False) for n in STACK[2:]),
    ]
    assert stack.status_code(parts, services_expected=False) == 0
    assert stack.status_code(parts) == 3
    assert (
        stack.status_code([part("kafka", False, False), part("postgres")], services_expected=False)
        == 3
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--org", ""], "Invalid value for '--org': it is empty"),
        (["--org", "acme/x"], "an org has no '/'"),
        (["--member", ""], "Invalid value for '--member': it is empty"),
        (["--member", "  "], "Invalid value for '--member': it is empty"),
        (["--agent", ""], "Invalid value for '--agent': it is empty"),
        (["--member", "a\tb"], "a name must be a string of 1 to 200 characters"),
        (["--org", "x" * 201], "a name must be a string of 1 to 200 characters"),
        (["--ttl", "-1"], "Invalid value for '--ttl'"),
        (["--ttl", "0"], "Invalid value for '--ttl'"),
        (["--session", "b", "--fork-of", "b"], "a session cannot fork itself"),
        (["--fork-of", "a"], "forks a session: give the --session too"),
    ],
)
def test_token_refuses_an_empty_name_a_slash_in_the_org_and_a_ttl_under_1(
    args: list[str], said: str
) -> None:
    result = CliRunner().invoke(app, ["token", *args])
    assert result.exit_code == 2
    assert said in " ".join(result.output.replace("│", " ").split())


def test_token_mints_what_it_is_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_STATE_DIR", str(tmp_path))
    result = CliRunner().invoke(app, ["token", "--org", "acme", "--member", "bob", "--ttl", "60"])
    assert result.exit_code == 0, result.output
    claims = jwt.decode(result.output.strip(), options={"verify_signature": False})
    assert (claims["org"], claims["sub"], claims["exp"] - claims["iat"]) == ("acme", "bob", 60)


@pytest.mark.parametrize("last", ["-1", "10001", "99999999999999999999"])
def test_dlq_list_refuses_a_last_out_of_range(last: str) -> None:
    result = CliRunner().invoke(app, ["dlq", "list", "--last", last])
    assert result.exit_code == 2
    assert "Invalid value for '--last'" in result.output


MCP_SECRET = "a-secret-of-at-least-32-bytes-for-hs256!"


@pytest.mark.parametrize(
    ("token", "said"),
    [
        ("garbage", "not a bearer token"),
        (jwt.encode({"sub": "ana"}, MCP_SECRET), "the org claim must be"),
        (jwt.encode({"org": "acme", "sub": "ana", "exp": 1}, MCP_SECRET), "expired"),
    ],
)
def test_engram_mcp_refuses_a_token_that_can_be_none_at_start(token: str, said: str) -> None:
    result = CliRunner().invoke(app, ["mcp", "--token", token])
    assert result.exit_code == 2
    assert said in result.output


def test_a_letters_text_is_printed_as_text_not_markup_nor_terminal_codes() -> None:
    from engram.operate_cli import _printable

    shown = _printable("pydantic said [/x] \x00 \x1b[31m \ud800 café")
    assert shown == "pydantic said [/x] \\x00 \\x1b[31m \\ud800 café"
    shown.encode("utf-8")  # a terminal takes it


@pytest.mark.parametrize(("behind", "said"), [(7, True), (0, False)])
def test_lag_says_why_an_indexer_may_be_behind(
    monkeypatch: pytest.MonkeyPatch, behind: int, said: bool
) -> None:
    from types import SimpleNamespace

    from engram import operate, operate_cli
    from engram.operate import Lag

    async def lag(*args: object, **kwargs: object) -> list[Lag]:
        row = Lag(
            "engram-indexer", "indexer", "indexer.offsets", "engram.events", 0, 3, 10, 0, True
        )
        return [replace(row, at=10 - behind, behind=behind)]

    settings = SimpleNamespace(kafka_bootstrap_servers="k:9092", database_url="postgresql://x")
    monkeypatch.setattr(operate_cli, "ready_settings", lambda: settings)
    monkeypatch.setattr(operate, "consumer_lag", lag)
    result = CliRunner().invoke(app, ["lag"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "engram-indexer" in result.output
    assert ("reads no event while it has no embedding model" in result.output) is said
