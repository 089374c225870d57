-- Seed 002's `processed`: the items (turns) of a session the extractor has read for
-- memory. Recall answers them with the session's switches; it reads them through this
-- function, for the org its transaction names (engram.org), never another's.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'engram_recall') THEN
        CREATE ROLE engram_recall LOGIN;  -- as recall's migrations make it (either may run first)
    END IF;
END
$$;

CREATE INDEX turns_session ON extractor.turns (org, (author::jsonb ->> 'session'), processed_at)
    WHERE author IS NOT NULL;

CREATE FUNCTION extractor.processed(p_session text, p_limit integer)
RETURNS TABLE (turn_id text, processed_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT t.turn_id, t.processed_at FROM extractor.turns t
    WHERE t.org = current_setting('engram.org', true) AND t.author IS NOT NULL
      AND t.author::jsonb ->> 'session' = p_session
    ORDER BY t.processed_at DESC, t.turn_id
    LIMIT p_limit
$$;
REVOKE ALL ON FUNCTION extractor.processed(text, integer) FROM PUBLIC;
GRANT USAGE ON SCHEMA extractor TO engram_recall;
GRANT EXECUTE ON FUNCTION extractor.processed(text, integer) TO engram_recall;
