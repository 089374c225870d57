-- Per-item data keys, wrapped by the master key. Deleting a row is forgetting:
-- every sealed copy of the item's text in Kafka becomes unreadable.
CREATE SCHEMA IF NOT EXISTS keystore;
CREATE TABLE IF NOT EXISTS keystore.data_keys (
    key_id      text PRIMARY KEY,
    org         text NOT NULL,
    wrapped     bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
-- Keys destroyed by a forget: a key id listed here is never recreated.
CREATE TABLE IF NOT EXISTS keystore.shredded (
    key_id      text PRIMARY KEY,
    org         text NOT NULL,
    shredded_at timestamptz NOT NULL DEFAULT now()
);
