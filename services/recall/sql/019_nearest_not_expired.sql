-- Vector recall leaves expired memories out, as every other retriever does (a code review
-- found recall.nearest taking any active item the indexer's nearest vectors named).
CREATE OR REPLACE FUNCTION recall.nearest(p_model text, p_query text,
                                          p_max_distance double precision, p_limit integer)
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
    WHERE i.status = 'active' AND (i.expires_at IS NULL OR i.expires_at > now())
    ORDER BY n.distance, n.item_id
$$;
