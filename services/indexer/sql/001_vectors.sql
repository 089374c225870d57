-- The indexer's tables. Only the indexer writes here; it reads memory.items.
CREATE EXTENSION IF NOT EXISTS vector;
CREATE SCHEMA IF NOT EXISTS indexer;

-- Consumer offsets, written in the same transaction as the rows they produced.
CREATE TABLE indexer.offsets (
    consumer    text NOT NULL,
    topic       text NOT NULL,
    partition   integer NOT NULL,
    next_offset bigint NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, topic, partition)
);

-- The indexer's own view of each item, folded from the events it consumed. It is
-- what makes a late vector safe even when the projector lags: a forget or a newer
-- revision is known here as soon as the indexer has read it. The text is kept
-- sealed (ciphertext under the item's key, shredded on forget), never in clear.
CREATE TABLE indexer.items (
    item_id       text PRIMARY KEY,
    org           text NOT NULL,
    scope         text NOT NULL,
    status        text,                  -- NULL: the events that set it were not seen
    revision      integer NOT NULL,
    text_revision integer,               -- the revision whose text is current
    content       jsonb,                 -- Sealed; NULL once forgotten
    title         jsonb,                 -- Sealed; NULL once forgotten
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- One vector per item and model, always of the item's current text and labelled
-- with its current revision. The column is untyped because each model has its own
-- dimensions; each model gets a partial HNSW index on ``embedding::vector(N)``
-- (created by the indexer when it starts with that model, see indexer.models).
CREATE TABLE indexer.vectors (
    item_id    text NOT NULL,
    model      text NOT NULL,
    revision   integer NOT NULL,
    org        text NOT NULL,
    scope      text NOT NULL,
    embedding  vector NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (item_id, model)
);
-- For small tenants an exact scan of the org's vectors beats the global graph.
CREATE INDEX vectors_tenant ON indexer.vectors (org, model, scope);

-- Every model vectors were written with: its dimensions and its HNSW index.
CREATE TABLE indexer.models (
    model      text PRIMARY KEY,
    dimensions integer NOT NULL CHECK (dimensions BETWEEN 1 AND 2000),
    index_name text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Background re-embedding: one row per pass, resumable from ``cursor`` (the last
-- item id done), with its progress written in the same transaction as its vectors.
CREATE TABLE indexer.reindex_jobs (
    job_id      bigserial PRIMARY KEY,
    model       text NOT NULL,
    org         text,                    -- NULL: every org
    status      text NOT NULL CHECK (status IN ('running', 'done')),
    cursor      text NOT NULL DEFAULT '',
    total       integer NOT NULL DEFAULT 0,
    embedded    integer NOT NULL DEFAULT 0,
    dropped     integer NOT NULL DEFAULT 0,
    started_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz
);
CREATE UNIQUE INDEX reindex_jobs_one_running
    ON indexer.reindex_jobs (model, coalesce(org, '')) WHERE status = 'running';

-- Remote AI requests per day, reserved atomically before each request.
CREATE TABLE indexer.ai_budget (
    day  date PRIMARY KEY,
    used integer NOT NULL DEFAULT 0
);

-- Nearest vectors of the configured model for an org's scopes, current revision
-- of active items only. A model's HNSW index is a partial expression index, which
-- only a statement carrying the same cast and the model as a literal can use, so
-- the statement is built here; the function runs with the caller's rights (RLS).
-- The inner scan keeps searching the graph until it has enough rows that pass the
-- tenant filters (iterative scan); the distance cut is applied to those rows.
CREATE FUNCTION indexer.nearest(
    p_org text, p_scopes text[], p_model text, p_query vector,
    p_max_distance double precision, p_limit integer)
RETURNS TABLE (item_id text, distance double precision)
LANGUAGE plpgsql STABLE
SET hnsw.iterative_scan = 'relaxed_order'
AS $fn$
DECLARE
    dims integer;
BEGIN
    SELECT m.dimensions INTO dims FROM indexer.models m WHERE m.model = p_model;
    IF dims IS NULL THEN
        RETURN;  -- no vector was ever written with this model
    END IF;
    RETURN QUERY EXECUTE format($q$
        WITH nearest AS MATERIALIZED (
            SELECT v.item_id, (v.embedding::vector(%1$s) <=> $1)::double precision AS distance
            FROM indexer.vectors v
            JOIN memory.items i ON i.item_id = v.item_id
            WHERE v.model = %2$L AND v.org = $2 AND v.scope = ANY ($3)
              AND i.org = $2 AND i.status = 'active' AND i.revision = v.revision
            ORDER BY v.embedding::vector(%1$s) <=> $1
            LIMIT $5)
        SELECT n.item_id, n.distance FROM nearest n
        WHERE n.distance <= $4
        ORDER BY n.distance, n.item_id$q$, dims, p_model)
    USING p_query, p_org, p_scopes, p_max_distance, p_limit;
END
$fn$;
