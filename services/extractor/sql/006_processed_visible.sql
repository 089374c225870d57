-- A session's processed turns are read only with a token that names the session (a
-- review: any session of the org could be named). The transaction's scopes are recall's
-- principal's (engram.scopes), as recall.visible_scopes() reads them.
CREATE OR REPLACE FUNCTION extractor.processed(p_session text, p_limit integer)
RETURNS TABLE (turn_id text, processed_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT t.turn_id, t.processed_at FROM extractor.turns t
    WHERE t.org = current_setting('engram.org', true) AND t.author IS NOT NULL
      AND t.author::jsonb ->> 'session' = p_session
      AND 'session:' || p_session = ANY (
          coalesce(nullif(current_setting('engram.scopes', true), ''), '{}')::text[])
    ORDER BY t.processed_at DESC, t.turn_id
    LIMIT p_limit
$$;
