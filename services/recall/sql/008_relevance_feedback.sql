-- What relevance feedback needs from the term index (see the README's design notes:
-- "Relevance feedback"): for some words, how many items of the principal's visible
-- streams hold each (the folded counts plus the deltas of a batch not folded yet), the
-- streams' totals (the row with the empty lexeme: items and summed lengths), and which
-- of the words are the query's own. The words themselves come with the candidates (their
-- tsvector, which is what the term index holds for them); recall scores them in Python.
-- Like recall.bm25 it runs as its owner and applies the row-level rule itself.
-- recall.item_terms gives an item's words with their term frequencies, as the term index
-- counts them (projector 003_terms.sql), read by key under the caller's row-level rules.
-- As a function called per row it stays a lookup by key: joined to the rows of a search
-- function (which the planner expects 1,000 of), memory.items was read whole.
CREATE FUNCTION recall.item_terms(p_item_id text, OUT lexemes text[], OUT tfs integer[])
LANGUAGE sql STABLE AS $$
    SELECT array_agg(u.lexeme), array_agg(coalesce(cardinality(u.positions), 1))
    FROM memory.items i, unnest(i.tsv) AS u
    WHERE i.item_id = p_item_id
$$;
GRANT EXECUTE ON FUNCTION recall.item_terms(text) TO engram_recall;

CREATE FUNCTION recall.term_stats(p_query text, p_lexemes text[])
RETURNS TABLE (lexeme text, docs bigint, length bigint, in_query boolean)
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
    ), wanted AS MATERIALIZED (
        SELECT array_prepend('', w.lexemes || p_lexemes) AS lexemes FROM words w
    ), counts AS (
        SELECT c.lexeme, c.docs, c.length
        FROM memory.term_counts c JOIN streams s ON s.stream_id = c.stream_id, wanted x
        WHERE c.lexeme = ANY (x.lexemes)
        UNION ALL
        SELECT d.lexeme, d.docs, d.length
        FROM memory.term_deltas d JOIN streams s ON s.stream_id = d.stream_id, wanted x
        WHERE d.lexeme = ANY (x.lexemes)
    )
    SELECT c.lexeme, sum(c.docs)::bigint, sum(c.length)::bigint, c.lexeme = ANY (w.lexemes)
    FROM counts c, words w
    GROUP BY c.lexeme, w.lexemes
    HAVING sum(c.docs) > 0;
END
$fn$;

REVOKE ALL ON FUNCTION recall.term_stats(text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION recall.term_stats(text, text[]) TO engram_recall;
