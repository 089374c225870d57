-- The org's quota of memories per scope (seed 004: storage quotas protect the shared
-- service): all but the forgotten count. NULL: no quota. The command service's writer reads
-- it as it decides, with keep_revisions and max_candidates_per_run.
ALTER TABLE recall.org_policies
    ADD COLUMN max_memories_per_scope integer
        CHECK (max_memories_per_scope BETWEEN 1 AND 1000000);
