-- A fork keeps the overrides of its source session (seed 002), as they were, not as the
-- source changes them later: the first time a forked session's switches are read (its
-- first packet, turn or GET /v1/session, right after the fork in practice), its row is
-- made from its source's (none set there: a row that sets none, following the org).
-- From then on the fork's switches are its own.
CREATE OR REPLACE FUNCTION recall.session_switches(p_org text, p_session text, p_fork_of text)
RETURNS TABLE (use boolean, generate boolean, use_set boolean, generate_set boolean)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
BEGIN
    IF p_fork_of IS NOT NULL THEN
        INSERT INTO recall.session_settings (org, session, use, generate, updated_by)
        SELECT p_org, p_session, f.use, f.generate, 'fork of ' || p_fork_of
        FROM (SELECT 1) AS one
        LEFT JOIN recall.session_settings f ON f.org = p_org AND f.session = p_fork_of
        ON CONFLICT (org, session) DO NOTHING;
    END IF;
    RETURN QUERY
    SELECT coalesce(s.use, o.session_use, true),
           coalesce(s.generate, o.session_generate, true),
           s.use IS NOT NULL, s.generate IS NOT NULL
    FROM (SELECT 1) AS one
    LEFT JOIN recall.session_settings s ON s.org = p_org AND s.session = p_session
    LEFT JOIN recall.org_policies o ON o.org = p_org;
END
$$;
