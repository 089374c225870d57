-- Isolation enforced by Postgres: the recall service connects as engram_recall,
-- which can only read the read models, and only the rows of the principal that
-- each transaction names (set_config('engram.org' | 'engram.scopes' | 'engram.member')).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'engram_recall') THEN
        CREATE ROLE engram_recall LOGIN;  -- production: ALTER ROLE … PASSWORD, see README
    END IF;
END
$$;

GRANT USAGE ON SCHEMA memory, recall, indexer TO engram_recall;
GRANT SELECT ON memory.items, memory.generations TO engram_recall;
GRANT SELECT ON indexer.vectors, indexer.models TO engram_recall;
GRANT SELECT, INSERT ON recall.memory_contexts TO engram_recall;

CREATE FUNCTION recall.visible_scopes() RETURNS text[]
LANGUAGE sql STABLE AS $$
    SELECT coalesce(nullif(current_setting('engram.scopes', true), ''), '{}')::text[]
$$;
CREATE FUNCTION recall.org() RETURNS text
LANGUAGE sql STABLE AS $$ SELECT current_setting('engram.org', true) $$;
GRANT EXECUTE ON FUNCTION recall.visible_scopes(), recall.org() TO engram_recall;

ALTER TABLE memory.items ENABLE ROW LEVEL SECURITY;
CREATE POLICY recall_items ON memory.items FOR SELECT TO engram_recall
    USING (org = recall.org() AND scope = ANY (recall.visible_scopes()));

ALTER TABLE memory.generations ENABLE ROW LEVEL SECURITY;
CREATE POLICY recall_generations ON memory.generations FOR SELECT TO engram_recall
    USING (org = recall.org() AND scope = ANY (recall.visible_scopes()));

ALTER TABLE indexer.vectors ENABLE ROW LEVEL SECURITY;
CREATE POLICY recall_vectors ON indexer.vectors FOR SELECT TO engram_recall
    USING (org = recall.org() AND scope = ANY (recall.visible_scopes()));

ALTER TABLE recall.memory_contexts ENABLE ROW LEVEL SECURITY;
CREATE POLICY recall_contexts ON recall.memory_contexts FOR ALL TO engram_recall
    USING (org = recall.org() AND member = current_setting('engram.member', true))
    WITH CHECK (org = recall.org() AND member = current_setting('engram.member', true));
