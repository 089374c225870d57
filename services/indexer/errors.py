"""Errors of the indexer itself; the providers' errors live in ``engram.embeddings.errors``."""

from __future__ import annotations


class IndexerError(Exception):
    """Root of the indexer's errors."""


class ModelMismatchError(IndexerError):
    """The model is registered with other dimensions: its vectors cannot share one index."""
