-- The org's revision-retention policy (DESIGN §4, seed 004): how many prior revisions each
-- memory keeps besides its current one; NULL keeps them all. The command service's writer
-- reads it (it decides what a change prunes), so the log says what was pruned and a
-- replay prunes the same.
ALTER TABLE recall.org_policies
    ADD COLUMN keep_revisions integer CHECK (keep_revisions BETWEEN 1 AND 1000);

-- Every revision of a memory the caller can see (GET /v1/memories/{id}/revisions).
GRANT SELECT ON memory.revisions TO engram_recall;
ALTER TABLE memory.revisions ENABLE ROW LEVEL SECURITY;
CREATE POLICY recall_revisions ON memory.revisions FOR SELECT TO engram_recall
    USING (org = recall.org() AND scope = ANY (recall.visible_scopes()));
