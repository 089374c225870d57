-- recall.nearest as in 020_expired_do_not_crowd.sql, naming with each item the passage
-- its vector was found by (indexer 005_passages.sql): a search shows that passage of a
-- long memory, the chunk the ranking scored (seed 004).
DROP FUNCTION recall.nearest(text, text, double precision, integer);
ALTER TYPE recall.nearest_hit ADD ATTRIBUTE passage integer;

CREATE FUNCTION recall.nearest(p_model text, p_query text,
                               p_max_distance double precision, p_limit integer)
RETURNS TABLE (item_id text, revision integer, scope text, kind text, title text,
               content text, pinned boolean, updated_at double precision,
               distance double precision, passage integer)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    v_depth integer;
    v_hits recall.nearest_hit[];
    v_dropped boolean;
BEGIN
    FOREACH v_depth IN ARRAY ARRAY[1, 10, 100] LOOP
        SELECT array_agg(ROW(i.item_id, i.revision, i.scope, i.kind, i.title, i.content,
                             i.pinned, extract(epoch FROM i.updated_at)::double precision,
                             n.distance, n.passage)::recall.nearest_hit
                         ORDER BY n.distance, n.item_id)
                   FILTER (WHERE i.expires_at IS NULL OR i.expires_at > now()),
               bool_or(i.expires_at <= now())
        INTO v_hits, v_dropped
        FROM indexer.nearest(recall.org(), recall.visible_scopes(), p_model,
                             p_query::public.vector, p_max_distance, p_limit * v_depth) AS n
        JOIN memory.items i ON i.item_id = n.item_id
        WHERE i.status = 'active';
        EXIT WHEN NOT coalesce(v_dropped, false) OR coalesce(cardinality(v_hits), 0) >= p_limit;
    END LOOP;
    RETURN QUERY
    SELECT u.item_id, u.revision, u.scope, u.kind, u.title, u.content, u.pinned,
           u.updated_at, u.distance, u.passage
    FROM unnest(v_hits) WITH ORDINALITY AS u(item_id, revision, scope, kind, title, content,
                                             pinned, updated_at, distance, passage, n)
    ORDER BY u.n
    LIMIT p_limit;
END
$fn$;

REVOKE ALL ON FUNCTION recall.nearest(text, text, double precision, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION recall.nearest(text, text, double precision, integer)
    TO engram_recall;
