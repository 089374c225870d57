-- Proposals are read as their memories are: within the org, in the scopes the caller sees.
GRANT SELECT ON memory.proposals TO engram_recall;
ALTER TABLE memory.proposals ENABLE ROW LEVEL SECURITY;
CREATE POLICY recall_proposals ON memory.proposals FOR SELECT TO engram_recall
    USING (org = recall.org() AND scope = ANY (recall.visible_scopes()));
