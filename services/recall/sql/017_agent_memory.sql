-- The org's agent memory switch (seed 002's agentMemory): when off, the extractor learns
-- nothing into agents' memory from their turns; saves, promotions and reads go on.
ALTER TABLE recall.org_policies
    ADD COLUMN agent_memory boolean NOT NULL DEFAULT true;
