"""Settings of the command service (prefix ENGRAM_COMMAND_)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from contracts.topics import PRUNED_SEGMENT_MS
from engram.settings import ServiceSettings


class CommandSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="ENGRAM_COMMAND_", extra="ignore", frozen=True)

    port: int = 8081
    group_id: str = "engram-command"
    reply_timeout_seconds: float = 15.0
    max_batch: int = 500
    # Save a partition's state every N events, so a restart replays few events.
    checkpoint_every: int = Field(5000, ge=1)
    # Items of the stream states a partition's writer keeps in memory (each stream counts
    # one more); past it, the least recently used streams are dropped after a checkpoint
    # and loaded again from their checkpoint rows when a command for them comes.
    cached_items: int = Field(100_000, ge=1)
    # How often the decided commands are deleted from engram.commands (see
    # engram/log_pruner.py): the topic's segment age, so that every pass closes a segment.
    prune_seconds: float = Field(PRUNED_SEGMENT_MS / 1000, gt=0)
    # How long a promotion's or a fork's read of its source (and a second look for a link's
    # target) waits for the projector to hold what the log held (adapters/projection.py);
    # the partition's writer waits meanwhile. Past it, a promotion or fork is refused (503).
    projection_wait_seconds: float = Field(3.0, gt=0, le=60)
