"""Embedding models shared by the services that need the same vectors: the indexer
embeds item text with them, recall embeds queries with the very same model."""
