"""The agent worker's run file: the run's id and the user's message, read at each save, so
the model never supplies them (``engram mcp --run-file``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from engram.mcp_tools import Run, run_file


def test_a_missing_or_empty_file_is_no_run_and_a_new_run_is_read_at_each_call(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.json"
    read = run_file(path)
    assert read() == Run() and read().fields() == {}
    path.write_text("  \n")
    assert read() == Run()
    path.write_text('{"run_id": "r1", "user_message": "Remember: tea."}')
    assert read().fields() == {"run_id": "r1", "user_message": "Remember: tea."}
    path.write_text('{"run_id": "r2", "user_message": null}')
    assert read().fields() == {"run_id": "r2"}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{", "is not JSON"),
        ('["r1"]', "must be a JSON object of run_id and user_message"),
        ('{"run_id": 7}', "each a string or null"),
        ('{"run": "r1"}', "must be a JSON object of run_id and user_message"),
    ],
)
def test_a_file_the_worker_wrote_wrong_is_a_clear_tool_error(
    tmp_path: Path, text: str, says: str
) -> None:
    path = tmp_path / "run.json"
    path.write_text(text)
    with pytest.raises(ToolError, match=says):
        run_file(path)()
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(ToolError, match="cannot be read"):
        run_file(path)()
