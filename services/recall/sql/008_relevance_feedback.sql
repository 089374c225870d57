-- Relevance feedback for the full-text list of a hybrid search (see the README's design
-- notes: "Relevance feedback"). The best answers of the first pass (fused from both
-- retrievers) lend the query their strongest other words, and the full-text candidates
-- (the pool) are scored again with them:
--   score = BM25 of the query's words (its 32 rarest, as recall.bm25 counts them)
--         + p_weight * BM25 of the p_terms lent words that weigh most in the feedback
--           items (their summed term frequency times IDF).
-- A lent word is one the query lacks and at least two of the pool and feedback items
-- hold: a word only one item holds could only lift that one item, and skipping those
-- keeps the IDF lookups few.
-- Only the pool's items are scored (no second search): the cost is bounded by the pool
-- and the feedback items, not by the scope's size. Their words and term frequencies come
-- from the items' tsvector (what the term index holds for them), and only items the
-- principal may see contribute: an id the caller may not see adds nothing.
-- Like recall.bm25 it runs as its owner and applies the row-level rule itself.
CREATE FUNCTION recall.bm25_feedback(
    p_query text, p_feedback text[], p_pool text[], p_terms integer,
    p_weight double precision)
RETURNS TABLE (item_id text, score double precision)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
AS $fn$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH streams AS (
        SELECT recall.org() || '/' || s AS stream_id
        FROM unnest(recall.visible_scopes()) AS s
    ), words AS (
        SELECT coalesce(array_agg(DISTINCT l), '{}') AS lexemes
        FROM unnest(tsvector_to_array(to_tsvector('english', p_query))) AS l
    ), visible AS MATERIALIZED (  -- every word of the pool and feedback items (their
                                  -- index rows, read from the items by key)
        SELECT i.item_id, i.item_id = ANY (p_feedback) AS lends,
               i.item_id = ANY (p_pool) AS pooled,
               u.lexeme, coalesce(cardinality(u.positions), 1) AS tf, length(i.tsv) AS dl
        FROM memory.items i, unnest(i.tsv) AS u
        WHERE i.item_id = ANY (p_pool || p_feedback)
          AND i.org = recall.org() AND i.scope = ANY (recall.visible_scopes())
          AND i.status = 'active'
    ), lent AS MATERIALIZED (
        SELECT v.lexeme, sum(v.tf) FILTER (WHERE v.lends) AS tf
        FROM visible v, words w
        WHERE NOT (v.lexeme = ANY (w.lexemes))
        GROUP BY v.lexeme
        HAVING bool_or(v.lends) AND count(*) >= 2  -- an item holds a word once
    ), wanted AS MATERIALIZED (
        SELECT array_prepend('', w.lexemes
                                 || coalesce((SELECT array_agg(l.lexeme) FROM lent l), '{}'))
                   AS lexemes
        FROM words w
    ), counts AS (  -- the folded counts, the deltas of a batch not folded yet, and
                    -- the feedback's term frequencies (in one list: no join needed)
        SELECT c.lexeme, c.docs, c.length, 0::bigint AS lent
        FROM memory.term_counts c JOIN streams s ON s.stream_id = c.stream_id, wanted x
        WHERE c.lexeme = ANY (x.lexemes)
        UNION ALL
        SELECT d.lexeme, d.docs, d.length, 0
        FROM memory.term_deltas d JOIN streams s ON s.stream_id = d.stream_id, wanted x
        WHERE d.lexeme = ANY (x.lexemes)
        UNION ALL
        SELECT l.lexeme, 0, 0, l.tf FROM lent l
    ), totals AS (
        SELECT sum(c.docs)::double precision AS n,
               sum(c.length)::double precision / nullif(sum(c.docs), 0) AS avgdl
        FROM counts c
        WHERE c.lexeme = ''
    ), idf AS (
        SELECT c.lexeme, sum(c.lent) AS lent,
               ln(1 + (t.n - sum(c.docs) + 0.5) / (sum(c.docs) + 0.5)) AS idf
        FROM counts c, totals t
        WHERE c.lexeme <> ''
        GROUP BY c.lexeme, t.n
        HAVING sum(c.docs) > 0
    ), weights AS (
        (SELECT i.lexeme, i.idf AS weight
         FROM idf i, words w
         WHERE i.lexeme = ANY (w.lexemes)
         ORDER BY i.idf DESC
         LIMIT 32)
        UNION ALL
        (SELECT i.lexeme, p_weight * i.idf
         FROM idf i
         WHERE i.lent > 0
         ORDER BY i.lent * i.idf DESC, i.lexeme
         LIMIT p_terms)
    ), chosen AS MATERIALIZED (
        SELECT array_agg(x.lexeme) AS lexemes, array_agg(x.weight) AS weights FROM weights x
    )
    SELECT v.item_id,
           sum(w.weights[array_position(w.lexemes, v.lexeme)]
               * memory.bm25_weight(v.tf, v.dl, t.avgdl)) AS score
    FROM visible v CROSS JOIN chosen w CROSS JOIN totals t
    WHERE v.pooled AND v.lexeme = ANY (w.lexemes)
    GROUP BY v.item_id;
END
$fn$;

REVOKE ALL ON FUNCTION recall.bm25_feedback(text, text[], text[], integer, double precision)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION recall.bm25_feedback(text, text[], text[], integer, double precision)
    TO engram_recall;
