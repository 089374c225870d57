-- indexer.nearest, searching a small set exactly. When the principal's scopes hold
-- fewer than 1,000 vectors of the model, ranking all of them costs about a millisecond,
-- less than a filtered walk of a large graph, and it cannot miss: a small HNSW graph
-- churned by many inserts and deletes (test runs did it) had left a new vector
-- unreachable, and only a REINDEX brought it back. Larger sets go through the graph
-- as before (see 003_nearest_first.sql).
CREATE OR REPLACE FUNCTION indexer.nearest(
    p_org text, p_scopes text[], p_model text, p_query vector,
    p_max_distance double precision, p_limit integer)
RETURNS TABLE (item_id text, distance double precision)
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
            SELECT v.item_id, v.revision,
                   (v.embedding::vector(%1$s) <=> $1)::double precision AS distance
            FROM indexer.vectors v
            WHERE v.model = %2$L AND v.org = $2 AND v.scope = ANY ($3)
            ORDER BY (v.embedding::vector(%1$s) <=> $1) %3$s
            LIMIT $5 + 8)
        SELECT n.item_id, n.distance
        FROM nearest n JOIN memory.items i ON i.item_id = n.item_id
        WHERE i.org = $2 AND i.status = 'active' AND i.revision = n.revision
          AND n.distance <= $4
        ORDER BY n.distance, n.item_id
        LIMIT $5$q$, dims, p_model, CASE WHEN few THEN '+ 0' ELSE '' END)
    USING p_query, p_org, p_scopes, p_max_distance, p_limit;
END
$fn$;
