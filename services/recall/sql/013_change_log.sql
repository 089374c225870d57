-- The audit trail as a scope's change log (seed 002's agent memory log): the recall role
-- reads the rows of the scopes it sees.
GRANT SELECT ON memory.audit TO engram_recall;
ALTER TABLE memory.audit ENABLE ROW LEVEL SECURITY;
CREATE POLICY recall_audit ON memory.audit FOR SELECT TO engram_recall
    USING (org = recall.org() AND scope = ANY (recall.visible_scopes()));
