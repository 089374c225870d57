-- The extractor's own state. No message text is ever stored here: only ids,
-- flags and counters, so forgetting a memory leaves nothing of it behind.
CREATE SCHEMA IF NOT EXISTS extractor;

-- Consumer offsets, written in the same transaction as the rows they produced.
CREATE TABLE extractor.offsets (
    consumer    text NOT NULL,
    topic       text NOT NULL,
    partition   integer NOT NULL,
    next_offset bigint NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, topic, partition)
);

-- Which source ids (message or turn ids) each remembered item came from. When
-- the item is forgotten its sources are suppressed: no extraction from them again.
CREATE TABLE extractor.sources (
    org        text NOT NULL,
    source_id  text NOT NULL,
    item_id    text NOT NULL,
    suppressed boolean NOT NULL DEFAULT false,
    PRIMARY KEY (org, source_id, item_id)
);
CREATE INDEX sources_item ON extractor.sources (org, item_id);

-- Turns already handled, so a turn published or read twice costs no AI request.
CREATE TABLE extractor.turns (
    org          text NOT NULL,
    turn_id      text NOT NULL,
    method       text NOT NULL CHECK (method IN ('rules', 'ai', 'rules-fallback')),
    proposals    integer NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, turn_id)
);

-- MEMORY_AI_DAILY_REQUEST_LIMIT: requests reserved per UTC day, across replicas.
CREATE TABLE extractor.ai_budget (
    day  date PRIMARY KEY,
    used integer NOT NULL
);
