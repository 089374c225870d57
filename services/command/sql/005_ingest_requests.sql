-- An ingest under an Idempotency-Key is one request (QA): the key (a keyed hash of it) and
-- a keyed digest of the request it was first sent with, per stream. The key sent again
-- with another request is refused whole, whatever became of the first one's messages (a
-- refused message leaves its command id unused, so the writer alone cannot tell).
-- Rows a week old go: a retry comes within minutes.
CREATE TABLE command.ingest_requests (
    stream_id  text        NOT NULL,
    key_hash   text        NOT NULL,
    digest     text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (stream_id, key_hash)
);
CREATE INDEX ingest_requests_created ON command.ingest_requests (created_at);
