"""Errors of the extractor: one root, small named subclasses; and how one is told."""

from __future__ import annotations

from pydantic import ValidationError


class ExtractorError(Exception):
    """Root of the extractor's errors."""


class BudgetExhausted(ExtractorError):
    """Today's AI request budget is used up (or AI is switched off): use the rules."""


class AIFailed(ExtractorError):
    """The extraction endpoint failed for good: retries spent, or an answer not worth retrying."""


class AIRetryable(ExtractorError):
    """A 429, a 5xx, a timeout or a broken connection: worth another try after a pause."""

    def __init__(self, detail: str, retry_after: float | None = None) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


# A record's problem names at most this many faults: the text goes to the log and into a
# dead letter, and a record of thousands of unknown fields must not make either huge.
MAX_FAULTS_SHOWN = 10


def problem_text(exc: Exception) -> str:
    """What is wrong with a record, for the log and a dead letter's error. A pydantic error
    is told by its fields' locations and messages only: its own text quotes the input, and a
    conversation turn's input is the user's words."""
    if not isinstance(exc, ValidationError):
        return str(exc)
    faults = exc.errors(include_url=False, include_context=False, include_input=False)
    told = [_fault(f["type"], f["loc"], f["msg"]) for f in faults[:MAX_FAULTS_SHOWN]]
    if len(faults) > MAX_FAULTS_SHOWN:
        told.append(f"and {len(faults) - MAX_FAULTS_SHOWN} more")
    return "; ".join(told)


def _fault(kind: str, loc: tuple[int | str, ...], msg: str) -> str:
    # An unknown field's name is the record's own text, not a field of ours: not told.
    if kind == "extra_forbidden":
        loc = (*loc[:-1], "(an unknown field)")
    return f"{'.'.join(str(part) for part in loc)}: {msg}" if loc else msg
