"""structlog set-up: JSON lines when not on a terminal, readable lines when on one."""

from __future__ import annotations

import logging
import sys
from typing import TextIO, cast

import structlog


def configure_logging(service: str, level: str = "INFO") -> None:
    renderer: structlog.types.Processor = (
        structlog.dev.ConsoleRenderer()
        if sys.stderr.isatty()
        else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=cast(TextIO, _Stderr())),
        cache_logger_on_first_use=True,
    )
    structlog.contextvars.bind_contextvars(service=service)
    # Library loggers (aiokafka, uvicorn) go through stdlib logging: keep them quiet.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s %(message)s")


def process_service() -> str:
    """The service a ``python -m services.<name>`` process runs, from its main module;
    ``engram`` for any other process (the CLI, a test, a benchmark)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    parts = (getattr(spec, "name", "") or "").split(".")
    return parts[1] if len(parts) > 2 and parts[0] == "services" else "engram"


class _Stderr:
    """``sys.stderr`` as it is when a line is written, not when logging was set up: a CLI
    command run in process (the tests run `engram replay` so) has a stderr of its own,
    closed once it returns, and every later line would fail on it."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    return structlog.get_logger(name)
