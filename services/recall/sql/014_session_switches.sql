-- Session switches (seed 002): `use` (a run of the session is given the session's own
-- memories) and `generate` (the extractor learns from its turns). The org sets a default
-- for each; a session may override each, or follow the default again (NULL).
ALTER TABLE recall.org_policies
    ADD COLUMN session_use boolean NOT NULL DEFAULT true,
    ADD COLUMN session_generate boolean NOT NULL DEFAULT true;

CREATE TABLE recall.session_settings (
    org        text NOT NULL,
    session    text NOT NULL,
    use        boolean,
    generate   boolean,
    updated_by text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, session)
);
GRANT SELECT, INSERT, UPDATE ON recall.session_settings TO engram_recall;
ALTER TABLE recall.session_settings ENABLE ROW LEVEL SECURITY;
CREATE POLICY recall_session_settings ON recall.session_settings FOR ALL TO engram_recall
    USING (org = recall.org()) WITH CHECK (org = recall.org());

-- A session's switches as they apply: its own, else those of the session it forks (a fork
-- keeps its source's overrides), else the org's, else on.
CREATE FUNCTION recall.session_switches(p_org text, p_session text, p_fork_of text)
RETURNS TABLE (use boolean, generate boolean, use_set boolean, generate_set boolean)
LANGUAGE sql STABLE AS $$
    SELECT coalesce(s.use, f.use, o.session_use, true),
           coalesce(s.generate, f.generate, o.session_generate, true),
           coalesce(s.use, f.use) IS NOT NULL, coalesce(s.generate, f.generate) IS NOT NULL
    FROM (SELECT 1) AS one
    LEFT JOIN recall.session_settings s ON s.org = p_org AND s.session = p_session
    LEFT JOIN recall.session_settings f ON f.org = p_org AND f.session = p_fork_of
    LEFT JOIN recall.org_policies o ON o.org = p_org
$$;
GRANT EXECUTE ON FUNCTION recall.session_switches(text, text, text) TO engram_recall;
