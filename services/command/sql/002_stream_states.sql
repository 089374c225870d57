-- Incremental checkpoints: one row per stream, rewritten only when the stream changed
-- since the last checkpoint (pickling a whole partition's state every 5,000 events
-- took most of a second and grew with every stream ever written). The partition's row
-- in command.checkpoints keeps the offset the stream rows are valid at; its ``state``
-- is only read from checkpoints written before this table existed.
CREATE TABLE command.stream_states (
    events_partition integer NOT NULL,
    stream_id        text    NOT NULL,
    state            bytea   NOT NULL,
    PRIMARY KEY (events_partition, stream_id)
);
ALTER TABLE command.checkpoints ALTER COLUMN state DROP NOT NULL;
