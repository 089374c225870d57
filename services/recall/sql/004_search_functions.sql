-- Under row-level security Postgres may not use an index for a non-leakproof operator
-- (tsvector @@, vector <=>) before the policy has filtered rows, so every search would
-- scan the whole org. These two functions run as their owner and apply exactly the
-- policy's rule themselves, from the same transaction-local principal: the GIN and
-- HNSW indexes work, and the recall role still sees only its principal's rows.
CREATE FUNCTION recall.full_text(p_query text, p_limit integer)
RETURNS TABLE (item_id text, revision integer, scope text, kind text, title text,
               content text, pinned boolean, updated_at double precision, rank real)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
AS $$
    SELECT i.item_id, i.revision, i.scope, i.kind, i.title, i.content, i.pinned,
           extract(epoch FROM i.updated_at)::double precision, ts_rank_cd(i.tsv, q)
    FROM memory.items i, to_tsquery('english', p_query) AS q
    WHERE i.org = recall.org() AND i.scope = ANY (recall.visible_scopes())
      AND i.status = 'active' AND (i.expires_at IS NULL OR i.expires_at > now())
      AND i.tsv @@ q
    ORDER BY 9 DESC, 8 DESC, 1
    LIMIT p_limit
$$;

CREATE FUNCTION recall.nearest(p_model text, p_query text, p_max_distance double precision,
                               p_limit integer)
RETURNS TABLE (item_id text, revision integer, scope text, kind text, title text,
               content text, pinned boolean, updated_at double precision,
               distance double precision)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
AS $$
    SELECT i.item_id, i.revision, i.scope, i.kind, i.title, i.content, i.pinned,
           extract(epoch FROM i.updated_at)::double precision, n.distance
    FROM indexer.nearest(recall.org(), recall.visible_scopes(), p_model,
                         p_query::public.vector, p_max_distance, p_limit) AS n
    JOIN memory.items i ON i.item_id = n.item_id
    ORDER BY n.distance, n.item_id
$$;

REVOKE ALL ON FUNCTION recall.full_text(text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION recall.nearest(text, text, double precision, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION recall.full_text(text, integer) TO engram_recall;
GRANT EXECUTE ON FUNCTION recall.nearest(text, text, double precision, integer)
    TO engram_recall;
