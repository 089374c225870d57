-- Stream states are stored as they are pickled, without TOAST compression: pglz was the
-- busiest function in Postgres during the sustained write benchmark (about 2% of the
-- machine, compressing checkpoints from about 69 to 47 KB a stream), and most of a state
-- is sealed text, which does not compress. Rows already stored keep their compression.
ALTER TABLE command.stream_states ALTER COLUMN state SET STORAGE EXTERNAL;
