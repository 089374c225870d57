"""Errors of the extractor: one root, small named subclasses."""

from __future__ import annotations


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
