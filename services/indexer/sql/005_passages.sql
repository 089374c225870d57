-- A vector a passage. The model reads the first 256 tokens of a text (about 1,000
-- characters), so a memory of up to 4,000 had its later part unknown to the vector
-- list. Now each passage of a long memory (engram.passages: at most 1,200 characters,
-- cut between sentences) has a vector of its own, and a search shows the passage its
-- vector was found by (seed 004: "the same chunk the ranking scored").
ALTER TABLE indexer.vectors ADD COLUMN passage smallint NOT NULL DEFAULT 0;
ALTER TABLE indexer.vectors DROP CONSTRAINT vectors_pkey;
ALTER TABLE indexer.vectors ADD PRIMARY KEY (item_id, model, passage);

-- A long memory's one vector stood for its head only: dropped, so that the re-embedding
-- pass (at the indexer's start, then every ENGRAM_INDEXER_REINDEX_INTERVAL_S) gives it a
-- vector a passage. Until then it is found by its words.
DELETE FROM indexer.vectors v
USING memory.items i
WHERE i.item_id = v.item_id AND i.content_length > 1200;

-- indexer.nearest as in 004_small_sets_exact.sql, naming each item once, by its nearest
-- passage. A long memory's passages may take more than one of the rows read; the few
-- extra rows read (+ 8) absorb that for the rare long one.
DROP FUNCTION indexer.nearest(text, text[], text, vector, double precision, integer);
CREATE FUNCTION indexer.nearest(
    p_org text, p_scopes text[], p_model text, p_query vector,
    p_max_distance double precision, p_limit integer)
RETURNS TABLE (item_id text, distance double precision, passage integer)
LANGUAGE plpgsql STABLE
SET hnsw.iterative_scan = 'relaxed_order'
AS $fn$
DECLARE
    dims integer;
    few boolean;
BEGIN
    SELECT m.dimensions INTO dims FROM indexer.models m WHERE m.model = p_model;
    IF dims IS NULL THEN
        RETURN;  -- no vector was ever written with this model
    END IF;
    SELECT count(*) < 1000 INTO few FROM (
        SELECT 1 FROM indexer.vectors v
        WHERE v.org = p_org AND v.model = p_model AND v.scope = ANY (p_scopes)
        LIMIT 1000) AS bounded;
    -- "+ 0" keeps the planner off the graph: only the bare distance can use it.
    RETURN QUERY EXECUTE format($q$
        WITH nearest AS MATERIALIZED (
            SELECT v.item_id, v.revision, v.passage::integer AS passage,
                   (v.embedding::vector(%1$s) <=> $1)::double precision AS distance
            FROM indexer.vectors v
            WHERE v.model = %2$L AND v.org = $2 AND v.scope = ANY ($3)
            ORDER BY (v.embedding::vector(%1$s) <=> $1) %3$s
            LIMIT $5 + 8),
        best AS (
            SELECT DISTINCT ON (n.item_id) n.item_id, n.revision, n.passage, n.distance
            FROM nearest n
            ORDER BY n.item_id, n.distance, n.passage)
        SELECT b.item_id, b.distance, b.passage
        FROM best b JOIN memory.items i ON i.item_id = b.item_id
        WHERE i.org = $2 AND i.status = 'active' AND i.revision = b.revision
          AND b.distance <= $4
        ORDER BY b.distance, b.item_id
        LIMIT $5$q$, dims, p_model, CASE WHEN few THEN '+ 0' ELSE '' END)
    USING p_query, p_org, p_scopes, p_max_distance, p_limit;
END
$fn$;
