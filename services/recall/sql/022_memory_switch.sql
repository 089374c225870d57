-- Seed 004's memory capability, the org's switch: off, runs are given no memory, agents
-- read and change none, and the extractor learns nothing; what is held stays. The command
-- service's writer and the extractor read it here, as they read the org's other limits.
ALTER TABLE recall.org_policies ADD COLUMN memory boolean NOT NULL DEFAULT true;
