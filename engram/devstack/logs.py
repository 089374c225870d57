"""The parts' logs: each run appended to ``<state>/logs/<part>.log`` after a banner, and the
end of a log, for ``engram dev logs`` and for the error that says why a part failed."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

LOG_TAIL_LINES = 30
_LOG_BANNER = "===== engram devstack:"


def append_banner(log_path: Path, what: str) -> None:
    """Mark where a run starts in an appended log, so a tail shows only the latest attempt."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now().isoformat(timespec="seconds")
    with log_path.open("a", encoding="utf-8") as log:
        log.write(f"\n{_LOG_BANNER} {what} at {stamp} =====\n")


def tail(log_path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with log_path.open("rb") as log:
            log.seek(0, os.SEEK_END)
            size = log.tell()
            log.seek(max(0, size - 256 * 1024))
            text = log.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def tail_report(log_path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The end of a log for an error message, limited to the latest run's lines."""
    kept = tail(log_path, lines).splitlines()
    starts = [i for i, line in enumerate(kept) if line.startswith(_LOG_BANNER)]
    if starts:
        kept = kept[starts[-1] :]
    if not any(line.strip() for line in kept[1:] if not line.startswith(_LOG_BANNER)):
        return f"(nothing logged in {log_path} by this run)"
    return f"last lines of {log_path}:\n" + "\n".join(kept)
