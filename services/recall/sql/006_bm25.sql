-- Full-text recall ranked by BM25 over the principal's visible streams (see
-- projector 003_terms.sql), without ranking every item that contains a common word:
--   1. each query word reads at most 100 postings per stream, the strongest first
--      (a rare word's list is complete; a common word's holds its best items);
--   2. the items found are ranked by the BM25 of the lists they appeared in;
--   3. the best of those (twice the limit) are scored exactly, with every query word
--      (at most its 32 rarest words, which bounds what a long query costs).
-- Like recall.full_text it runs as its owner and applies the row-level rule itself
-- from the transaction's principal.
CREATE FUNCTION recall.bm25(p_query text, p_limit integer)
RETURNS TABLE (item_id text, revision integer, scope text, kind text, title text,
               content text, pinned boolean, updated_at double precision, rank real)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
AS $fn$
#variable_conflict use_column
BEGIN
    -- PL/pgSQL keeps the plan across calls (a SQL function planned it every time).
    RETURN QUERY
    WITH streams AS (
        SELECT recall.org() || '/' || s AS stream_id
        FROM unnest(recall.visible_scopes()) AS s
    ), words AS (
        SELECT array_agg(DISTINCT l) AS lexemes
        FROM unnest(tsvector_to_array(to_tsvector('english', p_query))) AS l
    ), totals AS (
        SELECT sum(c.docs)::double precision AS n,
               sum(c.length)::double precision / nullif(sum(c.docs), 0) AS avgdl
        FROM memory.term_counts c JOIN streams s ON s.stream_id = c.stream_id
        WHERE c.lexeme = ''
    ), idf AS (
        SELECT c.lexeme,
               ln(1 + (t.n - sum(c.docs) + 0.5) / (sum(c.docs) + 0.5)) AS idf
        FROM memory.term_counts c JOIN streams s ON s.stream_id = c.stream_id, words w,
             totals t
        WHERE c.lexeme = ANY (w.lexemes) AND c.docs > 0
        GROUP BY c.lexeme, t.n
        ORDER BY 2 DESC
        LIMIT 32  -- a long query: its 32 rarest words, so the cost stays bounded
    ), chosen AS (
        SELECT array_agg(idf.lexeme) AS lexemes FROM idf
    ), found AS (
        SELECT strongest.item_id
        FROM idf, streams s, totals t, LATERAL (
            SELECT p.item_id, p.tf, p.dl FROM memory.terms p
            WHERE p.stream_id = s.stream_id AND p.lexeme = idf.lexeme
            ORDER BY p.impact DESC
            LIMIT 100) AS strongest
        GROUP BY strongest.item_id
        ORDER BY sum(idf.idf * memory.bm25_weight(strongest.tf, strongest.dl, t.avgdl)) DESC
        LIMIT p_limit * 2
    ), scored AS (
        SELECT p.item_id, sum(idf.idf * memory.bm25_weight(p.tf, p.dl, t.avgdl)) AS score
        FROM found f CROSS JOIN chosen w
        JOIN memory.terms p ON p.item_id = f.item_id AND p.lexeme = ANY (w.lexemes)
        JOIN idf ON idf.lexeme = p.lexeme, totals t
        GROUP BY p.item_id
        ORDER BY score DESC
        LIMIT p_limit + 10  -- room for items that expired since they were indexed
    )
    SELECT i.item_id, i.revision, i.scope, i.kind, i.title, i.content, i.pinned,
           extract(epoch FROM i.updated_at)::double precision, s.score::real
    FROM scored s JOIN memory.items i ON i.item_id = s.item_id
    WHERE i.org = recall.org() AND i.scope = ANY (recall.visible_scopes())
      AND i.status = 'active' AND (i.expires_at IS NULL OR i.expires_at > now())
    ORDER BY 9 DESC, 8 DESC, 1
    LIMIT p_limit;
END
$fn$;

REVOKE ALL ON FUNCTION recall.bm25(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION recall.bm25(text, integer) TO engram_recall;
