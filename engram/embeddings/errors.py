"""Errors of the embedding providers: one root, small named subclasses, mapped at the
provider boundary (HTTP statuses, transport failures, a missing model)."""

from __future__ import annotations


class ProviderError(Exception):
    """Root of the embedding providers' errors."""


class EmbeddingError(ProviderError):
    """The provider refused the request or answered nonsense: retrying will not help."""


class TransientEmbeddingError(EmbeddingError):
    """A failure worth retrying with backoff: HTTP 429 or 5xx, a timeout, a dropped connection."""

    def __init__(self, detail: str, retry_after: float | None = None) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class BudgetExhaustedError(ProviderError):
    """Today's remote AI request budget is used up; the work waits for tomorrow's budget."""


class ModelUnavailableError(ProviderError):
    """The local model or its tokenizer is not installed (the ``embeddings`` extra)."""
