-- recall.exact checks each phrase as a pattern (``core.phrase_pattern``): its words as
-- written, any run of spaces between them, not inside a longer word (QA: "ERR-1042" found
-- "ERR-10423", and a phrase never matched text whose words two spaces or a line apart).
-- The phrases still find their candidates through the term index; the patterns, case
-- aside (~*), decide.
DROP FUNCTION recall.exact(text[], integer);
CREATE FUNCTION recall.exact(p_phrases text[], p_patterns text[], p_limit integer)
RETURNS TABLE (item_id text, revision integer, scope text, kind text, title text,
               content text, pinned boolean, updated_at double precision)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    v_words text[] := tsvector_to_array(to_tsvector('english', array_to_string(p_phrases, ' ')));
    v_streams text[] := ARRAY(SELECT recall.org() || '/' || s
                              FROM unnest(recall.visible_scopes()) AS s);
BEGIN
    IF cardinality(v_words) = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT i.item_id, i.revision, i.scope, i.kind, i.title, i.content, i.pinned,
           extract(epoch FROM i.updated_at)::double precision
    FROM memory.items i
    WHERE i.org = recall.org() AND i.scope = ANY (recall.visible_scopes())
      AND i.status = 'active' AND (i.expires_at IS NULL OR i.expires_at > now())
      AND i.item_id IN (
            SELECT t.item_id FROM memory.terms t
            WHERE t.stream_id = ANY (v_streams) AND t.lexeme = ANY (v_words)
            GROUP BY t.item_id HAVING count(DISTINCT t.lexeme) = cardinality(v_words))
      AND NOT EXISTS (
            SELECT 1 FROM unnest(p_patterns) AS pattern
            WHERE NOT (coalesce(i.title, '') || E'\n' || i.content) ~* pattern)
    ORDER BY i.updated_at DESC, i.item_id
    LIMIT p_limit;
END
$fn$;
GRANT EXECUTE ON FUNCTION recall.exact(text[], text[], integer) TO engram_recall;
