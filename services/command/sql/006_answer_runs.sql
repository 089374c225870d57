-- A checkpoint stores the answers a stream gave since the last one (StreamState.results,
-- with the digests a repeat is held to) as a row: a run of answers from place ``position``
-- to ``last`` in the order of the stream's answers. A run goes when the stream keeps none
-- of its answers any more (``last`` below the oldest kept); where runs overlap, the later
-- one's answer stands. The stream's row in command.stream_states held every kept answer
-- before, so each checkpoint rewrote up to a thousand answers (about 140 KB) for a stream
-- that had taken one command; one answer a row cost Postgres twice what that did.
CREATE TABLE command.stream_answers (
    events_partition integer NOT NULL,
    stream_id        text    NOT NULL,
    position         bigint  NOT NULL,
    last             bigint  NOT NULL,
    answers          bytea   NOT NULL,
    PRIMARY KEY (events_partition, stream_id, position)
);
ALTER TABLE command.stream_answers ALTER COLUMN answers SET STORAGE EXTERNAL;
