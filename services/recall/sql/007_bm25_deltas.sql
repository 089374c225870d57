-- recall.bm25 over the term index as the projector keeps it since its
-- 005_term_deltas.sql (counts = folded counts + the deltas of a batch not folded yet),
-- and cheaper: a long query counts its 32 rarest words; the candidates are
-- materialised once and scored with one index scan per item. 006_bm25.sql holds the
-- first version; a migration once applied is never edited.
--   1. each query word reads at most 100 postings per stream, the strongest first
--      (a rare word's list is complete; a common word's holds its best items);
--   2. the items found are ranked by the BM25 of the lists they appeared in;
--   3. the best of those (twice the limit) are scored exactly, with every query word
--      (at most its 32 rarest words, which bounds what a long query costs).
-- Like recall.full_text it runs as its owner and applies the row-level rule itself
-- from the transaction's principal.
CREATE OR REPLACE FUNCTION recall.bm25(p_query text, p_limit integer)
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
    ), counts AS (  -- the folded counts, and the deltas of a batch not folded yet
        SELECT c.lexeme, c.docs, c.length
        FROM memory.term_counts c JOIN streams s ON s.stream_id = c.stream_id, words w
        WHERE c.lexeme = ANY (array_prepend('', w.lexemes))
        UNION ALL
        SELECT d.lexeme, d.docs, d.length
        FROM memory.term_deltas d JOIN streams s ON s.stream_id = d.stream_id, words w
        WHERE d.lexeme = ANY (array_prepend('', w.lexemes))
    ), totals AS (
        SELECT sum(c.docs)::double precision AS n,
               sum(c.length)::double precision / nullif(sum(c.docs), 0) AS avgdl
        FROM counts c
        WHERE c.lexeme = ''
    ), idf AS (
        SELECT c.lexeme,
               ln(1 + (t.n - sum(c.docs) + 0.5) / (sum(c.docs) + 0.5)) AS idf
        FROM counts c, totals t
        WHERE c.lexeme <> ''
        GROUP BY c.lexeme, t.n
        HAVING sum(c.docs) > 0
        ORDER BY 2 DESC
        LIMIT 32  -- a long query: its 32 rarest words, so the cost stays bounded
    ), chosen AS MATERIALIZED (  -- the words and their IDFs, in step
        SELECT array_agg(idf.lexeme) AS lexemes, array_agg(idf.idf) AS idfs FROM idf
    ), found AS MATERIALIZED (  -- computed once, then probed item by item
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
        -- One index scan per item for all the words (no join on the words, which made
        -- the planner probe each item once per word).
        SELECT p.item_id,
               sum(w.idfs[array_position(w.lexemes, p.lexeme)]
                   * memory.bm25_weight(p.tf, p.dl, t.avgdl)) AS score
        FROM found f CROSS JOIN chosen w CROSS JOIN totals t
        JOIN memory.terms p ON p.item_id = f.item_id AND p.lexeme = ANY (w.lexemes)
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
