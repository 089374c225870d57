"""The operator CLI's verdicts on a re-embedding pass."""

from __future__ import annotations

import pytest

from engram.cli import _reindex_summary
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
