"""Settings of the command service (prefix ENGRAM_COMMAND_)."""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from engram.settings import ServiceSettings


class CommandSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="ENGRAM_COMMAND_", extra="ignore", frozen=True)

    port: int = 8081
    group_id: str = "engram-command"
    reply_timeout_seconds: float = 15.0
    max_batch: int = 500
    # Save a partition's state every N events, so a restart replays few events.
    checkpoint_every: int = 5000
