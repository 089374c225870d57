-- A session's processed turns in the order the extractor handled them, each id once, and
-- only the turns of the session's own scope (QA: turns handled in one transaction share
-- its time, so their order was by id, and a member's private turn sent from the session
-- was listed to every member of it).
ALTER TABLE extractor.turns ADD COLUMN handled bigint GENERATED ALWAYS AS IDENTITY;
CREATE INDEX turns_stream ON extractor.turns (stream_id, handled) WHERE stream_id IS NOT NULL;
DROP INDEX extractor.turns_session;

CREATE OR REPLACE FUNCTION extractor.processed(p_session text, p_limit integer)
RETURNS TABLE (turn_id text, processed_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT t.turn_id, max(t.processed_at) FROM extractor.turns t
    WHERE t.stream_id = current_setting('engram.org', true) || '/session:' || p_session
      AND 'session:' || p_session = ANY (
          coalesce(nullif(current_setting('engram.scopes', true), ''), '{}')::text[])
    GROUP BY t.turn_id
    ORDER BY max(t.handled) DESC
    LIMIT p_limit
$$;
