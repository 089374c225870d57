-- indexer.nearest, searching the vectors before it checks the items. Joining
-- memory.items inside the ordered scan made the planner prefer an exact scan of the
-- org's vectors with one item lookup per vector (tens of milliseconds at 10,000
-- items); now the graph (or the tenant index, for a small org) yields the nearest
-- vectors first, and only those are checked against the read model: active, at the
-- vector's revision. A vector whose item the projector has not caught up with drops
-- out, as before; a few extra rows are read so that it rarely costs a place.
CREATE OR REPLACE FUNCTION indexer.nearest(
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
            SELECT v.item_id, v.revision,
                   (v.embedding::vector(%1$s) <=> $1)::double precision AS distance
            FROM indexer.vectors v
            WHERE v.model = %2$L AND v.org = $2 AND v.scope = ANY ($3)
            ORDER BY v.embedding::vector(%1$s) <=> $1
            LIMIT $5 + 8)
        SELECT n.item_id, n.distance
        FROM nearest n JOIN memory.items i ON i.item_id = n.item_id
        WHERE i.org = $2 AND i.status = 'active' AND i.revision = n.revision
          AND n.distance <= $4
        ORDER BY n.distance, n.item_id
        LIMIT $5$q$, dims, p_model)
    USING p_query, p_org, p_scopes, p_max_distance, p_limit;
END
$fn$;
