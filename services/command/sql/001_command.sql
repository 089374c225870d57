-- The command writer's checkpoints: a partition's decision state as of an
-- offset in engram.events. Restore = checkpoint + the events after it.
CREATE SCHEMA IF NOT EXISTS command;
CREATE TABLE IF NOT EXISTS command.checkpoints (
    events_partition integer PRIMARY KEY,
    next_offset      bigint  NOT NULL,
    state            bytea   NOT NULL,
    saved_at         timestamptz NOT NULL DEFAULT now()
);
