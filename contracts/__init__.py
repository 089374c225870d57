"""Engram's wire contracts: the single source of truth for every message.

Every service imports this package and nothing of another service. Messages
are frozen pydantic models; their wire name is a stable ``type`` string.
"""
