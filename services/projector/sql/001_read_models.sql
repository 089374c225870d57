-- Read models built from engram.events. Only the projector writes here.
CREATE SCHEMA IF NOT EXISTS memory;
CREATE SCHEMA IF NOT EXISTS projector;

CREATE TABLE memory.items (
    item_id        text PRIMARY KEY,
    org            text NOT NULL,
    scope          text NOT NULL,
    stream_id      text NOT NULL,
    kind           text NOT NULL,
    status         text NOT NULL,          -- candidate | active | disabled | archived | forgotten
    key            text,
    title          text,                   -- NULL once forgotten
    content        text,                   -- NULL once forgotten
    content_length integer NOT NULL DEFAULT 0,
    pinned         boolean NOT NULL DEFAULT false,
    tags           text[] NOT NULL DEFAULT '{}',
    sources        text[] NOT NULL DEFAULT '{}',
    revision       integer NOT NULL,
    superseded_by  text,
    replaces       text,
    expires_at     timestamptz,
    created_by     jsonb NOT NULL,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (
        to_tsvector('english', coalesce(title, '') || ' ' || coalesce(key, '') || ' '
                               || coalesce(content, ''))) STORED
);
CREATE INDEX items_tsv ON memory.items USING gin (tsv);
CREATE INDEX items_visible ON memory.items (org, scope, status, updated_at DESC);

-- Every revision of every item; the text goes when the item is forgotten.
CREATE TABLE memory.revisions (
    item_id      text NOT NULL,
    revision     integer NOT NULL,
    org          text NOT NULL,
    scope        text NOT NULL,
    reason       text NOT NULL,
    title        text,
    content      text,
    content_hash text,
    actor        jsonb NOT NULL,
    command_id   text NOT NULL,
    occurred_at  timestamptz NOT NULL,
    PRIMARY KEY (item_id, revision)
);

-- What stays of a forgotten item: no content, only keyed hashes.
CREATE TABLE memory.tombstones (
    item_id        text PRIMARY KEY,
    org            text NOT NULL,
    scope          text NOT NULL,
    content_hashes text[] NOT NULL,
    revisions      integer NOT NULL,
    reason         text,
    actor          jsonb NOT NULL,
    command_id     text NOT NULL,
    forgotten_at   timestamptz NOT NULL
);

CREATE TABLE memory.generations (
    org        text NOT NULL,
    scope      text NOT NULL,
    generation bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (org, scope)
);

-- The audit trail (who, when, which command) and the (stream_id, seq) guard:
-- an event seen twice is skipped, a different event at a taken seq is reported.
CREATE TABLE memory.audit (
    stream_id   text NOT NULL,
    seq         bigint NOT NULL,
    event_id    text NOT NULL UNIQUE,
    type        text NOT NULL,
    item_id     text NOT NULL,
    org         text NOT NULL,
    scope       text NOT NULL,
    revision    integer,
    actor       jsonb NOT NULL,
    command_id  text NOT NULL,
    occurred_at timestamptz NOT NULL,
    PRIMARY KEY (stream_id, seq)
);
CREATE INDEX audit_item ON memory.audit (item_id, seq);

CREATE VIEW memory.candidates AS
    SELECT * FROM memory.items WHERE status = 'candidate';

-- Where each stream's seq stands, and the gaps found in it (reported, never papered over).
CREATE TABLE projector.stream_heads (
    stream_id text PRIMARY KEY,
    seq       bigint NOT NULL
);
CREATE TABLE projector.anomalies (
    id          bigserial PRIMARY KEY,
    kind        text NOT NULL,             -- gap | conflicting_duplicate
    stream_id   text NOT NULL,
    expected    bigint,
    got         bigint NOT NULL,
    event_id    text NOT NULL,
    topic       text NOT NULL,
    partition   integer NOT NULL,
    "offset"    bigint NOT NULL,
    detected_at timestamptz NOT NULL DEFAULT now()
);

-- Consumer offsets, written in the same transaction as the rows they produced.
CREATE TABLE projector.offsets (
    consumer    text NOT NULL,
    topic       text NOT NULL,
    partition   integer NOT NULL,
    next_offset bigint NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, topic, partition)
);
