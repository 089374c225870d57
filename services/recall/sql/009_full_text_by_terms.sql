-- recall.full_text (the ts_rank_cd ranking, 004_search_functions.sql) finds its matches
-- through the term index, not through a GIN index on memory.items.tsv: the term index
-- holds every word of every active item, by stream, which is exactly the set this
-- search ranks. The projector then keeps one full-text index instead of two
-- (its 010_one_full_text_index.sql drops the GIN index, which cost about a fifth of
-- Postgres's work for each new item).
--   1. the query's words (to_tsvector of the OR-ed query gives the lexemes to_tsquery
--      does: same parser, same dictionaries) are looked up per visible stream;
--   2. the items found are checked against the query and ranked by ts_rank_cd, as
--      before.
CREATE OR REPLACE FUNCTION recall.full_text(p_query text, p_limit integer)
RETURNS TABLE (item_id text, revision integer, scope text, kind text, title text,
               content text, pinned boolean, updated_at double precision, rank real)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
AS $$
    WITH streams AS (
        SELECT recall.org() || '/' || s AS stream_id
        FROM unnest(recall.visible_scopes()) AS s
    ), found AS (
        SELECT DISTINCT p.item_id
        FROM streams s,
             unnest(tsvector_to_array(to_tsvector('english', p_query))) AS l,
             LATERAL (SELECT t.item_id FROM memory.terms t
                      WHERE t.stream_id = s.stream_id AND t.lexeme = l) AS p
    )
    SELECT i.item_id, i.revision, i.scope, i.kind, i.title, i.content, i.pinned,
           extract(epoch FROM i.updated_at)::double precision, ts_rank_cd(i.tsv, q)
    FROM found f JOIN memory.items i ON i.item_id = f.item_id,
         to_tsquery('english', p_query) AS q
    WHERE i.org = recall.org() AND i.scope = ANY (recall.visible_scopes())
      AND i.status = 'active' AND (i.expires_at IS NULL OR i.expires_at > now())
      AND i.tsv @@ q
    ORDER BY 9 DESC, 8 DESC, 1
    LIMIT p_limit
$$;
